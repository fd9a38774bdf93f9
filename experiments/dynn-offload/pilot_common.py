"""What the two pilot studies of DyNN-Offload (memo/ and pilot-size/) share: the workloads, the machine and budgets,
and the memsim commands that generate traces, train and evaluate a pilot and run the dynn-offload runtime.

Every number here is fixed (seeds included), so that the studies' CSVs are byte-identical from run to run. Wall times
(training, measured inference) are the only exception and go to separate files.
"""
import json
import os
import pathlib
import re
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
MEMSIM = pathlib.Path(os.environ.get("MEMSIM", ROOT / "build/release/experiments/memsim"))
MACHINE = "quadro-rtx6000-24gb-pcie3"  # the paper's 24 GB platform, PCIe 3.0 at 12 GB/s, 10 us latency
H2D_BYTES_PER_S = 12e9
LINK_LATENCY_S = 10e-6
TRAIN_SEED = 1  # the pilot's training iterations
TEST_SEED = 2  # disjoint test iterations (another seed of the same generator)


class Workload:
    """A dynamic generator at a small size, the pilot's network type and the budget (two halves of budget/2)."""

    def __init__(self, name, kind, net_type, budget, params):
        self.name = name
        self.kind = kind
        self.net_type = net_type
        self.budget = budget
        self.params = params

    def gen_params(self, iterations, seed):
        return [f"{k}={v}" for k, v in self.params.items()] + [f"iterations={iterations}", f"seed={seed}"]


# Small models so that hundreds of iterations train and simulate in minutes on two cores. Budgets are 0.7-0.75 of
# each model's keep-all peak (so every iteration runs in several blocks), except tree-cnn's: one of its ops needs
# 8.2 MB, so half a budget cannot be less (16 MiB is 1.08x its peak; the runtime still migrates every block).
# treelstm twice: shape_noise 0 (the leaf count and the seed's grammar decide the tree) and 0.2 (the generator's
# default: per-iteration randomness the pilot cannot see, the spec's p_noise). tree-cnn's merges are seeded per
# iteration, so its tree shape is noise throughout.
WORKLOADS = [
    Workload("tree-cnn", "tree-cnn", "cnn", "16MiB",
             {"min_leaves": 5, "max_leaves": 12, "vocab": 500, "batch": 8}),
    Workload("treelstm-noise0", "treelstm", "lstm", "96MiB",
             {"min_leaves": 5, "max_leaves": 12, "vocab": 4000, "batch": 256, "shape_noise": 0}),
    Workload("treelstm-noise0.2", "treelstm", "lstm", "96MiB",
             {"min_leaves": 5, "max_leaves": 12, "vocab": 4000, "batch": 256, "shape_noise": 0.2}),
    Workload("var-bert", "var-bert", "transformer", "36MiB",
             {"layers": 2, "hidden": 256, "heads": 4, "batch": 8, "min_seq": 16, "max_seq": 48, "vocab": 2000}),
]


def run(args, capture=True):
    result = subprocess.run([str(a) for a in args], check=True, text=True, capture_output=capture)
    return result.stdout if capture else ""


def generate(workload, iterations, seed, path):
    flags = ["--" + p.split("=", 1)[0].replace("_", "-") + "=" + p.split("=", 1)[1]
             for p in workload.gen_params(iterations, seed)]
    run([MEMSIM, "gen", workload.kind, *flags, "--machine", MACHINE, "--out", path])


def train_pilot(workload, iterations, hidden, path, epochs=1500):
    """Trains on `iterations` of the training seed (none held out); returns (model path, wall seconds)."""
    args = [MEMSIM, "pilot", "train", "--workload", workload.kind]
    for p in workload.gen_params(iterations, TRAIN_SEED):
        args += ["--gen-param", p]
    args += ["--machine", MACHINE, "--budget", workload.budget, "--type", workload.net_type, "--hidden", hidden,
             "--epochs", epochs, "--held-out", 0, "-o", path]
    start = time.monotonic()
    run(args)
    return path, time.monotonic() - start


EVAL_LINE = re.compile(r": (\d+) samples, accuracy [0-9.]+ \((\d+) exact\), (\d+) mispredicted \((\d+) unresolvable\)")
COST_LINE = re.compile(r"parameters: (\d+) per network \((\d+) bytes as float32\), (\d+) in all; "
                       r"inference ([0-9.]+) us per prediction")


def evaluate_pilot(model, trace):
    """`memsim pilot eval` on a trace: samples, exact, mispredicted (boundaries differ), unresolvable (the counts do
    not add up to the iteration), parameters of one MLP, its float32 bytes, and the measured inference in us."""
    out = run([MEMSIM, "pilot", "eval", "--model", model, "--trace", trace])
    samples, exact, mispredicted, unresolvable = map(int, EVAL_LINE.search(out).groups())
    params, bytes_, _, infer_us = COST_LINE.search(out).groups()
    return {"samples": samples, "exact": exact, "mispredicted": mispredicted, "unresolvable": unresolvable,
            "parameters": int(params), "bytes": int(bytes_), "inference_us": float(infer_us)}


def host_start_plan(trace, budget, path):
    """The framework's order (a keep-all plan) at `budget`, inputs, weights and optimizer state starting on the host
    (DyNN-Offload's allocator redirect, spec §1.7): the plan the runtime policy runs."""
    run([MEMSIM, "plan", "--trace", trace, "--machine", MACHINE, "--planner", "keep-all", "--out", path])
    plan = json.loads(pathlib.Path(path).read_text())
    plan["budget_bytes"] = budget_bytes(budget)
    plan["initial_placement"] = [{"kind": k, "where": "host"} for k in ("input", "weight", "optimizer_state")]
    pathlib.Path(path).write_text(json.dumps(plan) + "\n")


def budget_bytes(text):
    number, unit = re.fullmatch(r"(\d+)(MiB|GiB)", text).groups()
    return int(number) * {"MiB": 2**20, "GiB": 2**30}[unit]


def simulate(trace, plan, policy_params):
    """The dynn-offload runtime on the fast engine; the metrics as memsim's JSON."""
    args = [MEMSIM, "simulate", "--trace", trace, "--machine", MACHINE, "--plan", plan, "--engine", "fast",
            "--policy", "dynn-offload", "--json"]
    for k, v in policy_params.items():
        args += ["--policy-param", f"{k}={v}"]
    return json.loads(run(args))
