#!/usr/bin/python3
"""Writes pipeline.trace.json / pipeline.plan.json: an 8-layer chain whose forward activations (64 MB each)
are offloaded and prefetched back one layer ahead in backward (vDNN-style), with a budget that only fits
if the frees are honoured. Used by the runtime tests and the GPU smoke run."""
import argparse
import json
import pathlib

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--layers", type=int, default=8)
parser.add_argument("--activation-bytes", type=int, default=64_000_000)
parser.add_argument("--weight-bytes", type=int, default=4_000_000)
parser.add_argument("--forward-s", type=float, default=0.002, help="backward ops take twice as long")
parser.add_argument("--budget-bytes", type=int, default=420_000_000)
parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "pipeline"),
                    help="writes OUT.trace.json and OUT.plan.json")
args = parser.parse_args()
LAYERS = args.layers
ACT = args.activation_bytes

tensors = [{"id": 0, "name": "x", "bytes": ACT, "kind": "input"}]
for l in range(LAYERS):
    tensors.append({"id": len(tensors), "name": f"w{l}", "bytes": args.weight_bytes, "kind": "weight"})
w = {l: 1 + l for l in range(LAYERS)}
a = {}
for l in range(LAYERS):
    a[l] = len(tensors)
    tensors.append({"id": a[l], "name": f"a{l}", "bytes": ACT, "kind": "activation"})
g = {}
for l in range(LAYERS):
    g[l] = len(tensors)
    tensors.append({"id": g[l], "name": f"g{l}", "bytes": ACT, "kind": "gradient"})

ops = []
def op(name, phase, layer, inputs, outputs, time_s):
    ops.append({"id": len(ops), "name": name, "type": "linear", "phase": phase, "layer": layer,
                "inputs": inputs, "outputs": outputs, "workspace_bytes": 0, "time_s": time_s,
                "flops": time_s * 5e13})
    return ops[-1]["id"]

fwd = {}
for l in range(LAYERS):
    fwd[l] = op(f"l{l}.fwd", "forward", l, [a[l - 1] if l else 0, w[l]], [a[l]], args.forward_s)
bwd = {}
for l in reversed(range(LAYERS)):
    grad_in = g[l + 1] if l + 1 < LAYERS else a[LAYERS - 1]
    bwd[l] = op(f"l{l}.bwd", "backward", l, [grad_in, a[l - 1] if l else 0, w[l]], [g[l]], 2 * args.forward_s)

steps = []
def step(kind, stream, deps, **ref):
    steps.append({"id": len(steps), "kind": kind, **ref, "device": 0, "stream": stream, "deps": deps})
    return steps[-1]["id"]

# Forward: a[l] is offloaded after l+1's forward read it (the last one stays for the loss/backward).
compute_of = {}
offload_of = {}
free_of = {}
for l in range(LAYERS):
    compute_of[l] = step("compute", "compute", [], op=fwd[l])
    if l >= 1 and l - 1 < LAYERS - 2:
        offload_of[l - 1] = step("offload", "d2h", [compute_of[l - 1]], tensor=a[l - 1])
        free_of[l - 1] = step("free", "d2h", [offload_of[l - 1], compute_of[l]], tensor=a[l - 1])
# Backward: layer l reads a[l-1]. Its prefetch is issued one layer ahead: it may start once layer l+2's
# backward is done (so at most one prefetched activation waits), and overlaps layer l+1's backward.
prefetch_of = {}
done_bwd = {}
def prefetch_for(l):
    if l >= 1 and l - 1 in offload_of and l - 1 not in prefetch_of:
        deps = [free_of[l - 1]] + ([done_bwd[l + 2]] if l + 2 in done_bwd else [])
        prefetch_of[l - 1] = step("prefetch", "h2d", deps, tensor=a[l - 1])
for l in reversed(range(LAYERS)):
    prefetch_for(l)
    prefetch_for(l - 1)
    deps = [prefetch_of[l - 1]] if l - 1 in prefetch_of else []
    done_bwd[l] = step("compute", "compute", deps, op=bwd[l])
    # Inputs consumed: the incoming gradient and this layer's saved input.
    grad_in = g[l + 1] if l + 1 < LAYERS else a[LAYERS - 1]
    step("free", "compute", [], tensor=grad_in)
    if l >= 1:
        step("free", "compute", [], tensor=a[l - 1])
step("free", "compute", [], tensor=g[0])

trace = {"format": "memsim-trace", "version": 1, "name": "runtime-pipeline",
         "source": {"tool": "make_pipeline_fixture.py", "device": "ref-gpu", "dtype": "fp32", "batch": 1},
         "tensors": tensors, "ops": ops}
plan = {"format": "memsim-plan", "version": 1, "trace": "runtime-pipeline", "machine": "any",
        "planner": "hand-vdnn", "budget_bytes": args.budget_bytes, "steps": steps}
pathlib.Path(args.out + ".trace.json").write_text(json.dumps(trace, indent=1) + "\n")
pathlib.Path(args.out + ".plan.json").write_text(json.dumps(plan, indent=1) + "\n")
