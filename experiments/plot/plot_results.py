#!/usr/bin/python3
"""Draws memsim sweep plots from results.csv (written by `memsim run`).

    plot_results.py results.csv --out DIR --plots time_vs_budget,peak_vs_budget

One PNG per plot kind (DIR/<kind>.png), one panel per (workload, host-link bandwidth), one line per
planner. Infeasible cells have no point. throughput_vs_batch (an experiment with sweep.batch) has one panel per
(base workload, budget, bandwidth): samples/s against the batch, as TSPLIT's Figures 12 and 13. Run with Debian's /usr/bin/python3 (python3-matplotlib).
"""
import argparse
import csv
import math
import sys

PLOTS = ("time_vs_budget", "peak_vs_budget", "overhead_vs_budget", "overhead_vs_bandwidth", "throughput_vs_batch")

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as error:
    sys.stderr.write(
        f"plot_results.py: matplotlib is not available to {sys.executable} ({error}); "
        "install python3-matplotlib (Debian) or run memsim with --no-plots\n"
    )
    sys.exit(3)


def byte_unit(max_bytes):
    for name, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if max_bytes >= size:
            return name, float(size)
    return "B", 1.0


def time_unit(max_seconds):
    for name, size in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if max_seconds >= size:
            return name, size
    return "ns", 1e-9


