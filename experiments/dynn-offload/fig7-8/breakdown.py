#!/usr/bin/python3
"""DyNN-Offload Figures 7 and 8 from memsim: time per system and its breakdown into compute, rematerialization and
exposed migration (stall), from the output folders of `memsim run` on configs/experiments/dynn-fig7-8.yaml (24 GB)
and dynn-fig7-8-80gb.yaml (80 GB).

Writes here breakdown.csv (one row per workload x system: results.csv's times split into compute, rematerialization
and stall, their shares, and the bytes moved) and time_breakdown.png (stacked bars). results.csv carries no policy
counters (UVM's fault batches): the `online` planner's cells simulate the realized plan, not the policy.

    /usr/bin/python3 experiments/dynn-offload/fig7-8/breakdown.py --run OUT24 OUT80
"""
import argparse
import csv
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SYSTEMS = ["keep-all", "uvm", "dtr", "dynn-offload", "dynn-offload-fit"]


def breakdown_rows(run):
    rows = []
    with open(run / "results.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            out = {"workload": row["workload"], "system": row["planner"], "feasible": row["feasible"]}
            if row["feasible"] == "true":
                total = float(row["iteration_time_s"])
                busy = float(row["compute_busy_s"])
                recompute = float(row["recompute_time_s"])
                stall = float(row["stall_time_s"])
                out.update(time_s=total, compute_s=busy - recompute, recompute_s=recompute, stall_s=stall,
                           other_s=total - busy - stall, stall_share=stall / total, recompute_share=recompute / total,
                           h2d_gib=int(row["h2d_bytes"]) / 2**30, d2h_gib=int(row["d2h_bytes"]) / 2**30)
            else:
                out["reason"] = row["reason"]
            rows.append(out)
    return rows


def write_csv(rows, path):
    columns = ["workload", "system", "feasible", "time_s", "compute_s", "recompute_s", "stall_s", "other_s",
               "stall_share", "recompute_share", "h2d_gib", "d2h_gib", "reason"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: (f"{value:.6g}" if isinstance(value, float) else value)
                             for key, value in row.items()})


def plot(rows, path):
    workloads = list(dict.fromkeys(row["workload"] for row in rows))
    columns = min(6, len(workloads))
    grid_rows = (len(workloads) + columns - 1) // columns
    figure, axes = plt.subplots(grid_rows, columns, figsize=(2.4 * columns, 3.2 * grid_rows), squeeze=False)
    for axis in axes.flat[len(workloads):]:
        axis.set_visible(False)
    for axis, workload in zip(axes.flat, workloads):
        by_system = {row["system"]: row for row in rows if row["workload"] == workload}
        for x, system in enumerate(SYSTEMS):
            row = by_system.get(system)
            if not row or row["feasible"] != "true":
                axis.text(x, 0, "×", color="red", ha="center", va="bottom", fontsize=14)
                continue
            bottom = 0.0
            for part, color in (("compute_s", "tab:blue"), ("recompute_s", "tab:orange"), ("stall_s", "tab:red")):
                axis.bar(x, row[part], bottom=bottom, color=color, label=part[:-2] if x == 1 else None)
                bottom += row[part]
        axis.set_xticks(range(len(SYSTEMS)), ["keep-all", "UVM", "DTR", "DO", "DO-fit"], fontsize=7)
        axis.set_title(workload, fontsize=9)
    for row in axes:
        row[0].set_ylabel("time of 4 iterations (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, ["compute", "rematerialization", "exposed migration / stall"], loc="upper right",
                  fontsize=8)
    figure.suptitle("24 GB RTX 6000 (the first 8) and 80 GB A100 (BERT, recycle), PCIe 3.0: "
                    "each model at 0.9x and 1.25x keep-all's largest batch (×: cannot train)", fontsize=10)
    figure.tight_layout(rect=(0, 0, 0.88, 0.95))
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=pathlib.Path, nargs="+",
                        help="memsim run --out folders of dynn-fig7-8.yaml and dynn-fig7-8-80gb.yaml")
    arguments = parser.parse_args()
    rows = [row for run in arguments.run for row in breakdown_rows(run)]
    write_csv(rows, HERE / "breakdown.csv")
    plot(rows, HERE / "time_breakdown.png")


if __name__ == "__main__":
    main()
