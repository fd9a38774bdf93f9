#!/usr/bin/python3
"""μ-TWO Figure 3c from memsim: the keep-all peak of k fused models over the A100's 40 GiB.

Reads results.csv (memsim run configs/experiments/mu-two-fig3c.yaml) and, for comparison, the default-schedule peak
of the vmap-fused recordings (traces/data/fused-h200: BERT b16/b24, GPT-2 b8/b16, ResNet-101 b48/b64) through `memsim trace info --json`.

    /usr/bin/python3 experiments/mu-two/fig3c/plot.py --results OUT/results.csv --memsim build/release/experiments/memsim
"""
import argparse
import csv
import json
import pathlib
import subprocess
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GPU_BYTES = 40 * 2**30
HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]


def fused_rows(path):
    ratios = defaultdict(dict)
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            ratios[row["base_workload"]][int(row["models"])] = float(row["excess_peak_ratio"])
    return ratios


def measured_vmap_ratios(memsim):
    """workload (model-b<batch>) -> {k: recorded keep-all peak / 40 GiB}; the K = 1 through-vmap files are left out."""
    ratios = defaultdict(dict)
    for trace in sorted((REPO / "traces/data/fused-h200").glob("*-k*-h200.trace.json.gz")):
        workload, rest = trace.name.split("-k", 1)
        models = rest.split("-")[0]
        if not models.isdigit():
            continue
        info = json.loads(subprocess.run([memsim, "trace", "info", "--json", str(trace)], check=True,
                                         capture_output=True, text=True).stdout)
        ratios[workload][int(models)] = info["default_peak_bytes"] / GPU_BYTES
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", required=True, help="results.csv of the mu-two-fig3c experiment")
    parser.add_argument("--memsim", required=True, help="the memsim binary (for the recorded traces' peaks)")
    parser.add_argument("--out", default=str(HERE / "fig3c.png"))
    args = parser.parse_args()
    fused = fused_rows(args.results)
    vmap = measured_vmap_ratios(args.memsim)
    figure, axes = plt.subplots(figsize=(8, 5))
    colors = {workload: f"C{index}" for index, workload in enumerate(sorted(set(fused) | set(vmap)))}
    for workload, by_k in sorted(fused.items()):
        ks = sorted(by_k)
        axes.plot(ks, [by_k[k] for k in ks], marker="o", color=colors[workload],
                  label=f"{workload} (fuse_trace: k x one model)")
    for workload, by_k in sorted(vmap.items()):
        ks = sorted(by_k)
        axes.plot(ks, [by_k[k] for k in ks], marker="s", color=colors[workload], linestyle="--",
                  label=f"{workload} vmap-fused, recorded (H200, SGD)")
    axes.axhline(1.0, color="red", linewidth=1)
    axes.text(1.05, 1.02, "A100 40 GiB", color="red")
    axes.set_xlabel("models fused (k)")
    axes.set_ylabel("keep-all peak / 40 GiB")
    axes.set_title("μ-TWO Fig. 3c: fused keep-all peak against the A100's memory")
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    for workload, by_k in sorted(fused.items()):
        fits = [k for k, ratio in by_k.items() if ratio <= 1.0]
        print(f"{workload}: k* = {max(fits) if fits else 0}, k=4 ratio {by_k.get(4, float('nan')):.3f}")
    for workload, by_k in sorted(vmap.items()):
        fits = [k for k, ratio in by_k.items() if ratio <= 1.0]
        print(f"{workload} vmap recorded: k* = {max(fits) if fits else 0}, "
              + ", ".join(f"k={k} {by_k[k]:.3f}" for k in sorted(by_k)))


if __name__ == "__main__":
    main()
