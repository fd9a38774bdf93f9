#!/usr/bin/python3
"""ctest: traces/tools/memsim_export.py on the CPU (Debian's torch 1.13) writes traces memsim reads, and the trace's
default-schedule peak agrees with PyTorch's own accounting of the same iteration.

    exporter_test.py --memsim PATH --exporter PATH
Exits 77 (ctest: skipped) when torch cannot be imported.
"""

import argparse
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

MODELS = {
    "mlp": ["--model", "mlp", "--batch", "8"],
    "gpt": ["--model", "gpt", "--batch", "2", "--layers", "2", "--d-model", "32", "--heads", "2", "--d-ff", "64",
            "--vocab", "100", "--seq-len", "16"],
}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


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
            print(f"{name}: {info['ops']} ops, peak {info['default_peak_bytes']} B (torch {report['reference_peak_bytes']}"
                  f" B), {info['total_time_s'] * 1e3:.2f} ms")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
