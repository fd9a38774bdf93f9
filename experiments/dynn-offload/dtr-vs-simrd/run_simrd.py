#!/usr/bin/python3
"""Runs DTR's own simulator (simrd, uwsampl/dtr-prototype) on DTR logs: the paper's pareto setting
(RuntimeV2EagerOptimized, baseline peak from RuntimeV1 with an unlimited budget, remat limit =
baseline compute x (overhead_limit - 1)), sequentially (simrd's own driver needs pathos).

usage: run_simrd.py SIMRD_DIR LOG [--heuristic DTR] [--ratios 0.3,...] [--no-output-pins]
Prints CSV rows: log,heuristic,ratio,budget,status,overhead,baseline_compute,baseline_peak
"""
import argparse
import math
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('simrd_dir', help='the simrd folder of a dtr-prototype checkout')
    ap.add_argument('log')
    ap.add_argument('--heuristic', default='DTR', help='simrd heuristic class: DTR, DTREqClass, DTRLocal, MSPS, LRU, LargestStorage')
    ap.add_argument('--ratios', default='0.3,0.4,0.5,0.6,0.7,0.8,0.9')
    ap.add_argument('--overhead-limit', type=float, default=2.0)
    ap.add_argument('--no-output-pins', action='store_true',
                    help='drop the final pins of the outputs (what a trace without them runs)')
    ap.add_argument('--header', action='store_true')
    args = ap.parse_args()
    sys.path.insert(0, args.simrd_dir)
    sys.setrecursionlimit(100000)
    from simrd.runtime import RuntimeV1, RuntimeV2EagerOptimized, RematExceededError
    from simrd.heuristic import Heuristic
    import simrd.heuristic as heuristics
    from simrd.parse import parse_file
    from simrd.parse.graph import GGet

    with open(args.log) as f:
        graph = parse_file(f, start=True)
    if args.no_output_pins:
        # the outputs' pins are the GGet(pin=True) commands after the last compute
        last = max(i for i, c in enumerate(graph.schedule) if type(c).__name__ == 'GCompute')
        graph.schedule = graph.schedule[:last + 1] + [c for c in graph.schedule[last + 1:]
                                                      if not (isinstance(c, GGet) and c.pin)]
    run = graph.get_closure()
    rt = RuntimeV1(math.inf, Heuristic(), stats=False, trace=False)
    run(rt)
    base_peak = rt.telemetry.summary['max_memory']
    base_compute = rt.telemetry.summary['model_compute']
    heuristic = getattr(heuristics, args.heuristic)()
    name = args.log.rsplit('/', 1)[-1]
    if args.header:
        print('log,heuristic,ratio,budget,status,overhead,baseline_compute,baseline_peak,seconds')
    for ratio in [float(r) for r in args.ratios.split(',')]:
        budget = int(base_peak * ratio)
        rt = RuntimeV2EagerOptimized(budget, heuristic, stats=False, trace=False,
                                     remat_limit=base_compute * (args.overhead_limit - 1))
        status = 'ok'
        t = time.time()
        try:
            run(rt)
        except MemoryError:
            status = 'oom'
        except RematExceededError:
            status = 'thrashed'
        overhead = rt.clock / base_compute
        print(f'{name},{args.heuristic},{ratio},{budget},{status},{overhead:.6f},{base_compute},{base_peak},'
              f'{time.time() - t:.1f}', flush=True)


if __name__ == '__main__':
    main()
