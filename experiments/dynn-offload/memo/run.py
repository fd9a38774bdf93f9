#!/usr/bin/python3
"""DyNN-Offload §VI-H in memsim: mispredictions of the pilot with and without the memo, and what the on-demand fetches
cost. For each workload of ../pilot_common.py: train the pilot (512 neurons, w = 128: the paper's choice) on the
training seed's iterations, generate disjoint test iterations (another seed), count the offline mispredictions
(`memsim pilot eval`), then run the dynn-offload runtime over the test iterations with the oracle (perfect
prediction), the pilot without the memo and the pilot with it (pilot_infer_s 30 us + map_s 12.5 us charged per
iteration in all three). Writes results.csv (byte-identical from run to run) here or to --csv.

    ./bootstrap.sh build && /usr/bin/python3 experiments/dynn-offload/memo/run.py [--work DIR]
"""
import argparse
import csv
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import pilot_common as common  # noqa: E402

TRAIN_ITERATIONS = 120
TEST_ITERATIONS = 300
HIDDEN = 128  # 4 x 128 = 512 neurons: Table IV's chosen size (spec §4 A4: "# of neurons" = 4 w)
PILOT_COST = {"pilot_infer_s": 30e-6, "map_s": 12.5e-6}  # the paper's inference and mapping per iteration

PAPER = {  # §VI-H, 3,000 test samples: mispredictions without -> with the memo
    "tree-cnn": (167, 59),
    "treelstm-noise0": (109, 42),
    "treelstm-noise0.2": (109, 42),
    "var-bert": (182, 102),
}

COLUMNS = ["workload", "prediction", "memo", "test_iterations", "offline_mispredicted", "offline_unresolvable",
           "mispredicted_iterations", "on_demand_fetches", "on_demand_bytes", "on_demand_transfer_s", "total_time_s",
           "on_demand_share", "time_over_oracle", "h2d_bytes", "paper_mispredicted"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="out/dynn-memo", help="traces, plans and pilot models go here")
    parser.add_argument("--csv", default=str(HERE / "results.csv"))
    args = parser.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for workload in common.WORKLOADS:
        print(f"{workload.name}: training the pilot on {TRAIN_ITERATIONS} iterations", flush=True)
        model, _ = common.train_pilot(workload, TRAIN_ITERATIONS, HIDDEN, work / f"{workload.name}.pilot.json")
        trace = work / f"{workload.name}.test.json"
        common.generate(workload, TEST_ITERATIONS, common.TEST_SEED, trace)
        offline = common.evaluate_pilot(model, trace)
        plan = work / f"{workload.name}.plan.json"
        common.host_start_plan(trace, workload.budget, plan)
        runs = [("oracle", "", {"prediction": "oracle"}),
                ("pilot", "off", {"prediction": "pilot", "pilot_model": model, "memo": "false"}),
                ("pilot", "on", {"prediction": "pilot", "pilot_model": model, "memo": "true"})]
        oracle_time = None
        for prediction, memo, params in runs:
            print(f"{workload.name}: {prediction} {memo}", flush=True)
            metrics = common.simulate(trace, plan, {**params, **PILOT_COST})
            if not metrics["feasible"]:
                raise SystemExit(f"{workload.name} {prediction}: infeasible at {workload.budget}")
            total = sum(metrics["iteration_times_s"])
            oracle_time = total if oracle_time is None else oracle_time
            fetches = metrics.get("on_demand_fetches", 0)
            fetched = metrics.get("on_demand_bytes", 0)
            # The on-demand copies' own transfer time (the op waits for each): bytes at the link's bandwidth plus its
            # latency per fetch. An upper bound of what they add when they share the link with prefetches.
            transfer = fetched / common.H2D_BYTES_PER_S + fetches * common.LINK_LATENCY_S
            paper = PAPER[workload.name]
            rows.append({
                "workload": workload.name, "prediction": prediction, "memo": memo,
                "test_iterations": len(metrics["iteration_times_s"]),
                "offline_mispredicted": offline["mispredicted"] if prediction == "pilot" else "",
                "offline_unresolvable": offline["unresolvable"] if prediction == "pilot" else "",
                "mispredicted_iterations": metrics.get("mispredicted_iterations", 0),
                "on_demand_fetches": fetches, "on_demand_bytes": fetched,
                "on_demand_transfer_s": f"{transfer:.9g}", "total_time_s": f"{total:.9g}",
                "on_demand_share": f"{transfer / total:.6g}", "time_over_oracle": f"{total / oracle_time:.6g}",
                "h2d_bytes": metrics["h2d_bytes"],
                "paper_mispredicted": "" if prediction == "oracle" else paper[0 if memo == "off" else 1],
            })
    with open(args.csv, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {args.csv}")


if __name__ == "__main__":
    main()
