#!/usr/bin/python3
"""μ-TWO Figure 8 from memsim: normalized speedup over HFTA against N, with the fusion gain overlaid.

For each model (BERT, GPT-2, ResNet-101) and both batch sizes: mu-two's and hfta-capuchin's speedup over hfta
(hfta's steady iteration / theirs; infeasible cells are left out) and the A100 fusion gain t_N / (N * t_1) of N fused
models (the N-fused trace's compute time, a cell's ideal_time_s, over N single models'). Reads fig8's results.csv.

    /usr/bin/python3 experiments/mu-two/fig8/plot.py experiments/mu-two/fig8/results.csv
"""
import csv
import pathlib
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
MODELS = (("bert", "BERT"), ("gpt", "GPT-2"), ("resnet101", "ResNet-101"))
LINK = 24e9
COLORS = ("C0", "C3")  # the smaller and the larger batch


def load(path):
    """workload -> N -> planner -> row, at the preset's 24 GB/s."""
    cells = defaultdict(lambda: defaultdict(dict))
    for row in csv.DictReader(open(path)):
        if float(row["bandwidth_bytes_per_s"]) == LINK:
            cells[row["base_workload"]][int(row["models"])][row["planner"]] = row
    return cells


def seconds(row):
    return float(row["steady_iteration_time_s"]) if row["feasible"] == "true" else None


def curves(by_n):
    """(Ns, speedups) of mu-two and hfta-capuchin over hfta, and (Ns, fusion gains)."""
    out = {}
    for planner in ("mu-two", "hfta-capuchin"):
        points = [(n, seconds(cells["hfta"]) / seconds(cells[planner])) for n, cells in sorted(by_n.items())
                  if seconds(cells["hfta"]) and seconds(cells[planner])]
        out[planner] = list(zip(*points))
    single = float(by_n[1]["hfta"]["ideal_time_s"])
    out["gain"] = list(zip(*[(n, float(cells["hfta"]["ideal_time_s"]) / (n * single))
                             for n, cells in sorted(by_n.items())]))
    return out


def main():
    cells = load(sys.argv[1])
    figure, axes = plt.subplots(1, len(MODELS), figsize=(12, 4.2))
    for axis, (prefix, title) in zip(axes, MODELS):
        batches = sorted((w for w in cells if w.split("-b")[0] == prefix), key=lambda w: int(w.split("-b")[-1]))
        for color, workload in zip(COLORS, batches):
            lines = curves(cells[workload])
            axis.plot(*lines["mu-two"], color=color, marker="o")
            axis.plot(*lines["hfta-capuchin"], color=color, marker="s", linestyle="--")
            axis.plot(*lines["gain"], color=color, linestyle=":")
        sizes = " and ".join(f"b{w.split('-b')[-1]} ({name})" for w, name in zip(batches, ("blue", "red")))
        axis.set_title(f"{title}: {sizes}", fontsize=10)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xlabel("models N")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("speedup over HFTA; fusion gain")
    legend = [Line2D([], [], color="gray", marker="o", label="mu-two / hfta"),
              Line2D([], [], color="gray", marker="s", linestyle="--", label="hfta-capuchin / hfta"),
              Line2D([], [], color="gray", linestyle=":", label="fusion gain t_N/(N·t_1) (A100)")]
    figure.legend(handles=legend, loc="lower center", ncol=3, fontsize=9)
    figure.suptitle("μ-TWO Fig. 8 in memsim (A100 40 GiB, 24 GB/s): speedup over HFTA and the fusion gain", fontsize=11)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    figure.savefig(HERE / "fig8.png", dpi=90)


if __name__ == "__main__":
    main()
