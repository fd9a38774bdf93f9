"""Plots results.csv of run.sh: throughput against GPUs per model (Fig. 17/18 on 8x1080Ti, Fig. 16 on DGX-2) and
the host memory the models need against each machine's. Usage: plot.py [RESULTS_CSV] [OUT_PNG]"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STYLE = {"harmony-pp": ("-", "o", "Harmony PP"), "harmony-dp": ("--", "s", "Harmony DP"),
         "zero-infinity": (":", "^", "ZeRO-Infinity")}
TITLE = {"fig17": "Fig. 17/18: 8x1080Ti, D=32, U=1, packs of 2", "fig16": "Fig. 16: DGX-2, D=128, U=1, packs of 6"}


def model_billions(model):
    return int(model.split("_")[1].rstrip("b"))


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.csv")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "scaling.png")
    rows = list(csv.DictReader(open(results)))
    figures = [f for f in ("fig17", "fig16") if any(r["figure"] == f for r in rows)]
    fig, axes = plt.subplots(1, len(figures) + 1, figsize=(6 * len(figures) + 5, 4.8))
    colors = plt.get_cmap("viridis")
    for ax, figure in zip(axes, figures):
        cells = [r for r in rows if r["figure"] == figure]
        models = sorted({r["model"] for r in cells}, key=model_billions)
        gpus = sorted({int(r["gpus"]) for r in cells})
        for i, model in enumerate(models):
            color = colors(i / max(1, len(models) - 1) * 0.85)
            for planner, (line, marker, label) in STYLE.items():
                points = [(int(r["gpus"]), float(r["samples_per_s"])) for r in cells
                          if r["model"] == model and r["planner"] == planner and r["feasible"] == "true"]
                failed = [r for r in cells if r["model"] == model and r["planner"] == planner
                          and r["feasible"] != "true"]
                if points:
                    ax.plot(*zip(*points), line, marker=marker, color=color, label=f"{model} {label}")
                if failed:
                    ax.plot([int(r["gpus"]) for r in failed], [0] * len(failed), "x", color=color, markersize=9,
                            clip_on=False, label=f"{model} {label}: out of host memory" if any(
                                r["reason"] == "host_out_of_memory" for r in failed) else f"{model} {label}: fails")
        ax.set_xscale("log", base=2)
        ax.set_xticks(gpus)
        ax.set_xticklabels([str(n) for n in gpus])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("GPUs N")
        ax.set_ylabel("samples/s (simulated)")
        ax.set_title(TITLE[figure], fontsize=10)
        ax.legend(fontsize=6, ncol=2)
        ax.grid(alpha=0.3)
    ax = axes[-1]
    for j, figure in enumerate(figures):
        cells = [r for r in rows if r["figure"] == figure]
        limit = int(cells[0]["host_memory_bytes"]) / 1e9
        machine = cells[0]["machine"]
        ax.axhline(limit, color=f"C{j}", linestyle="--", label=f"{machine} host memory {limit:.0f} GB")
        states = sorted({(model_billions(r["model"]), int(r["model_state_bytes"]) / 1e9) for r in cells})
        ax.plot(*zip(*states), "-", color=f"C{j}", marker=".", label="W + dW + K (host, any plan)")
        for planner, (line, marker, label) in STYLE.items():
            peaks = sorted((model_billions(r["model"]), int(r["peak_host_bytes"]) / 1e9) for r in cells
                           if r["planner"] == planner and r["feasible"] == "true" and r["gpus"] == cells[-1]["gpus"])
            if peaks:
                ax.plot(*zip(*peaks), "none", marker=marker, color=f"C{j}", linestyle="none",
                        label=f"{machine} {label} peak host, N={cells[-1]['gpus']}")
    ax.set_xlabel("GPT-2 size (billion parameters)")
    ax.set_ylabel("host memory (GB)")
    ax.set_title("host-memory limit", fontsize=10)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
