#!/usr/bin/python3
"""DyNN-Offload Table IV in memsim: the pilot MLP's accuracy, mispredictions, training and inference time as its width
grows. "# of neurons" N is read as the neurons of one MLP's four layers (spec §4 A4), so the hidden width is
w = N / 4: N = 256 ... 4096 is w = 64 ... 1024 (`memsim pilot train --hidden`). For treelstm (shape_noise 0) of
../pilot_common.py and each width: train on the training seed's iterations, evaluate on disjoint test iterations
(`memsim pilot eval`: exact-match accuracy, boundary mispredictions, unresolvable predictions), and run the
dynn-offload runtime with the pilot, memo off, over the test iterations (iterations with on-demand fetches).

results.csv (byte-identical from run to run): the deterministic columns. timing.csv: training wall time and
measured inference time per prediction (wall clock on a shared machine: they vary from run to run).

    ./bootstrap.sh build && /usr/bin/python3 experiments/dynn-offload/pilot-size/run.py [--work DIR]
"""
import argparse
import csv
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import pilot_common as common  # noqa: E402

NEURONS = [256, 512, 1024, 2048, 4096]
TRAIN_ITERATIONS = 120
TEST_ITERATIONS = 100
# One workload, the learnable one (the leaf count decides the tree), to keep the sweep to minutes on two cores.
SIZE_WORKLOADS = ["treelstm-noise0"]

PAPER = {  # Table IV: neurons -> accuracy, training time, inference time, memory
    256: (0.70, "2 h", 5, "40 KB"), 512: (0.82, "2.5 h", 12, "75 KB"), 1024: (0.88, "3 h", 20, "140 KB"),
    2048: (0.91, "4 h", 42, "260 KB"), 4096: (0.93, "6 h", 80, "530 KB"),
}

COLUMNS = ["workload", "neurons", "hidden", "parameters", "float32_bytes", "test_iterations", "exact", "accuracy",
           "offline_mispredicted", "offline_unresolvable", "runtime_mispredicted", "on_demand_bytes",
           "paper_accuracy", "paper_memory"]
TIMING_COLUMNS = ["workload", "neurons", "hidden", "train_wall_s", "inference_us", "paper_training",
                  "paper_inference_us"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="out/dynn-pilot-size", help="traces, plans and pilot models go here")
    parser.add_argument("--csv", default=str(HERE / "results.csv"))
    parser.add_argument("--timing", default=str(HERE / "timing.csv"))
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows, timing = [], []
    for workload in [w for w in common.WORKLOADS if w.name in SIZE_WORKLOADS]:
        trace = work / f"{workload.name}.test.json"
        common.generate(workload, TEST_ITERATIONS, common.TEST_SEED, trace)
        plan = work / f"{workload.name}.plan.json"
        common.host_start_plan(trace, workload.budget, plan)
        for neurons in NEURONS:
            hidden = neurons // 4
            print(f"{workload.name}: N = {neurons} (w = {hidden})", flush=True)
            model, wall = common.train_pilot(workload, TRAIN_ITERATIONS, hidden,
                                             work / f"{workload.name}.w{hidden}.pilot.json")
            offline = common.evaluate_pilot(model, trace)
            metrics = common.simulate(trace, plan, {"prediction": "pilot", "pilot_model": model, "memo": "false"})
            paper = PAPER[neurons]
            rows.append({
                "workload": workload.name, "neurons": neurons, "hidden": hidden,
                "parameters": offline["parameters"], "float32_bytes": offline["bytes"],
                "test_iterations": offline["samples"], "exact": offline["exact"],
                "accuracy": f"{offline['exact'] / offline['samples']:.4f}",
                "offline_mispredicted": offline["mispredicted"], "offline_unresolvable": offline["unresolvable"],
                "runtime_mispredicted": metrics.get("mispredicted_iterations", 0) if metrics["feasible"] else "",
                "on_demand_bytes": metrics.get("on_demand_bytes", 0) if metrics["feasible"] else "",
                "paper_accuracy": paper[0], "paper_memory": paper[3],
            })
            timing.append({"workload": workload.name, "neurons": neurons, "hidden": hidden,
                           "train_wall_s": f"{wall:.1f}", "inference_us": f"{offline['inference_us']:.2f}",
                           "paper_training": paper[1], "paper_inference_us": paper[2]})
            write(args, rows, timing)  # after every width: the widest take longest


def write(args, rows, timing):
    for path, columns, table in ((args.csv, COLUMNS, rows), (args.timing, TIMING_COLUMNS, timing)):
        with open(path, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(table)
    print(f"wrote {args.csv} and {args.timing}", flush=True)


if __name__ == "__main__":
    main()
