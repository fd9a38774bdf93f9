#!/usr/bin/python3
"""ctest: traces/tools/memsim_export.py on the CPU (Debian's torch 1.13) writes traces memsim reads, and the trace's
default-schedule peak agrees with PyTorch's own accounting of the same iteration. Every tensor has a shape (and the
batch-proportional ones a batch_axis), ops carry split dimensions, and `memsim trace rescale` to twice the batch
doubles the batch-proportional bytes and leaves the weights alone. `--models 2` (two models fused with vmap) writes
a trace memsim reads, with exactly twice the single model's weight bytes and inputs [2, batch, ...].

    exporter_test.py --memsim PATH --exporter PATH
Exits 77 (ctest: skipped) when torch cannot be imported.
"""

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import torch  # noqa: F401  (only to know whether the exporter can run)
except ImportError:
    print("torch is not importable by /usr/bin/python3: skipped (install python3-torch)")
    sys.exit(77)

# Resident tensors + the CPU allocator's peak (legacy profiler) count a few bytes the trace does not name (the
# allocator's own alignment of the loss scalar); anything larger is a missed or double-counted tensor.
PEAK_TOLERANCE_BYTES = 64

BATCH = {"mlp": 8, "gpt": 2}
MODELS = {
    "mlp": ["--model", "mlp", "--batch", "8"],
    "gpt": ["--model", "gpt", "--batch", "2", "--layers", "2", "--d-model", "32", "--heads", "2", "--d-ff", "64",
            "--vocab", "100", "--seq-len", "16"],
}

# A fused (vmap) iteration: the trace counts a few hundred bytes more than the CPU allocator (scalar constants that
# vmap's backward creates outside any op come in as small resident inputs).
FUSED_PEAK_TOLERANCE = 1e-3

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def check_shapes_and_rescale(name, trace_path, memsim, scratch):
    with gzip.open(trace_path) as stream:
        trace = json.load(stream)
    tensors = trace["tensors"]
    check(all("shape" in t for t in tensors), f"{name}: a tensor without shape")
    by_name = {t["name"]: t for t in tensors}
    check(by_name["input"].get("batch_axis") == 0 and by_name["input"]["shape"][0] == BATCH[name],
          f"{name}: the input's batch axis is not 0: {by_name['input']}")
    check(not any("batch_axis" in t for t in tensors if t["kind"] in ("weight", "weight_grad", "optimizer_state")),
          f"{name}: a weight, weight gradient or optimizer state has a batch axis")
    check(any(t.get("batch_axis") is not None for t in tensors if t["kind"] == "activation"),
          f"{name}: no activation has a batch axis")
    splits = {op["type"]: op["split"] for op in trace["ops"] if "split" in op}
    check(splits.get("addmm") == ["batch", "channel"] or splits.get("mm") == ["batch", "channel"],
          f"{name}: matmul ops carry no split dimensions ({sorted(splits)})")
    check(not any("split" in op for op in trace["ops"] if op["phase"] == "update"), f"{name}: an update op splits")
    doubled_path = Path(scratch) / f"{name}-x2.trace.json"
    subprocess.run([memsim, "trace", "rescale", str(trace_path), "--batch", str(2 * BATCH[name]), "--out",
                    str(doubled_path)], check=True, capture_output=True)
    doubled = json.loads(doubled_path.read_text())
    check(doubled["source"]["batch"] == 2 * BATCH[name], f"{name}: rescaled source.batch")
    for before, after in zip(tensors, doubled["tensors"]):
        proportional = before.get("batch_axis") is not None
        expected = 2 * before["bytes"] if proportional else before["bytes"]
        check(after["bytes"] == expected,
              f"{name}: tensor {before['name']} ({before['kind']}) {before['bytes']} -> {after['bytes']} bytes")
    flops = [(a.get("flops"), b.get("flops")) for a, b in zip(trace["ops"], doubled["ops"]) if a.get("flops")]
    check(any(after > before for before, after in flops), f"{name}: no op's flops grew with the batch")


