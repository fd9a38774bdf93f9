"""Figure 14 from fig14/results.csv: slowdown (iteration time ÷ all on) per ablation for Harmony DP and PP at each
minibatch; for the manual-configuration grid the bar is its best feasible run and the dash its worst. The paper's
factors (§5.5) are drawn as grey lines where it gives one. Usage: plot.py [RESULTS_CSV] [OUT_PNG] (defaults:
results.csv and fig14.png beside this script)."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from summarize import ABLATIONS, MODES, load, slowdowns  # noqa: E402

# The paper's factor per (ablation, mode) where the text gives one number (the upper end of a range).
PAPER = {("no-grouping", "DP"): 2.2, ("no-grouping", "PP"): 1.5, ("manual", "DP"): 1.4, ("manual", "PP"): 1.4,
         ("no-prefetch", "DP"): 1.3, ("no-prefetch", "PP"): 1.3, ("no-jit", "DP"): 1.2, ("no-jit", "PP"): 1.2,
         ("no-opt-offload", "DP"): 1.2, ("no-opt-offload", "PP"): 1.2, ("no-p2p", "DP"): 1.0, ("no-p2p", "PP"): 1.2,
         ("equi-fb", "DP"): 1.3, ("equi-fb", "PP"): 1.3}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rows, base = load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv"))
    target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "fig14.png")
    ds = sorted({r["minibatch"] for r in rows}, key=int)
    fig, axes = plt.subplots(1, len(MODES), figsize=(13, 4.8), sharey=True)
    width = 0.8 / len(ds)
    for ax, (planner, mode) in zip(axes, MODES):
        for position, (ablation, _, _, _) in enumerate(ABLATIONS):
            for index, d in enumerate(ds):
                values = [v for _, v in slowdowns(rows, base, ablation, d, planner) if v is not None]
                x = position + (index - len(ds) / 2 + 0.5) * width
                if not values:
                    continue
                ax.bar(x, min(values), width, color=f"C{index}", label=f"D={d}" if position == 0 else None)
                if len(values) > 1:
                    ax.plot([x - width / 2, x + width / 2], [max(values)] * 2, color=f"C{index}")
            paper = PAPER.get((ablation, mode))
            if paper:
                ax.plot([position - 0.45, position + 0.45], [paper, paper], color="grey", linestyle="--",
                        label="paper" if position == 0 else None)
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(range(len(ABLATIONS)))
        ax.set_xticklabels([a for a, _, _, _ in ABLATIONS], rotation=30, ha="right", fontsize=8)
        ax.set_title(f"Harmony {mode}")
        ax.set_ylim(0.8, 2.4)
    axes[0].set_ylabel("slowdown (iteration time ÷ all optimizations on)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Harmony Fig. 14 in memsim: GPT2 1.5B (gpt2_xl), 4 GPUs; manual: bar best, dash worst of the grid")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
