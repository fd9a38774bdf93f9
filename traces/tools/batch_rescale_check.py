#!/usr/bin/python3
"""Check `memsim trace rescale` against recordings of the same model at other batches (issue 9's 10 % target).

For every model in DIR recorded at several batches (<model>-b<batch>-<tag>.trace.json.gz, e.g.
traces/data/batches-h200/), rescales the largest batch's trace to each smaller batch and compares the rescaled
trace with the recording at that batch: the sum of op times (the iteration's compute time on the recording GPU)
and the default-schedule peak. Three predictions of the time: the cost model with the GPU's calibrated curves
(--gpu, a machine file whose GPU model is the traces' source.device), the cost model with the default curves
(no --gpu: the preset of that model, which has no efficiency block) and the linear placeholder (time x batch
ratio). Writes CSV, a Markdown table (stdout) and a plot of the errors against the batch fraction.

    /usr/bin/python3 traces/tools/batch_rescale_check.py --data traces/data/batches-h200 \
        --gpu runtime/calibration/h200-calibrated-141gb.yaml --out experiments/sizes/batch-rescale
"""

import argparse
import collections
import csv
import json
import os
import re
import subprocess
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(?P<model>.+)-b(?P<batch>\d+)-(?P<tag>[a-z0-9]+)\.trace\.json\.gz$")


def trace_info(memsim, path):
    out = subprocess.run([memsim, "trace", "info", "--json", path], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def rescaled_info(memsim, path, batch, gpu, scratch):
    target = os.path.join(scratch, f"rescaled-{batch}.trace.json")
    command = [memsim, "trace", "rescale", path, "--batch", str(batch), "--out", target]
    if gpu:
        command += ["--gpu", gpu]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return trace_info(memsim, target)


def relative(predicted, recorded):
    return (predicted - recorded) / recorded


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--data", required=True, help="folder of <model>-b<batch>-<tag>.trace.json.gz")
    parser.add_argument("--gpu", required=True, help="machine file with the recording GPU's calibrated curves")
    parser.add_argument("--memsim", default=os.path.join(root, "build", "release", "experiments", "memsim"))
    parser.add_argument("--out", required=True, help="output prefix: PREFIX.csv, PREFIX.png")
    args = parser.parse_args()

    recordings = collections.defaultdict(dict)
    for name in sorted(os.listdir(args.data)):
        match = NAME.match(name)
        if match:
            recordings[match["model"]][int(match["batch"])] = os.path.join(args.data, name)

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for model in sorted(recordings):
            batches = recordings[model]
            full = max(batches)
            base = trace_info(args.memsim, batches[full])
            for batch in sorted(batches):
                if batch == full:
                    continue
                recorded = trace_info(args.memsim, batches[batch])
                calibrated = rescaled_info(args.memsim, batches[full], batch, args.gpu, scratch)
                default = rescaled_info(args.memsim, batches[full], batch, None, scratch)
                linear_s = base["total_time_s"] * batch / full
                rows.append({
                    "model": model, "from_batch": full, "batch": batch, "fraction": batch / full,
                    "recorded_s": recorded["total_time_s"], "calibrated_s": calibrated["total_time_s"],
                    "default_s": default["total_time_s"], "linear_s": linear_s,
                    "calibrated_error": relative(calibrated["total_time_s"], recorded["total_time_s"]),
                    "default_error": relative(default["total_time_s"], recorded["total_time_s"]),
                    "linear_error": relative(linear_s, recorded["total_time_s"]),
                    "recorded_peak_bytes": recorded["default_peak_bytes"],
                    "rescaled_peak_bytes": calibrated["default_peak_bytes"],
                    "peak_error": relative(calibrated["default_peak_bytes"], recorded["default_peak_bytes"]),
                })
                print(f"{model} b{full} -> b{batch}: done", flush=True)

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})

    print("\n| model | batch | fraction | recorded ms | calibrated curves | default curves | linear | peak |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['model']} | {row['from_batch']} -> {row['batch']} | {row['fraction']:.3g} | "
              f"{row['recorded_s'] * 1e3:.2f} | {row['calibrated_error']:+.1%} | {row['default_error']:+.1%} | "
              f"{row['linear_error']:+.1%} | {row['peak_error']:+.2%} |")

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5), sharey=True)
    for axis, (key, title) in zip(axes, [("calibrated_error", "cost model, calibrated curves"),
                                         ("default_error", "cost model, default curves"),
                                         ("linear_error", "linear (time x batch ratio)")]):
        for model in sorted(recordings):
            points = [(r["fraction"], 100 * r[key]) for r in rows if r["model"] == model]
            axis.plot(*zip(*points), marker="o", label=model)
        axis.axhspan(-10, 10, color="0.92", zorder=0)
        axis.axhline(0, color="0.5", linewidth=0.8)
        axis.set_xscale("log", base=2)
        axis.set_xlabel("batch / recorded batch")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
    axes[0].set_ylabel("iteration compute time error vs recording (%)")
    axes[0].legend(fontsize=8)
    figure.suptitle("Rescaled from the largest batch vs recorded at that batch (grey: the 10 % target)")
    figure.tight_layout()
    figure.savefig(args.out + ".png", dpi=110, metadata={"Software": None})


if __name__ == "__main__":
    main()
