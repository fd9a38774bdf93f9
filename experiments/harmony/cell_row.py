"""One CSV row of a simulated multi-GPU plan (experiments/harmony/fig10, fig12, fig14 and table1).

Usage: cell_row.py TRACE PLAN SIM_JSON key=value...  (the keys name the cell: model, planner, recompute, gpus,
minibatch, u_fwd, u_bwd, search_estimate_s, ...). Per-GPU swap volumes are read from the plan: every host<->GPU copy
is a plan step (prefetch: h2d, offload: d2h) on one device, so the static byte count per device is exact.
"""
import csv
import json
import sys

COLUMNS = ["model", "planner", "recompute", "gpus", "minibatch", "u_fwd", "u_bwd", "packs_fwd", "packs_bwd",
           "feasible", "iteration_time_s", "samples_per_s", "estimate_s", "search_estimate_s", "h2d_bytes",
           "d2h_bytes", "p2p_bytes", "h2d_bytes_per_gpu", "d2h_bytes_per_gpu", "peak_device_bytes",
           "peak_host_bytes", "reason"]


def main():
    if sys.argv[1] == "--header":
        csv.writer(sys.stdout, lineterminator="\n").writerow(COLUMNS)
        return
    trace_path, plan_path, sim_path = sys.argv[1:4]
    row = dict(arg.split("=", 1) for arg in sys.argv[4:])
    plan = json.load(open(plan_path))
    sim = json.load(open(sim_path))
    tensor_bytes = {t["id"]: t["bytes"] for t in json.load(open(trace_path))["tensors"]}
    # Planners may add tensors of their own (zero-infinity's W/dW/K shards): they are swapped like the trace's.
    tensor_bytes.update({t["id"]: t["bytes"] for t in plan.get("extra_tensors", [])})
    gpus = int(row["gpus"])
    h2d, d2h = [0] * gpus, [0] * gpus
    for step in plan["steps"]:
        if step["kind"] == "prefetch":
            h2d[step.get("device", 0)] += tensor_bytes[step["tensor"]]
        elif step["kind"] == "offload":
            d2h[step.get("device", 0)] += tensor_bytes[step["tensor"]]
    estimate = plan.get("estimate", {}).get("iteration_time_s")
    config = plan["params"].get("configuration", {})
    feasible = bool(sim["feasible"])
    seconds = sim["iteration_time_s"]
    # Plans of several iterations (pipedream2bw-swap's steady state): the row is one steady iteration, its time the
    # mean of the iterations between the first (the pipeline's fill) and the last (its drain runs without the next
    # minibatch's forwards beside it, so on a contended link it is shorter than the steady period; the core's
    # steady_iteration_time_s averages it in), and its bytes the plan's over the iteration count (every iteration
    # moves the same bytes).
    iterations = int(config.get("iterations", 1))
    if iterations > 1:
        times = sim.get("iteration_times_s", [])
        steady = times[1:-1] if len(times) > 2 else times[1:]
        if feasible and steady:
            seconds = sum(steady) / len(steady)
        for volumes in (h2d, d2h):
            assert all(v % iterations == 0 for v in volumes), "bytes differ between iterations"
            volumes[:] = [v // iterations for v in volumes]
        if feasible:
            sim["p2p_bytes"] //= iterations
    row.update({
        "packs_fwd": len(config["pack_fwd"].split(",")) if config.get("pack_fwd") else "",
        "packs_bwd": len(config["pack_bwd"].split(",")) if config.get("pack_bwd") else "",
        "feasible": "true" if feasible else "false",
        "iteration_time_s": f"{seconds:.6f}" if feasible else "",
        "samples_per_s": f"{int(row['minibatch']) / seconds:.6f}" if feasible else "",
        "estimate_s": f"{estimate:.6f}" if estimate is not None else "",
        "h2d_bytes": sum(h2d),
        "d2h_bytes": sum(d2h),
        "p2p_bytes": sim["p2p_bytes"] if feasible else "",
        "h2d_bytes_per_gpu": ";".join(map(str, h2d)),
        "d2h_bytes_per_gpu": ";".join(map(str, d2h)),
        "peak_device_bytes": sim["peak_device_bytes"] if feasible else "",
        "peak_host_bytes": sim["peak_host_bytes"] if feasible else "",
        "reason": "" if feasible else (sim.get("error") or {}).get("kind", "infeasible"),
    })
    if row["packs_fwd"] == "" and config.get("pack_bwd"):
        row["packs_fwd"] = 0
    csv.writer(sys.stdout, lineterminator="\n").writerow([row.get(c, "") for c in COLUMNS])


if __name__ == "__main__":
    main()