def check_fused(args, scratch):
    traces = {}
    for models in (1, 2):
        path = Path(scratch) / f"gpt-k{models}.trace.json.gz"
        report_file = Path(scratch) / f"gpt-k{models}.report.json"
        subprocess.run([sys.executable, args.exporter, *MODELS["gpt"], "--models", str(models), "--device", "cpu",
                        "--warmup", "1", "--repeat", "1", "--date", "2026-01-01", "--out", str(path), "--report",
                        str(report_file)], check=True)
        with gzip.open(path) as stream:
            traces[models] = json.load(stream)
    report = json.loads(report_file.read_text())
    info = json.loads(subprocess.run([args.memsim, "trace", "info", str(path), "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    check(info["default_peak_bytes"] == report["trace_peak_bytes"], "fused: memsim peak != exporter's")
    check(abs(report["peak_ratio"] - 1) <= FUSED_PEAK_TOLERANCE, f"fused: peak ratio {report['peak_ratio']}")
    weight_bytes = {k: sum(t["bytes"] for t in trace["tensors"] if t["kind"] == "weight") for k, trace in
                    traces.items()}
    check(weight_bytes[2] == 2 * weight_bytes[1], f"fused: weight bytes {weight_bytes}")
    fused = traces[2]
    by_name = {t["name"]: t for t in fused["tensors"]}
    check(by_name["input"]["shape"][:2] == [2, BATCH["gpt"]] and by_name["input"].get("batch_axis") == 1,
          f"fused: input {by_name['input']}")
    check(fused["name"] == "gpt-b2-k2" and fused["source"]["batch"] == BATCH["gpt"], "fused: name or batch")
    check("fused 2 models" in fused["source"]["model"], "fused: source.model does not say so")
    check(fused["source"].get("models") == 2 and "models" not in traces[1]["source"],
          f"fused: source.models {fused['source'].get('models')} (K = 1: {traces[1]['source'].get('models')})")
    check(len({op["layer"] for op in fused["ops"] if op["phase"] == "backward"}) > 1, "fused: one backward layer")
    print(f"fused gpt k2: {info['ops']} ops, peak {report['trace_peak_bytes']} B (torch "
          f"{report['reference_peak_bytes']} B), weights {weight_bytes}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--memsim", required=True)
    parser.add_argument("--exporter", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for name, model_args in MODELS.items():
            trace = Path(scratch) / f"{name}.trace.json.gz"
            report_file = Path(scratch) / f"{name}.report.json"
            subprocess.run([sys.executable, args.exporter, *model_args, "--device", "cpu", "--warmup", "1",
                            "--repeat", "1", "--date", "2026-01-01", "--out", str(trace), "--report",
                            str(report_file)], check=True)
            report = json.loads(report_file.read_text())
            info = json.loads(subprocess.run([args.memsim, "trace", "info", str(trace), "--json"], check=True,
                                             capture_output=True, text=True).stdout)
            # memsim's default schedule is the exporter's: same peak, same total time.
            check(info["default_peak_bytes"] == report["trace_peak_bytes"],
                  f"{name}: memsim peak {info['default_peak_bytes']} != exporter's {report['trace_peak_bytes']}")
            # The trace stores each op time to the nanosecond; the report sums the unrounded times.
            check(abs(info["total_time_s"] - report["sum_op_time_s"]) <= info["ops"] * 1e-9,
                  f"{name}: total_time_s {info['total_time_s']} != sum of op times {report['sum_op_time_s']}")
            # ... and PyTorch's own accounting agrees.
            check(report["reference"].startswith("resident tensors + CPU allocator"),
                  f"{name}: no CPU allocator reference ({report['reference']})")
            gap = abs(report["trace_peak_bytes"] - report["reference_peak_bytes"])
            check(gap <= PEAK_TOLERANCE_BYTES,
                  f"{name}: trace peak {report['trace_peak_bytes']} vs torch {report['reference_peak_bytes']}")
            # Every phase is there, sequential models have a chain view, autograd's saved tensors are activations.
            for phase in ("forward", "loss", "backward", "update"):
                check(info["ops_by_phase"].get(phase, {}).get("count", 0) > 0, f"{name}: no {phase} op")
            check(info["chain_view"], f"{name}: no chain view")
            check(info["saved_activation_bytes"] > 0, f"{name}: no saved activation")
            check(report["saved_for_backward_bytes"] > 0, f"{name}: autograd hooks saw nothing")
            check_shapes_and_rescale(name, trace, args.memsim, scratch)
            print(f"{name}: {info['ops']} ops, peak {info['default_peak_bytes']} B (torch {report['reference_peak_bytes']}"
                  f" B), {info['total_time_s'] * 1e3:.2f} ms")
        check_fused(args, scratch)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
