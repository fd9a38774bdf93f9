#!/usr/bin/python3
"""DyNN-Offload Figure 12 from memsim: time of each partitioner's blocks against the budget, and the summary table.

Reads results.csv (memsim run configs/experiments/dynn-fig12.yaml) and writes time_vs_budget.png here and, on stdout,
each heuristic's time over the DP's (mean and range over the budgets where both train) per workload.

    /usr/bin/python3 experiments/dynn-offload/fig12/plot.py --results OUT/results.csv
"""
import argparse
import csv
import pathlib
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
STYLES = {
    "dp": ("black", "-", "o"),
    "dp-exact": ("grey", "-", "s"),
    "equal-ops": ("tab:blue", ":", "x"),
    "equal-time": ("tab:orange", ":", "x"),
    "equal-bytes": ("tab:green", ":", "x"),
    "equal-ops-grown": ("tab:blue", "--", "^"),
    "equal-time-grown": ("tab:orange", "--", "^"),
    "equal-bytes-grown": ("tab:green", "--", "^"),
}


def load(path):
    times = defaultdict(lambda: defaultdict(dict))  # workload -> planner -> budget fraction -> seconds
    order = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] not in order:
                order.append(row["workload"])
            if row["feasible"] == "true":
                times[row["workload"]][row["planner"]][float(row["budget_fraction"])] = float(row["iteration_time_s"])
    return order, times


def plot(order, times, out):
    figure, axes = plt.subplots(1, len(order), figsize=(4 * len(order), 3.6), squeeze=False)
    for axis, workload in zip(axes[0], order):
        for planner, (color, style, marker) in STYLES.items():
            points = sorted(times[workload].get(planner, {}).items())
            if points:
                axis.plot([p[0] for p in points], [p[1] for p in points], color=color, linestyle=style, marker=marker,
                          markersize=4, label=planner)
        axis.set_title(workload)
        axis.set_xlabel("budget / keep-all peak")
        axis.set_ylabel("time of 4 iterations (s)")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    figure.suptitle("dynn-block: DP blocks vs equal-* blocks (24 GB, PCIe 3.0); missing points: infeasible")
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def summary(order, times):
    print("workload,partitioner,budgets_both_train,mean_time_over_dp,min,max")
    for workload in order:
        dp = times[workload].get("dp", {})
        for planner in STYLES:
            if planner == "dp":
                continue
            ratios = [t / dp[f] for f, t in sorted(times[workload].get(planner, {}).items()) if f in dp]
            if ratios:
                print(f"{workload},{planner},{len(ratios)},{sum(ratios) / len(ratios):.3f},{min(ratios):.3f},"
                      f"{max(ratios):.3f}")
            else:
                print(f"{workload},{planner},0,,,")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=HERE / "results.csv")
    parser.add_argument("--out", default=HERE / "time_vs_budget.png")
    arguments = parser.parse_args()
    order, times = load(arguments.results)
    plot(order, times, arguments.out)
    summary(order, times)


if __name__ == "__main__":
    main()
