#!/usr/bin/env python3
"""Record vmap-fused k-model iterations (μ-TWO's profiling, `memsim_export.py --models K`) in one process.

    python3 traces/tools/record_fused_traces.py --device cuda --tag h100 --device-model H100-80GB-SXM \
        --out-dir OUT --date 2026-11-26 --budget-s 180

For each model (bert at batch 16, seq 512; gpt at batch 8, seq 1024; resnet101 at batch 48: μ-TWO's Table 1
batches; `--batches second|both` adds 24, 16 and 64) and each K of --models-list, writes OUT/<model>-b<batch>-k<K>-<tag>.trace.json.gz with plain SGD
(momentum 0.9, spec A17) and prints the exporter's comparison plus one `REPORT {json}` line. A K that runs out of
memory skips the larger K of that model; any other failure is printed (FAILED) and the next recording starts.
`--tiny` runs the same code on small shapes (CPU checks of this script).
"""

import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import memsim_export  # noqa: E402
from record_shipped_traces import (TINY, environment, is_out_of_memory, recorder_arguments,  # noqa: E402
                                   save_recording)

# (model, μ-TWO Table 1's two batch sizes, exporter options)
FUSED = [
    ("bert", (16, 24), []),  # seq 512
    ("gpt", (8, 16), []),  # seq 1024
    ("resnet101", (48, 64), []),
]


def record_fused(model, batch, models, extra, args, through_vmap):
    argv = ["--model", model, "--batch", str(batch), "--device", args.device, "--out", "unused",
            "--warmup", str(args.warmup), "--repeat", str(args.repeat), "--optimizer", "sgd",
            "--models", str(models)] + extra
    options = memsim_export.parse_args(argv)
    if models == 1 and not through_vmap:
        work = memsim_export.build_workload(options, args.device)
    else:
        work = memsim_export.build_fused_workload(options, args.device)
    try:
        return memsim_export.record(work, args.device, warmup=args.warmup, repeat=args.repeat)
    finally:
        del work
        gc.collect()
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()


def main():
    parser = recorder_arguments(__doc__.split("\n")[0], "start no recording after this many seconds")
    parser.add_argument("--models-list", default="1,2,3,4,5,6,7,8", help="comma-separated K (fused models)")
    parser.add_argument("--batches", choices=["first", "second", "both"], default="first",
                        help="which of μ-TWO's Table 1 batch sizes to record (first: bert 16, gpt 8, resnet101 48; "
                             "second: 24, 16, 64)")
    parser.add_argument("--vmap-k1", action="store_true",
                        help="also record K = 1 through vmap (math attention, stacked state) as <model>-b<batch>-k1vmap-"
                             "<tag>: the baseline that separates what vmap costs from what fusing K models costs")
    args = parser.parse_args()
    counts = sorted({int(k) for k in args.models_list.split(",") if k})
    if not counts or counts[0] < 1:
        parser.error("--models-list: each K must be at least 1")
    os.makedirs(args.out_dir, exist_ok=True)
    for line in environment(args.device):
        print(line, flush=True)
    begin = time.time()
    wanted = [m for m in args.only.split(",") if m]
    picked = {"first": (0,), "second": (1,), "both": (0, 1)}[args.batches]
    runs = []
    for model, batches, extra in FUSED:
        if wanted and model not in wanted:
            continue
        for index in picked:
            batch = batches[index]
            model_extra = extra
            if args.tiny:
                batch, model_extra = TINY[model]
                batch += index
            if args.vmap_k1:
                runs.append((model, batch, model_extra, [1], True))
            runs.append((model, batch, model_extra, counts, False))
    for model, batch, extra, model_counts, through_vmap in runs:
        for models in model_counts:
            label = f"{model} b{batch} k{models}" + (" through vmap" if through_vmap else "")
            if time.time() - begin > args.budget_s:
                print(f"SKIPPED {label}: time budget spent", flush=True)
                continue
            started = time.time()
            trace = None
            out_of_memory = False
            try:
                trace, report = record_fused(model, batch, models, extra, args, through_vmap)
            except Exception as error:  # one recording failing must not lose the others
                out_of_memory = is_out_of_memory(error)
                if out_of_memory:
                    print(f"OOM {label}: skipping K >= {models} of {model}", flush=True)
                else:
                    print(f"FAILED {label}: {type(error).__name__}: {str(error)[:400]}", flush=True)
            if trace is None:
                # Here the exception (and the frames holding the failed recording's tensors) is gone.
                gc.collect()
                if torch.device(args.device).type == "cuda":
                    torch.cuda.empty_cache()
                if out_of_memory:
                    break
                continue
            save_recording(trace, report,
                           os.path.join(args.out_dir, f"{model}-b{batch}-k{models}{'vmap' if through_vmap else ''}-{args.tag}.trace.json.gz"),
                           args,
                           started, {"batch": batch, "models": models, "through_vmap": through_vmap, "elapsed_s": round(time.time() - started, 1)})
    print(f"total {time.time() - begin:.1f} s", flush=True)


if __name__ == "__main__":
    main()
