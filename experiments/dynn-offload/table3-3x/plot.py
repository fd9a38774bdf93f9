#!/usr/bin/python3
"""DyNN-Offload Table III under the 2x and 3x overhead rules: each system's largest batch over keep-all's.

Reads ../table3/capacity-{24gb,80gb}.csv (2x) and capacity-{24gb,80gb}.csv here (3x) and writes batch_ratio.png here.

    /usr/bin/python3 experiments/dynn-offload/table3-3x/plot.py
"""
import csv
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SYSTEMS = [("uvm", "tab:orange"), ("dtr", "tab:green"), ("dynn-offload", "tab:red")]


def largest(folder):
    batches = {}
    order = []
    for platform in ("24gb", "80gb"):
        with open(folder / f"capacity-{platform}.csv", newline="") as handle:
            for row in csv.DictReader(handle):
                if row["workload"] not in order:
                    order.append(row["workload"])
                batches[(row["workload"], row["planner"])] = int(row["largest"])
    return order, batches


def main():
    order, two = largest(HERE.parent / "table3")
    _, three = largest(HERE)
    figure, axis = plt.subplots(figsize=(11, 3.8))
    width = 0.13
    for s, (system, color) in enumerate(SYSTEMS):
        for limit, (batches, hatch) in enumerate(((two, ""), (three, "//"))):
            x = [i + (2 * s + limit - 2.5) * width for i in range(len(order))]
            y = [batches[(w, system)] / batches[(w, "keep-all")] for w in order]
            axis.bar(x, y, width, color=color, hatch=hatch, edgecolor="black", linewidth=0.4,
                     label=f"{system} {'3x' if limit else '2x'}")
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(range(len(order)), order)
    axis.set_ylabel("largest batch / keep-all's")
    axis.set_yscale("log")
    axis.legend(ncol=3, fontsize=8)
    axis.set_title("Table III in memsim: time limit 2x (plain) and 3x (hatched) keep-all's; "
                   "24 GB and 80 GB (BERT, recycle)")
    figure.tight_layout()
    figure.savefig(HERE / "batch_ratio.png", dpi=110)


if __name__ == "__main__":
    main()
