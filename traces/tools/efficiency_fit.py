#!/usr/bin/python3
"""Fit and check the cost model's efficiency curves on the shipped H100 recordings (traces/src/RESCALING.md).

1. Fits, per op class, efficiency(work) = max * work / (work + half) to every recorded op of the class
   (weighted least squares of time = a + b * work, weights 1/time: the same fit as hwmodels'
   fit_efficiency_curve), prints the constants and draws the curves over the measured points (PNG).
2. Checks `memsim trace rescale` against recordings: where two shipped traces contain the same op (same type,
   same work after rescaling the first to the second's batch, e.g. ResNet-50's stem and stage convolutions in
   ResNet-101 at another batch, BERT's and GPT's 768-wide GEMMs and layer norms at another token count), it
   compares the rescaled time with the recorded one, next to the linear placeholder (time x work ratio).
"""

import argparse
import collections
import gzip
import json
import os
import subprocess
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

H100_PEAK = {"gemm": 67e12, "convolution": 67e12, "memory": 3350e9}  # configs/machines/h100-80gb-sxm5.yaml
CLASSES = ("gemm", "convolution", "memory")
# Memory ops whose byte count implies more than this x HBM bandwidth count views or broadcasts as traffic.
PLAUSIBLE_BANDWIDTH = 1.2
# (source trace, batch to rescale it to, recording to compare with)
PAIRS = [("resnet50-b384", 256, "resnet101-b256"), ("resnet101-b256", 384, "resnet50-b384"),
         ("bert-b48", 40, "gpt-b20"), ("gpt-b20", 24, "bert-b48"), ("densenet121-b256", 384, "resnet50-b384")]


def op_class(op):
    """Mirror of hwmodels' classify_op."""
    if (op.get("flops") or 0) > 0:
        return "convolution" if "conv" in op["type"] or "conv" in op["name"] else "gemm"
    if (op.get("bytes_accessed") or 0) > 0:
        return "memory"
    return "launch"


def work(op, cls):
    return op.get("bytes_accessed", 0) if cls == "memory" else op.get("flops", 0)


def load(path):
    with gzip.open(path) if path.endswith(".gz") else open(path) as stream:
        return json.load(stream)


def fit(points, peak):
    size = np.array([p[0] for p in points])
    seconds = np.array([p[1] for p in points])
    weight = 1 / seconds
    design = np.stack([np.ones_like(size), size], 1) * weight[:, None]
    a, b = np.linalg.lstsq(design, seconds * weight, rcond=None)[0]
    return 1 / (b * peak), max(0.0, a / b)


