#!/usr/bin/python3
"""How far memsim's fusion models are from real vmap-fused recordings (issue 11).

For every <model>-b<batch> with recordings <model>-b<batch>-k<K>-<tag>.trace.json.gz in the fused-trace directory
(traces/data/fused-h200), fuses the K = 1 recording K times with `memsim gen fuse --fusion efficiency` and
`--fusion batch-proxy`, and compares, through `memsim trace info`, the sum of op times (total_time_s) and the
keep-all peak (default_peak_bytes) with the recorded K-model trace. Writes comparison.csv, comparison.md and
fusion_gain.png (t_K / (K * t_1) and peak per model against K) into --out.

    /usr/bin/python3 experiments/mu-two/fusion-measured/compare.py --memsim build/release/experiments/memsim \
        --traces traces/data/fused-h200 --out experiments/mu-two/fusion-measured
"""

import argparse
import collections
import csv
import os
import re
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

FILE = re.compile(r"^(?P<base>[a-z0-9_]+-b\d+)-k(?P<k>\d+)(?P<vmap>vmap)?-(?P<tag>[a-z0-9]+)\.trace\.json\.gz$")
GIB = 2**30


def trace_info(memsim, path):
    """(total_time_s, default_peak_bytes) of a trace, as memsim reads it."""
    text = subprocess.run([memsim, "trace", "info", path], check=True, capture_output=True, text=True).stdout
    total = float(re.search(r"total_time_s: ([0-9.e+-]+)", text).group(1))
    peak = int(re.search(r"default_peak_bytes: (\d+)", text).group(1))
    return total, peak


def fused_info(memsim, single, models, fusion, scratch):
    out = os.path.join(scratch, f"fused-{models}-{fusion}.trace.json")
    subprocess.run([memsim, "gen", "fuse", "--trace", single, "--models", str(models), "--fusion", fusion, "--out",
                    out], check=True, capture_output=True, text=True)
    return trace_info(memsim, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memsim", required=True, help="the memsim binary")
    parser.add_argument("--traces", required=True, help="directory of recorded fused traces")
    parser.add_argument("--out", required=True, help="directory for comparison.csv, comparison.md, fusion_gain.png")
    args = parser.parse_args()
    recordings = collections.defaultdict(dict)  # base -> {K or "vmap1": path}
    for name in sorted(os.listdir(args.traces)):
        match = FILE.match(name)
        if match:
            key = "vmap1" if match["vmap"] else int(match["k"])
            recordings[match["base"]][key] = os.path.join(args.traces, name)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for base, files in recordings.items():
            if 1 not in files or len([k for k in files if k != "vmap1"]) < 2:
                continue
            single = files[1]
            t1, peak1 = trace_info(args.memsim, single)
            vmap1 = trace_info(args.memsim, files["vmap1"]) if "vmap1" in files else None
            for models in sorted(k for k in files if k != "vmap1"):
                print(f"{base} K={models}", file=sys.stderr, flush=True)
                measured = trace_info(args.memsim, files[models])
                efficiency = fused_info(args.memsim, single, models, "efficiency", scratch)
                proxy = fused_info(args.memsim, single, models, "batch-proxy", scratch)
                rows.append({
                    "workload": base, "models": models,
                    "measured_time_s": measured[0], "efficiency_time_s": efficiency[0], "batch_proxy_time_s": proxy[0],
                    "measured_gain": measured[0] / (models * t1), "efficiency_gain": efficiency[0] / (models * t1),
                    "batch_proxy_gain": proxy[0] / (models * t1),
                    "efficiency_time_error": efficiency[0] / measured[0] - 1,
                    "measured_peak_bytes": measured[1], "fused_peak_bytes": efficiency[1],
                    "peak_error": efficiency[1] / measured[1] - 1,
                    "vmap1_time_ratio": vmap1[0] / t1 if vmap1 else "", "vmap1_peak_ratio": vmap1[1] / peak1 if vmap1 else "",
                })
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "comparison.csv"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    lines = ["| workload | K | measured t_K/(K t_1) | efficiency | batch-proxy | efficiency time error | "
             "measured peak GiB | fuse_trace peak GiB | peak error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['workload']} | {row['models']} | {row['measured_gain']:.3f} | {row['efficiency_gain']:.3f} | "
                     f"{row['batch_proxy_gain']:.3f} | {100 * row['efficiency_time_error']:+.1f}% | "
                     f"{row['measured_peak_bytes'] / GIB:.2f} | {row['fused_peak_bytes'] / GIB:.2f} | "
                     f"{100 * row['peak_error']:+.1f}% |")
    with open(os.path.join(args.out, "comparison.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    figure, (gain_axis, peak_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    for index, base in enumerate(sorted({row["workload"] for row in rows})):
        mine = [row for row in rows if row["workload"] == base]
        ks = [row["models"] for row in mine]
        color = f"C{index}"
        gain_axis.plot(ks, [row["measured_gain"] for row in mine], "o-", color=color, label=f"{base} measured")
        gain_axis.plot(ks, [row["efficiency_gain"] for row in mine], "x--", color=color, label=f"{base} efficiency")
        peak_axis.plot(ks, [row["measured_peak_bytes"] / GIB / row["models"] for row in mine], "o-", color=color,
                       label=f"{base} measured")
        peak_axis.plot(ks, [row["fused_peak_bytes"] / GIB / row["models"] for row in mine], "x--", color=color)
    gain_axis.axhline(1.0, color="grey", linewidth=0.8)
    gain_axis.set_xlabel("K fused models")
    gain_axis.set_ylabel("t_K / (K · t_1)  (below 1: fusion pays)")
    gain_axis.set_title("fusion gain: vmap recordings (o) vs the efficiency model (x)")
    gain_axis.legend(fontsize=6, ncol=2)
    peak_axis.set_xlabel("K fused models")
    peak_axis.set_ylabel("keep-all peak per model, GiB")
    peak_axis.set_title("peak per model: recordings (o) vs fuse_trace (x)")
    peak_axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(os.path.join(args.out, "fusion_gain.png"), dpi=110)


if __name__ == "__main__":
    main()
