"""The README's tables from fig12/results.csv: throughput of Harmony DP / PP, ZeRO-Infinity and ZeRO-Offload per
minibatch (normalized as the paper's Fig. 12a: to ZeRO-Infinity at the smallest D, here the row with Harmony PP's
configuration), Harmony's speedups over ZeRO-Infinity, and host<->GPU swap volume per minibatch (Fig. 12b/c).
Usage: summarize.py [RESULTS_CSV]"""
import csv
import math
import os
import sys

SYSTEMS = [("harmony-dp", "harmony-dp", "Harmony DP"), ("harmony-pp", "harmony-pp", "Harmony PP"),
           ("zero-infinity", "harmony-dp", "ZeRO-Inf (DP cfg)"), ("zero-infinity", "harmony-pp", "ZeRO-Inf (PP cfg)"),
           ("zero-offload", "harmony-dp", "ZeRO-Off (DP cfg)"), ("zero-offload", "harmony-pp", "ZeRO-Off (PP cfg)"),
           ("zero-offload", "per-layer", "ZeRO-Off (per-layer)")]
BASE = "ZeRO-Inf (PP cfg)"


def load(source):
    cells = {}
    for row in csv.DictReader(open(source)):
        label = next(name for system, config, name in SYSTEMS
                     if row["system"] == system and row["config_from"] == config)
        # ZeRO-Offload per-layer runs once per Harmony configuration's u: keep the faster.
        key = (int(row["minibatch"]), label)
        old = cells.get(key)
        if old is None or (seconds(row) is not None and (seconds(old) is None or seconds(row) < seconds(old))):
            cells[key] = row
    return cells


def seconds(row):
    """The row's iteration time, or None where the cell did not run, is infeasible or has no usable time (an empty
    or non-numeric iteration_time_s): such a cell prints as infeasible."""
    if not row or row["feasible"] != "true":
        return None
    try:
        value = float(row["iteration_time_s"])
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def speedup(numerator, denominator):
    """numerator / denominator as "1.23×", or – where either side is infeasible."""
    return f"{numerator / denominator:.2f}×" if numerator is not None and denominator is not None else "–"


def print_table(title, cells, ds, names, feasible_cell, infeasible_cell):
    """A table of one row per minibatch D and one column per system: feasible_cell(d, row) where the run is feasible,
    infeasible_cell(row) (row None where the cell was not run) elsewhere."""
    print(title)
    print("| D | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for d in ds:
        out = []
        for name in names:
            row = cells.get((d, name))
            out.append(infeasible_cell(row) if seconds(row) is None else feasible_cell(d, row))
        print(f"| {d} | " + " | ".join(out) + " |")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    cells = load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv"))
    ds = sorted({d for d, _ in cells})
    names = [name for _, _, name in SYSTEMS]
    base = seconds(cells.get((ds[0], BASE)))

    def throughput(d, row):
        ratio = f", {(base / ds[0]) / (seconds(row) / d):.2f}×" if base else ""
        return f"{float(row['samples_per_s']):.3f} ({row['u_bwd']}/{row['packs_bwd']}{ratio})"

    print_table(f"### Throughput (samples/s; in brackets: u/|P_B|, × {BASE} at D = {ds[0]}; – infeasible)\n",
                cells, ds, names, throughput, lambda row: f"– ({row['reason'] or 'infeasible'})" if row else "–")

    print("\n### Harmony's speedup over ZeRO-Infinity (iteration time ratio)\n")
    print("| D | DP over ZeRO-Inf (DP cfg) | PP over ZeRO-Inf (PP cfg) | DP over the faster ZeRO-Inf | "
          "PP over the faster ZeRO-Inf | PP over ZeRO-Off (fastest) |")
    print("|---|---|---|---|---|---|")
    for d in ds:
        t = {name: seconds(cells.get((d, name))) for name in names}
        zero = min((x for x in (t["ZeRO-Inf (DP cfg)"], t["ZeRO-Inf (PP cfg)"]) if x), default=None)
        offload = min((x for name, x in t.items() if name.startswith("ZeRO-Off") and x), default=None)
        print(f"| {d} | {speedup(t['ZeRO-Inf (DP cfg)'], t['Harmony DP'])} | "
              f"{speedup(t['ZeRO-Inf (PP cfg)'], t['Harmony PP'])} | {speedup(zero, t['Harmony DP'])} | "
              f"{speedup(zero, t['Harmony PP'])} | {speedup(offload, t['Harmony PP'])} |")

    def swap_volume(d, row):
        swap = (int(row["h2d_bytes"]) + int(row["d2h_bytes"])) / 1e9
        return f"{swap:.1f} ({int(row['p2p_bytes']) / 1e9:.0f})"

    print_table("\n### Swap volume per minibatch (GB): host<->GPU h2d + d2h, all GPUs (GPU<->GPU p2p in brackets)\n",
                cells, ds, names, swap_volume, lambda row: "–")


if __name__ == "__main__":
    main()