def fit_and_plot(data_dir, out_png):
    points = collections.defaultdict(list)
    by_trace = collections.defaultdict(lambda: collections.defaultdict(list))
    for name in sorted(os.listdir(data_dir)):
        if not name.endswith("-h100.trace.json.gz"):
            continue
        for op in load(os.path.join(data_dir, name))["ops"]:
            cls = op_class(op)
            if cls == "launch" or op["time_s"] <= 0:
                continue
            size = work(op, cls)
            if cls == "memory" and size / (op["time_s"] * H100_PEAK[cls]) > PLAUSIBLE_BANDWIDTH:
                continue
            points[cls].append((size, op["time_s"]))
            by_trace[name.split("-")[0]][cls].append((size, op["time_s"]))
    curves = {}
    print("| class | ops | max | half | fixed cost (half / (max x peak)) | median relative error of the curve |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for cls in CLASSES:
        peak = H100_PEAK[cls]
        best_max, half = fit(points[cls], peak)
        curves[cls] = (best_max, half)
        errors = [abs((s + half) / (best_max * peak) / t - 1) for s, t in points[cls]]
        print(f"| {cls} | {len(points[cls])} | {best_max:.3g} | {half:.3g} | {half / (best_max * peak) * 1e6:.1f} us |"
              f" {np.median(errors):.1%} |")
    # Each model's ops predicted from the curve fitted to the other six (no per-op measurement used), next to the
    # same curve without its fixed cost (time = work / (max x peak): a roofline at the fitted efficiency).
    print("\n| model left out | class | ops | median error, curve of the others | median error, rate only |"
          " sum recorded ms | curve ms | rate only ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for left_out in sorted(by_trace):
        for cls in CLASSES:
            held = by_trace[left_out][cls]
            others = [p for model, classes in by_trace.items() if model != left_out for p in classes[cls]]
            if len(held) < 3 or len(others) < 3:
                continue
            peak = H100_PEAK[cls]
            best_max, half = fit(others, peak)
            measured = np.array([t for _, t in held])
            curve = np.array([(s + half) / (best_max * peak) for s, _ in held])
            linear = np.array([s / (best_max * peak) for s, _ in held])
            print(f"| {left_out} | {cls} | {len(held)} | {np.median(np.abs(curve / measured - 1)):.1%} |"
                  f" {np.median(np.abs(linear / measured - 1)):.1%} | {measured.sum() * 1e3:.1f} |"
                  f" {curve.sum() * 1e3:.1f} | {linear.sum() * 1e3:.1f} |")
    figure, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for axis, cls in zip(axes, CLASSES):
        peak = H100_PEAK[cls]
        size = np.array([p[0] for p in points[cls]])
        efficiency = size / (np.array([p[1] for p in points[cls]]) * peak)
        axis.scatter(size, efficiency, s=4, alpha=0.3, color="#4c72b0", label="recorded ops (H100)")
        grid = np.logspace(np.log10(size.min()), np.log10(size.max()), 200)
        best_max, half = curves[cls]
        axis.plot(grid, best_max * grid / (grid + half), color="#dd8452", lw=2,
                  label=f"fit: max {best_max:.2f}, half {half:.2g}")
        axis.set_xscale("log")
        axis.set_xlabel("bytes accessed" if cls == "memory" else "flops")
        axis.set_ylabel("fraction of " + ("HBM bandwidth" if cls == "memory" else "fp32 peak"))
        axis.set_title(cls)
        axis.legend(fontsize=7, loc="upper left")
    figure.suptitle("Efficiency vs work per op class on the H100 (shipped recordings) and the fitted curves")
    figure.tight_layout()
    figure.savefig(out_png, dpi=70)
    print(f"\nwrote {out_png}")


def compare_rescaled(memsim, data_dir):
    print("\n| rescaled (memsim trace rescale) | vs recorded | class | matched ops | median error, cost model |"
          " median error, linear | sum of matched, recorded ms | cost model ms | linear ms |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as scratch:
        for source, batch, target in PAIRS:
            source_path = os.path.join(data_dir, f"{source}-h100.trace.json.gz")
            out = os.path.join(scratch, f"{source}-to-{batch}.trace.json")
            subprocess.run([memsim, "trace", "rescale", source_path, "--batch", str(batch), "--out", out],
                           check=True, stdout=subprocess.DEVNULL)
            original, rescaled = load(source_path)["ops"], load(out)["ops"]
            recorded = load(os.path.join(data_dir, f"{target}-h100.trace.json.gz"))["ops"]
            # Candidates by (type, class, work rounded to 0.5 %): paired in order of appearance.
            pool = collections.defaultdict(list)
            for op in recorded:
                cls = op_class(op)
                if cls != "launch" and op["time_s"] > 0:
                    pool[(op["type"], cls, round(np.log(work(op, cls)) * 200))].append(op)
            rows = collections.defaultdict(list)
            for before, after in zip(original, rescaled):
                cls = op_class(after)
                if cls == "launch" or before["time_s"] <= 0:
                    continue
                key = (after["type"], cls, round(np.log(work(after, cls)) * 200))
                if not pool[key]:
                    continue
                match = pool[key].pop(0)
                linear = before["time_s"] * work(after, cls) / work(before, cls)
                rows[cls].append((match["time_s"], after["time_s"], linear))
            for cls in CLASSES:
                if not rows[cls]:
                    continue
                measured = np.array([r[0] for r in rows[cls]])
                model = np.array([r[1] for r in rows[cls]])
                linear = np.array([r[2] for r in rows[cls]])
                print(f"| {source} -> b{batch} | {target} | {cls} | {len(measured)} |"
                      f" {np.median(np.abs(model / measured - 1)):.1%} |"
                      f" {np.median(np.abs(linear / measured - 1)):.1%} |"
                      f" {measured.sum() * 1e3:.2f} | {model.sum() * 1e3:.2f} | {linear.sum() * 1e3:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--data", default=os.path.join(root, "traces", "data"))
    parser.add_argument("--memsim", default=os.path.join(root, "build", "release", "experiments", "memsim"))
    parser.add_argument("--plot", default=os.path.join(root, "traces", "src", "efficiency_curves.png"))
    args = parser.parse_args()
    fit_and_plot(args.data, args.plot)
    compare_rescaled(args.memsim, args.data)


if __name__ == "__main__":
    main()
