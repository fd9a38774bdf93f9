"""Figures 10 and 11 from fig10/results.csv: throughput (samples/s) and per-GPU swap volume (h2d + d2h of the
busiest GPU, log scale) per model, minibatch and system. Usage: plot.py [RESULTS_CSV] [OUT_PNG]
(defaults: results.csv and fig10.png beside this script). Infeasible cells are left empty and marked with x."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = [("dp-swap", "false", "DP Swap"), ("dp-swap", "true", "DP Swap (R)"), ("gpipe-swap", "false", "GP Swap"),
           ("gpipe-swap", "true", "GP Swap (R)"), ("pipedream2bw-swap", "false", "2BW Swap"),
           ("pipedream2bw-swap", "true", "2BW Swap (R)"), ("harmony-dp", "", "Harmony DP"),
           ("harmony-pp", "", "Harmony PP")]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv")
    target = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "fig10.png")
    rows = {(r["model"], int(r["minibatch"]), r["planner"], r["recompute"]): r for r in csv.DictReader(open(source))}
    models = list(dict.fromkeys(key[0] for key in rows))
    fig, axes = plt.subplots(2, len(models), figsize=(4.2 * len(models), 7.5), squeeze=False)
    width = 0.8 / len(SYSTEMS)
    for column, model in enumerate(models):
        minibatches = sorted({key[1] for key in rows if key[0] == model})
        for metric, ax in (("throughput", axes[0][column]), ("swap", axes[1][column])):
            for index, (planner, recompute, label) in enumerate(SYSTEMS):
                for position, d in enumerate(minibatches):
                    row = rows.get((model, d, planner, recompute))
                    x = position + (index - len(SYSTEMS) / 2 + 0.5) * width
                    if row is None or row["feasible"] != "true":
                        ax.plot(x, 0, "x", color=f"C{index}", markersize=5)
                        continue
                    if metric == "throughput":
                        value = float(row["samples_per_s"])
                    else:
                        per_gpu = zip(row["h2d_bytes_per_gpu"].split(";"), row["d2h_bytes_per_gpu"].split(";"))
                        value = max(int(h) + int(d2h) for h, d2h in per_gpu) / 1e9
                    ax.bar(x, value, width, color=f"C{index}", label=label if position == 0 else None)
            ax.set_xticks(range(len(minibatches)))
            ax.set_xticklabels([f"D={d}" for d in minibatches])
            if metric == "throughput":
                ax.set_title(model)
                ax.set_ylabel("samples/s (simulated)")
            else:
                ax.set_yscale("log")
                ax.set_ylabel("swap volume of the busiest GPU (GB)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(SYSTEMS), fontsize=8)
    fig.suptitle("Harmony Fig. 10/11 in memsim: 4 GPUs (x: infeasible)")
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