def read_rows(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    required = ("workload", "planner", "budget_bytes", "bandwidth_bytes_per_s", "feasible",
                "iteration_time_s", "ideal_time_s", "peak_device_bytes")
    if rows:
        missing = [name for name in required if name not in rows[0]]
        if missing:
            raise SystemExit(f"plot_results.py: {path}: missing columns {', '.join(missing)}")
    return rows


def groups_of(rows):
    """(workload, bandwidth) -> rows, in the order of first appearance (the sweep's stable order)."""
    groups = {}
    for row in rows:
        groups.setdefault((row["workload"], float(row["bandwidth_bytes_per_s"])), []).append(row)
    return groups


def planners_of(rows):
    planners = []
    for row in rows:
        if row["planner"] not in planners:
            planners.append(row["planner"])
    return planners


def panel_grid(count):
    """A figure for `count` panels, three to a row: (figure, axes, rows, columns)."""
    columns = min(count, 3)
    lines = math.ceil(count / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(6.4 * columns, 4.6 * lines), squeeze=False)
    return figure, axes, lines, columns


def finish(figure, axes, count, legend, title, out_path, top=1.0):
    """Blanks the unused panels, puts one legend for the figure below them (it never hides data) and saves."""
    lines, columns = len(axes), len(axes[0])
    for panel in range(count, lines * columns):
        axes[panel // columns][panel % columns].axis("off")
    figure.suptitle(title)
    columns_in_legend = min(max(len(legend), 1), 3 * columns)
    legend_lines = math.ceil(max(len(legend), 1) / columns_in_legend)
    figure.legend(list(legend.values()), list(legend.keys()), loc="lower center", ncol=columns_in_legend,
                  fontsize=9, frameon=False)
    figure.tight_layout(rect=(0, 0.035 * legend_lines / lines + 0.02, 1, top))
    figure.savefig(out_path, dpi=110)
    plt.close(figure)


def draw(kind, rows, out_path):
    groups = groups_of(rows)
    count = len(groups)
    figure, axes, lines, columns = panel_grid(count)
    markers = "osD^v<>ph*"
    legend = {}  # one legend for the figure, below the panels: it never hides data
    for panel, ((workload, bandwidth), group) in enumerate(groups.items()):
        axis = axes[panel // columns][panel % columns]
        x_name, x_scale = byte_unit(max(int(r["budget_bytes"]) for r in group))
        if kind == "time_vs_budget":
            values = [float(r["iteration_time_s"]) for r in group if r["feasible"] == "true"]
            values += [float(r["ideal_time_s"]) for r in group]
            y_name, y_scale = time_unit(max(values) if values else 1.0)
        else:
            values = [int(r["peak_device_bytes"]) for r in group if r["feasible"] == "true"]
            values += [int(r["budget_bytes"]) for r in group]
            y_name, y_scale = byte_unit(max(values))
        for index, planner in enumerate(planners_of(group)):
            mine = [r for r in group if r["planner"] == planner]
            points = sorted((int(r["budget_bytes"]), r) for r in mine if r["feasible"] == "true")
            metric = "iteration_time_s" if kind == "time_vs_budget" else "peak_device_bytes"
            xs = [budget / x_scale for budget, _ in points]
            ys = [float(r[metric]) / y_scale for _, r in points]
            line = axis.plot(xs, ys, marker=markers[index % len(markers)], linewidth=1.6, markersize=5,
                             label=planner)[0]
            # Infeasible budgets: an x on the axis in the planner's colour, so failures stay visible.
            failed = [int(r["budget_bytes"]) / x_scale for r in mine if r["feasible"] != "true"]
            if failed:
                axis.plot(failed, [0] * len(failed), linestyle="none", marker="x", markersize=8,
                          markeredgewidth=2, color=line.get_color(), clip_on=False, zorder=5)
        if any(r["feasible"] != "true" for r in group):
            axis.plot([], [], linestyle="none", marker="x", color="black", label="infeasible (no plan / OOM)")
        budgets = sorted({int(r["budget_bytes"]) for r in group})
        if kind == "time_vs_budget":
            ideal = float(group[0]["ideal_time_s"]) / y_scale
            axis.axhline(ideal, color="gray", linestyle="--", linewidth=1, label="ideal (compute only)")
            axis.set_ylabel(f"iteration time ({y_name})")
            axis.set_ylim(0, max(values) / y_scale * 1.12)
        else:
            xs = [b / x_scale for b in budgets]
            axis.plot(xs, [b / y_scale for b in budgets], color="gray", linestyle="--", linewidth=1,
                      label="budget")
            axis.set_ylabel(f"peak device memory ({y_name})")
            axis.set_ylim(0, max(values) / y_scale * 1.12)
        axis.set_xlabel(f"memory budget ({x_name})")
        machine = group[0].get("machine", "")
        axis.set_title(f"{workload} on {machine}, host link {bandwidth / 1e9:g} GB/s", fontsize=10)
        axis.grid(True, alpha=0.3)
        for handle, label in zip(*axis.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    title = "Iteration time vs memory budget" if kind == "time_vs_budget" else "Peak device memory vs budget"
    finish(figure, axes, count, legend, title, out_path)


def overhead_of(row):
    """Iteration time over the ideal (compute-only) time, minus one, in percent."""
    return 100.0 * (float(row["iteration_time_s"]) / float(row["ideal_time_s"]) - 1.0)


def clip_outliers(axis, highest):
    """A planner whose overhead is many times the others' (offload-only at small memory: +1000 %) would flatten
    every other line to the axis: cap the y axis at 3x the median of the planners' largest overheads and name,
    in the panel, the planners that go above it with their largest value."""
    if len(highest) < 3:
        return
    maxima = sorted(highest.values())
    median = maxima[len(maxima) // 2]
    top = max(3.0 * median, 1.0)
    if maxima[-1] <= top:
        return
    axis.set_ylim(top=top)
    above = [f"{planner} (up to {value:.0f} %)" for planner, value in highest.items() if value > top]
    axis.text(0.98, 0.97, "off the scale: " + ", ".join(above), transform=axis.transAxes, ha="right", va="top",
              fontsize=8, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})


def draw_overhead(kind, rows, out_path):
    """overhead_vs_budget: one panel per (workload, bandwidth), x = budget; overhead_vs_bandwidth: one panel per
    (workload, budget), x = host-link bandwidth. One line per planner; infeasible cells have no point."""
    by_budget = kind == "overhead_vs_budget"
    groups = {}
    for row in rows:
        key = (row["workload"], float(row["bandwidth_bytes_per_s"]) if by_budget else int(row["budget_bytes"]))
        groups.setdefault(key, []).append(row)
    count = len(groups)
    figure, axes, lines, columns = panel_grid(count)
    markers = "osD^v<>ph*"
    legend = {}
    for panel, ((workload, fixed), group) in enumerate(groups.items()):
        axis = axes[panel // columns][panel % columns]
        if by_budget:
            x_name, x_scale = byte_unit(max(int(r["budget_bytes"]) for r in group))
        highest = {}  # planner -> its largest overhead in this panel
        for index, planner in enumerate(planners_of(group)):
            mine = [r for r in group if r["planner"] == planner and r["feasible"] == "true"]
            if by_budget:
                points = sorted((int(r["budget_bytes"]) / x_scale, overhead_of(r)) for r in mine)
            else:
                points = sorted((float(r["bandwidth_bytes_per_s"]) / 1e9, overhead_of(r)) for r in mine)
            line = axis.plot([x for x, _ in points], [y for _, y in points], marker=markers[index % len(markers)],
                             linewidth=1.6, markersize=5, label=planner)[0]
            legend.setdefault(planner, line)
            if points:
                highest[planner] = max(y for _, y in points)
        clip_outliers(axis, highest)
        if not highest:
            axis.text(0.5, 0.5, "no planner fits this budget", transform=axis.transAxes, ha="center", va="center")
        machine = group[0].get("machine", "")
        if by_budget:
            axis.set_xlabel(f"memory budget ({x_name})")
            axis.set_title(f"{workload} on {machine}, host link {fixed / 1e9:g} GB/s", fontsize=10)
        else:
            fixed_name, fixed_scale = byte_unit(fixed)
            axis.set_xlabel("host link bandwidth (GB/s)")
            axis.set_title(f"{workload} on {machine}, budget {fixed / fixed_scale:.3g} {fixed_name}", fontsize=10)
        axis.set_ylabel("overhead over ideal time (%)")
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
    title = "Overhead over the ideal time vs " + ("memory budget" if by_budget else "host link bandwidth")
    finish(figure, axes, count, legend, title, out_path, top=1 - 0.03 / lines)


def draw_throughput(rows, out_path):
    if "batch" not in rows[0]:
        raise SystemExit("plot_results.py: throughput_vs_batch needs the batch column (an experiment with sweep.batch)")
    groups = {}
    for row in rows:
        key = (row["base_workload"], int(row["budget_bytes"]), float(row["bandwidth_bytes_per_s"]))
        groups.setdefault(key, []).append(row)
    count = len(groups)
    figure, axes, lines, columns = panel_grid(count)
    markers = "osD^v<>ph*"
    legend = {}
    for panel, ((workload, budget, bandwidth), group) in enumerate(groups.items()):
        axis = axes[panel // columns][panel % columns]
        for index, planner in enumerate(planners_of(group)):
            mine = [r for r in group if r["planner"] == planner]
            points = sorted((int(r["batch"]), float(r["samples_per_s"])) for r in mine
                            if r["feasible"] == "true" and r["samples_per_s"])
            line = axis.plot([b for b, _ in points], [v for _, v in points], marker=markers[index % len(markers)],
                             linewidth=1.6, markersize=5, label=planner)[0]
            failed = [int(r["batch"]) for r in mine if r["feasible"] != "true"]
            if failed:
                axis.plot(failed, [0] * len(failed), linestyle="none", marker="x", markersize=8,
                          markeredgewidth=2, color=line.get_color(), clip_on=False, zorder=5)
        if any(r["feasible"] != "true" for r in group):
            axis.plot([], [], linestyle="none", marker="x", color="black", label="infeasible (no plan / OOM)")
        axis.set_xlabel("batch")
        axis.set_ylabel("samples/s")
        axis.set_ylim(bottom=0)
        machine = group[0].get("machine", "")
        name, scale = byte_unit(budget)
        axis.set_title(f"{workload} on {machine}, budget {budget / scale:.3g} {name}, host link "
                       f"{bandwidth / 1e9:g} GB/s", fontsize=10)
        axis.grid(True, alpha=0.3)
        for handle, label in zip(*axis.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    finish(figure, axes, count, legend, "Throughput vs batch", out_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="results.csv from memsim run")
    parser.add_argument("--out", required=True, help="folder for the PNG files")
    parser.add_argument("--plots", default=",".join(PLOTS), help="comma-separated: " + ", ".join(PLOTS))
    arguments = parser.parse_args()
    kinds = [kind for kind in arguments.plots.split(",") if kind]
    unknown = [kind for kind in kinds if kind not in PLOTS]
    if unknown:
        parser.error(f"unknown plot {', '.join(unknown)} (valid: {', '.join(PLOTS)})")
    rows = read_rows(arguments.results)
    if not rows:
        raise SystemExit(f"plot_results.py: {arguments.results} has no rows")
    for kind in kinds:
        if kind.startswith("overhead_"):
            draw_overhead(kind, rows, f"{arguments.out}/{kind}.png")
        elif kind == "throughput_vs_batch":
            draw_throughput(rows, f"{arguments.out}/{kind}.png")
        else:
            draw(kind, rows, f"{arguments.out}/{kind}.png")


if __name__ == "__main__":
    main()
