#!/usr/bin/python3
"""memsim's `dtr` policy against DTR's own simulator (simrd) on the DTR logs.

usage: compare.py LOGS_DIR SIMRD_DIR [--memsim BIN] [--out results.csv] [--logs a,b] [--heuristics dtr,...]
                  [--simrd-csv FILE]

For each log: simrd (run_simrd.py: RuntimeV2EagerOptimized, baseline peak from an unlimited run, remat limit
(2 - 1) x baseline compute) at budgets int(ratio x simrd's baseline peak); memsim: `memsim import dtr`, a keep-all
plan whose budget is set to the same bytes, `memsim simulate --policy dtr` on the fast engine with the same
overhead limit, on a machine whose GPU is the one the logs were recorded on (each op takes its recorded TIME).
overhead = (compute + recompute) / compute (for a failed run: up to where it stopped, as simrd reports it). A run is infeasible when it runs out of memory (oom) or its
recomputation passes the limit (thrashed).
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RATIOS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
SIMRD_NAME = {'dtr': 'DTR', 'dtr-eq': 'DTREqClass', 'dtr-local': 'DTRLocal', 'msps': 'MSPS', 'lru': 'LRU',
              'size': 'LargestStorage'}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def simrd_rows(simrd_dir, log, heuristic, cached):
    lines = [l for l in cached if l.startswith(os.path.basename(log) + ',' + SIMRD_NAME[heuristic] + ',')]
    if len(lines) < len(RATIOS):
        lines = run([sys.executable, os.path.join(HERE, 'run_simrd.py'), simrd_dir, log, '--heuristic',
                     SIMRD_NAME[heuristic], '--ratios', ','.join(map(str, RATIOS))]).strip().splitlines()
    rows = {}
    for line in lines:
        _, _, ratio, budget, status, overhead, compute, peak, _ = line.split(',')
        rows[float(ratio)] = dict(budget=int(budget), status=status, overhead=float(overhead),
                                  compute_ns=int(compute), peak=int(peak))
    return rows


def memsim_row(memsim, trace, plan, budget, heuristic, workdir, compute_s):
    with open(plan) as f:
        data = json.load(f)
    data['budget_bytes'] = budget
    budget_plan = os.path.join(workdir, 'budget.plan.json')
    with open(budget_plan, 'w') as f:
        json.dump(data, f)
    proc = subprocess.run([memsim, 'simulate', '--trace', trace, '--machine',
                           os.path.join(HERE, 'titan-v-dtr-logs.yaml'), '--plan', budget_plan, '--engine', 'fast',
                           '--policy', 'dtr', '--policy-param', f'heuristic={heuristic}',
                           '--policy-param', 'overhead_limit=2', '--json'], capture_output=True, text=True)
    text = proc.stdout
    metrics = json.loads(text[text.index('{'):text.rindex('}') + 1])
    overhead = metrics['compute_busy_s'] / compute_s  # as simrd: the clock (where it stopped) / the compute
    if metrics['feasible']:
        return 'ok', overhead, metrics['peak_device_bytes']
    kind = metrics.get('error', {}).get('kind', '')
    # the policy refuses to rematerialize past the overhead limit: the step then fails on a missing tensor
    return ('oom' if kind == 'out_of_memory' else 'thrashed' if 'resident' in kind else 'error:' + kind), overhead, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('logs_dir', help='folder of the DTR logs (simrd/logs.zip unpacked: logs/*.log)')
    ap.add_argument('simrd_dir', help='the simrd folder of a uwsampl/dtr-prototype checkout')
    ap.add_argument('--memsim', default=os.path.join(HERE, '../../../build/release/experiments/memsim'))
    ap.add_argument('--out', default=os.path.join(HERE, 'results.csv'))
    ap.add_argument('--logs', default='', help='comma-separated name prefixes (default: all)')
    ap.add_argument('--heuristics', default='dtr')
    ap.add_argument('--simrd-csv', help="run_simrd.py's output, to reuse instead of running simrd again")
    args = ap.parse_args()
    cached = open(args.simrd_csv).read().splitlines() if args.simrd_csv else []
    logs = sorted(glob.glob(os.path.join(args.logs_dir, '**', '*.log'), recursive=True))
    if args.logs:
        logs = [l for l in logs if any(os.path.basename(l).startswith(p) for p in args.logs.split(','))]
    fields = ['model', 'heuristic', 'ratio', 'budget_bytes', 'simrd_status', 'simrd_overhead', 'memsim_status',
              'memsim_overhead', 'relative_difference', 'simrd_baseline_peak', 'memsim_keep_all_peak']
    with open(args.out, 'w', newline='') as out, tempfile.TemporaryDirectory() as workdir:
        writer = csv.DictWriter(out, fields, lineterminator='\n')
        writer.writeheader()
        for log in logs:
            model = os.path.basename(log).split('-')[0] + '-' + os.path.basename(log).split('-')[1]
            trace = os.path.join(workdir, 'trace.json')
            plan = os.path.join(workdir, 'plan.json')
            run([args.memsim, 'import', 'dtr', log, '-o', trace])
            run([args.memsim, 'plan', '--trace', trace, '--machine', os.path.join(HERE, 'titan-v-dtr-logs.yaml'),
                 '--planner', 'keep-all', '--out', plan])
            with open(plan) as f:
                keep_all_peak = json.load(f)['estimate']['peak_bytes']
            with open(trace) as f:
                compute_s = sum(op['time_s'] for op in json.load(f)['ops'])
            for heuristic in args.heuristics.split(','):
                simrd = simrd_rows(args.simrd_dir, log, heuristic, cached)
                for ratio in RATIOS:
                    s = simrd[ratio]
                    status, overhead, _ = memsim_row(args.memsim, trace, plan, s['budget'], heuristic, workdir, compute_s)
                    both_ok = status == 'ok' and s['status'] == 'ok'
                    row = dict(model=model, heuristic=heuristic, ratio=ratio, budget_bytes=s['budget'],
                               simrd_status=s['status'], simrd_overhead=f"{s['overhead']:.6f}",
                               memsim_status=status, memsim_overhead=f'{overhead:.6f}',
                               relative_difference=f"{overhead / s['overhead'] - 1:+.4%}" if both_ok else '',
                               simrd_baseline_peak=s['peak'], memsim_keep_all_peak=keep_all_peak)
                    writer.writerow(row)
                    out.flush()
                    print(','.join(str(row[f]) for f in fields), flush=True)


if __name__ == '__main__':
    main()
