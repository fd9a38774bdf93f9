#!/usr/bin/env python3
"""Record the shipped traces (traces/data/) in one process: seven models, one training iteration each.

    python3 traces/tools/record_shipped_traces.py --device cuda --tag h100 --device-model H100-80GB-SXM \
        --out-dir OUT --date 2026-11-23

Writes OUT/<model>-b<batch>-<tag>.trace.json.gz and prints, per model, the exporter's comparison (trace peak vs
torch.cuda.max_memory_allocated, sum of op times vs the untraced iteration) plus one `REPORT {json}` line.
A model that runs out of memory is retried at half the batch. `--tiny` runs the same code on small shapes (CPU
checks of this script).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import memsim_export  # noqa: E402

# Batches chosen so that keeping every activation (the default schedule) needs more than 24 GiB in fp32, from
# per-sample activation bytes measured with this exporter on the CPU (torch 1.13) at batch 2.
SHIPPED = [
    ("resnet50", 384, []),
    ("resnet101", 256, []),
    ("vgg16", 384, []),
    ("inception_v3", 320, []),
    ("densenet121", 256, []),
    ("bert", 48, []),  # seq 512
    ("gpt", 20, []),  # seq 1024
]
TINY = {
    "resnet50": (2, ["--image-size", "64"]), "resnet101": (2, ["--image-size", "64"]),
    "vgg16": (2, ["--image-size", "32"]), "inception_v3": (2, ["--image-size", "80"]),
    "densenet121": (2, ["--image-size", "32"]),
    "bert": (2, ["--layers", "2", "--d-model", "64", "--heads", "4", "--vocab", "500", "--seq-len", "32"]),
    "gpt": (2, ["--layers", "2", "--d-model", "64", "--heads", "4", "--vocab", "500", "--seq-len", "32"]),
}


def environment(device):
    lines = [f"python {sys.version.split()[0]}, torch {torch.__version__}"]
    try:
        import torchvision

        lines.append(f"torchvision {torchvision.__version__}")
    except ImportError:
        lines.append("torchvision missing")
    if torch.device(device).type == "cuda":
        lines.append(f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
                     f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
                     f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
                     f"cudnn.benchmark={torch.backends.cudnn.benchmark}")
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            lines.append("nvidia-smi: " + smi.stdout.strip())
        except (OSError, subprocess.SubprocessError) as error:
            lines.append(f"nvidia-smi failed: {error}")
    return lines


def is_out_of_memory(error):
    return isinstance(error, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in str(error)


def record_one(model, batch, extra, args):
    argv = ["--model", model, "--batch", str(batch), "--device", args.device, "--out", "unused",
            "--warmup", str(args.warmup), "--repeat", str(args.repeat)] + extra
    options = memsim_export.parse_args(argv)
    work = memsim_export.build_workload(options, args.device)
    try:
        trace, report = memsim_export.record(work, args.device, warmup=args.warmup, repeat=args.repeat)
    finally:
        del work
        gc.collect()
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
    return trace, report


def save_recording(trace, report, path, args, started, extra):
    """Date, device model, rounded times and the exporter's check into the trace; write it; print the report and
    one `REPORT {json}` line (the report without per-iteration times, plus the file name and `extra`)."""
    if args.date:
        trace["source"]["date"] = args.date
    memsim_export.set_device_model(trace, args.device_model)
    memsim_export.round_times(trace)
    trace["notes"] += memsim_export.check_note(report)
    memsim_export.write_trace(trace, path)
    print(memsim_export.format_report(report), flush=True)
    print(f"wrote {path} ({os.path.getsize(path)} bytes) in {time.time() - started:.1f} s", flush=True)
    slim = {k: v for k, v in report.items() if k != "iteration_times_s"}
    slim["file"] = os.path.basename(path)
    slim.update(extra)
    print("REPORT " + json.dumps(slim, sort_keys=True), flush=True)


def recorder_arguments(description, budget_help):
    """The options every recorder takes (this one and record_fused_traces.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tag", default="h100", help="device tag in the file names")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--date", default=None)
    parser.add_argument("--device-model", default=None, help="source.device, e.g. H100-80GB-SXM (see memsim_export)")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--tiny", action="store_true", help="small shapes, for a CPU check of this script")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=1e9, help=budget_help)
    return parser


def main():
    parser = recorder_arguments(__doc__.split("\n")[0], "skip models that would start after this")
    parser.add_argument("--fractions", default="1",
                        help="comma-separated fractions of each model's shipped batch to record (rounded, at least 1),"
                             " e.g. 0.125,0.25,0.5,0.75,1 for the cost model's batch-rescaling check")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for line in environment(args.device):
        print(line, flush=True)
    begin = time.time()
    wanted = [m for m in args.only.split(",") if m]
    fractions = [float(f) for f in args.fractions.split(",") if f]
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        parser.error("--fractions: each fraction must be in (0, 1]")
    runs = []
    for model, shipped_batch, extra in SHIPPED:
        if args.tiny:
            shipped_batch, extra = TINY[model]
        batches = sorted({max(1, round(shipped_batch * f)) for f in fractions}, reverse=True)
        runs += [(model, batch, extra) for batch in batches]
    for model, batch, extra in runs:
        if wanted and model not in wanted:
            continue
        if time.time() - begin > args.budget_s:
            print(f"SKIPPED {model} b{batch}: time budget spent", flush=True)
            continue
        started = time.time()
        for attempt in range(3):
            try:
                trace, report = record_one(model, batch, extra, args)
                break
            except RuntimeError as error:
                if not is_out_of_memory(error) or attempt == 2:
                    print(f"FAILED {model} b{batch}: {type(error).__name__}: {str(error)[:400]}", flush=True)
                    trace = None
                    break
                print(f"{model} b{batch}: out of memory, retrying at b{batch // 2}", flush=True)
                batch //= 2
                gc.collect()
                torch.cuda.empty_cache()
            except Exception as error:  # one model failing must not lose the others
                print(f"FAILED {model} b{batch}: {type(error).__name__}: {str(error)[:400]}", flush=True)
                trace = None
                break
        if trace is None:
            continue
        save_recording(trace, report, os.path.join(args.out_dir, f"{model}-b{batch}-{args.tag}.trace.json.gz"), args,
                       started, {"batch": batch})
    print(f"total {time.time() - begin:.1f} s", flush=True)


if __name__ == "__main__":
    main()
