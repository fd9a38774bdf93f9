#!/usr/bin/python3
"""Draws the capacity plot of a search experiment from capacity.csv (written by `memsim run`).

    plot_capacity.py capacity.csv --out DIR

DIR/capacity.png: grouped bars, one group per workload and one bar per planner, the bar's height the largest value
of the searched axis that trains (TSPLIT Table IV style); one panel per (budget, host-link bandwidth). A planner that
trains no value gets an "x" at zero; a value that reached the search's limit is marked "+".
Run with Debian's /usr/bin/python3 (python3-matplotlib).
"""
import argparse
import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as error:
    sys.stderr.write(
        f"plot_capacity.py: matplotlib is not available to {sys.executable} ({error}); "
        "install python3-matplotlib (Debian) or run memsim with --no-plots\n"
    )
    sys.exit(3)


def ordered_unique(values):
    seen = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def panel_title(budget_bytes, bandwidth):
    title = f"budget {int(budget_bytes) / 2**30:.3g} GiB"
    if bandwidth:
        title += f", host link {float(bandwidth) / 1e9:.3g} GB/s"
    return title


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.csv, newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        sys.stderr.write(f"plot_capacity.py: {args.csv} has no rows\n")
        return 2
    workloads = ordered_unique(row["workload"] for row in rows)
    planners = ordered_unique(row["planner"] for row in rows)
    panels = ordered_unique((row["budget_bytes"], row["bandwidth_bytes_per_s"]) for row in rows)
    axis = rows[0]["axis"]
    machine = rows[0]["machine"]

    width_in = min(16, max(6, 0.28 * len(workloads) * len(planners) + 2))
    figure, axes = plt.subplots(len(panels), 1, figsize=(width_in, 4.5 * len(panels)), squeeze=False)
    width = 0.8 / len(planners)
    for panel, (budget, bandwidth) in zip(axes[:, 0], panels):
        cells = {(row["workload"], row["planner"]): row for row in rows
                 if (row["budget_bytes"], row["bandwidth_bytes_per_s"]) == (budget, bandwidth)}
        for p, planner in enumerate(planners):
            xs, heights, missing = [], [], []
            for w, workload in enumerate(workloads):
                row = cells.get((workload, planner))
                x = w - 0.4 + width * (p + 0.5)
                if row is None or row["largest"] == "":
                    missing.append(x)
                    continue
                xs.append(x)
                heights.append(float(row["largest"]))
                label = row["largest"] + ("+" if row["reached_limit"] == "true" else "")
                panel.annotate(label, (x, float(row["largest"])), ha="center", va="bottom", fontsize=7)
            bars = panel.bar(xs, heights, width, label=planner, color=f"C{p}")
            if missing:
                panel.plot(missing, [0] * len(missing), "x", color=bars.patches[0].get_facecolor() if heights
                           else f"C{p}", markersize=8)
        panel.set_xticks(range(len(workloads)))
        panel.set_xticklabels(workloads)
        panel.set_ylabel(f"largest {axis}")
        panel.set_title(f"{panel_title(budget, bandwidth)} on {machine}", fontsize=10)
        panel.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(fontsize=8, ncol=min(len(planners), 3), loc="upper left")
    figure.suptitle(f"Largest {axis} that trains (x: none)")
    figure.tight_layout()
    figure.savefig(f"{args.out}/capacity.png", dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
