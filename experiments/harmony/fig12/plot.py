"""Figure 12 from fig12/results.csv: (a) throughput normalized to ZeRO-Infinity (Harmony PP's configuration) at the
smallest D, (b) host<->GPU swap volume per minibatch, all GPUs. Usage: plot.py [RESULTS_CSV] [OUT_PNG] (defaults:
results.csv and fig12.png beside this script). Infeasible cells are marked with x."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from summarize import BASE, SYSTEMS, load, seconds  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    cells = load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv"))
    target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "fig12.png")
    ds = sorted({d for d, _ in cells})
    base_rate = ds[0] / seconds(cells[(ds[0], BASE)])
    names = [name for _, _, name in SYSTEMS]
    width = 0.8 / len(names)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, name in enumerate(names):
        for position, d in enumerate(ds):
            row = cells.get((d, name))
            x = position + (index - len(names) / 2 + 0.5) * width
            if seconds(row) is None:
                left.plot(x, 0, "x", color=f"C{index}")
                right.plot(x, 0, "x", color=f"C{index}")
                continue
            label = name if position == 0 else None
            left.bar(x, d / seconds(row) / base_rate, width, color=f"C{index}", label=label)
            right.bar(x, (int(row["h2d_bytes"]) + int(row["d2h_bytes"])) / 1e9, width, color=f"C{index}")
    for ax in (left, right):
        ax.set_xticks(range(len(ds)))
        ax.set_xticklabels([f"D={d}" for d in ds])
    left.set_ylabel(f"throughput ÷ {BASE} at D={ds[0]}")
    left.set_title("(a) throughput (simulated)")
    right.set_ylabel("h2d + d2h per minibatch, all GPUs (GB)")
    right.set_yscale("log")
    right.set_title("(b) host<->GPU swap volume")
    fig.legend(*left.get_legend_handles_labels(), loc="lower center", ncol=len(names), fontsize=8)
    fig.suptitle("Harmony Fig. 12 in memsim: GPT2 1.5B (gpt2_xl), 4 GPUs (x: infeasible)")
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
