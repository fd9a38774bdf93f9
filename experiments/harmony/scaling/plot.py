"""Plots results.csv of run.sh as the paper does: Fig. 17 (throughput at the most GPUs per model size, normalized to
ZeRO-Infinity's 10B), Fig. 18 and Fig. 16 (throughput against GPUs, normalized to the model's single-GPU Harmony
DP), and the host memory the models need against each machine's. Usage: plot.py [RESULTS_CSV] [OUT_PNG]"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STYLE = {"harmony-pp": ("-", "o", "Harmony PP"), "harmony-dp": ("--", "s", "Harmony DP"),
         "zero-infinity": (":", "^", "ZeRO-Infinity")}


def billions(model):
    return int(model.split("_")[1].rstrip("b"))


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.csv")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "scaling.png")
    rows = list(csv.DictReader(open(results)))
    cell = {(r["figure"], r["model"], r["planner"], int(r["gpus"])): r for r in rows}

    def rate(figure, model, planner, n):
        r = cell.get((figure, model, planner, n))
        return float(r["samples_per_s"]) if r and r["feasible"] == "true" else None

    fig, axes = plt.subplots(1, 4, figsize=(22, 5))
    colors = plt.get_cmap("viridis")

    ax = axes[0]
    fig17 = [r for r in rows if r["figure"] == "fig17"]
    if fig17:
        n = max(int(r["gpus"]) for r in fig17)
        models = sorted({r["model"] for r in fig17}, key=billions)
        base = rate("fig17", "gpt2_10b", "zero-infinity", n)
        width = 0.8 / len(STYLE)
        for j, (planner, (_, _, label)) in enumerate(STYLE.items()):
            for i, model in enumerate(models):
                value = rate("fig17", model, planner, n)
                x = i + (j - 1) * width
                if value and base:
                    ax.bar(x, value / base, width, color=f"C{j}", label=label if i == 0 else None)
                else:
                    ax.text(x, 0.02, "OOM", rotation=90, ha="center", va="bottom", fontsize=8, color=f"C{j}")
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([f"{billions(m)}B" for m in models])
        ax.set_ylabel("throughput ÷ ZeRO-Infinity 10B")
        ax.set_title(f"Fig. 17: 8x1080Ti (750 GiB host), N={n}, D=32, U=1", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")

    for ax, figure, title in ((axes[1], "fig17", "Fig. 18: 8x1080Ti, D=32, U=1, packs of 2"),
                              (axes[2], "fig16", "Fig. 16: DGX-2, D=128, U=1, packs of {pack}")):
        cells = [r for r in rows if r["figure"] == figure]
        if not cells:
            continue
        models = sorted({r["model"] for r in cells}, key=billions)
        gpus = sorted({int(r["gpus"]) for r in cells})
        ax.plot(gpus, gpus, color="grey", linewidth=0.8, label="linear")
        for i, model in enumerate(models):
            color = colors(i / max(1, len(models) - 1) * 0.85)
            base = rate(figure, model, "harmony-dp", 1)
            for planner in ("harmony-pp", "harmony-dp"):
                line, marker, label = STYLE[planner]
                points = [(n, rate(figure, model, planner, n) / base) for n in gpus
                          if base and rate(figure, model, planner, n)]
                failed = [n for n in gpus if cell.get((figure, model, planner, n))
                          and not rate(figure, model, planner, n)]
                if points:
                    ax.plot(*zip(*points), line, marker=marker, color=color, label=f"{billions(model)}B {label}")
                if failed or not base:
                    failed = failed or gpus
                    ax.plot(failed, [0] * len(failed), "x", color=color, markersize=10, clip_on=False,
                            label=f"{billions(model)}B {label}: out of host memory")
        ax.set_xticks(gpus)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("GPUs N")
        ax.set_ylabel("throughput ÷ the model's 1-GPU Harmony DP")
        ax.set_title(title.format(pack=cells[0]["pack_size"]), fontsize=10)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3)

    ax = axes[3]
    for j, figure in enumerate(f for f in ("fig17", "fig16") if any(r["figure"] == f for r in rows)):
        cells = [r for r in rows if r["figure"] == figure]
        machine, n = cells[0]["machine"], max(int(r["gpus"]) for r in cells)
        limit = int(cells[0]["host_memory_bytes"]) / 1e9
        ax.axhline(limit, color=f"C{j}", linestyle="--", label=f"{machine} host memory {limit:.0f} GB")
        states = sorted({(billions(r["model"]), int(r["model_state_bytes"]) / 1e9) for r in cells})
        ax.plot(*zip(*states), "-", color=f"C{j}", label=f"{machine}: W + dW + K (any plan)")
        for planner, (_, marker, label) in STYLE.items():
            peaks = sorted((billions(r["model"]), int(r["peak_host_bytes"]) / 1e9) for r in cells
                           if r["planner"] == planner and r["feasible"] == "true" and int(r["gpus"]) == n)
            if peaks:
                ax.plot(*zip(*peaks), marker=marker, color=f"C{j}", linestyle="none", fillstyle="none",
                        label=f"{machine} {label} peak host, N={n}")
    ax.set_xlabel("GPT-2 size (billion parameters)")
    ax.set_ylabel("host memory (GB)")
    ax.set_title("host-memory limit (failed cells have no peak)", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
