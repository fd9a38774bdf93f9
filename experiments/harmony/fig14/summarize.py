"""The README's tables from fig14/results.csv: per minibatch and mode, each ablation's slowdown (iteration time ÷
"all on"), the paper's factor beside it (§5.5), and the manual-configuration grid. Usage: summarize.py [RESULTS_CSV]"""
import csv
import os
import sys

# (ablation, label, paper's slowdown DP, PP) -- §5.5's text; "–" where the paper gives no number for that mode.
ABLATIONS = [("no-grouping", "no input-batch grouping", "2.2×", "1.5×"),
             ("manual", "no configuration search (manual packs and u)", "1.3–1.4×", "1.3–1.4×"),
             ("no-prefetch", "no tensor prefetch", "up to 1.3×", "up to 1.3×"),
             ("no-jit", "no jit scheduling", "up to 1.2×", "up to 1.2×"),
             ("no-opt-offload", "no optimizer offload", "up to 1.2×", "up to 1.2×"),
             ("no-p2p", "no p2p swaps", "none", "up to 1.2×"),
             ("equi-fb", "Equi-FB (P_F = P_B[:-1], §4.3.1)", "1.3× (mode not said)", "1.3× (mode not said)")]
MODES = [("harmony-dp", "DP"), ("harmony-pp", "PP")]


def load(source):
    rows = list(csv.DictReader(open(source)))
    base = {(r["minibatch"], r["planner"]): float(r["iteration_time_s"]) for r in rows if r["ablation"] == "all-on"}
    return rows, base


def slowdowns(rows, base, ablation, d, planner):
    """(setting, slowdown or None when infeasible) of every run of the ablation at (d, planner)."""
    return [(r["setting"], float(r["iteration_time_s"]) / base[(d, planner)] if r["feasible"] == "true" else None)
            for r in rows if r["ablation"] == ablation and r["minibatch"] == d and r["planner"] == planner]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rows, base = load(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv"))
    ds = sorted({r["minibatch"] for r in rows}, key=int)
    columns = [(d, planner, mode) for planner, mode in MODES for d in ds]

    print("### Slowdown when one optimization is off (iteration time ÷ all on; manual: best – worst feasible of "
          "the grid)\n")
    print("| optimization off | paper DP | paper PP | " + " | ".join(f"{mode} D={d}" for d, _, mode in columns) +
          " |")
    print("|---|---|---|" + "---|" * len(columns))
    print("| (all on: seconds per iteration) | | | " +
          " | ".join(f"{base[(d, planner)]:.2f} s" for d, planner, _ in columns) + " |")
    for ablation, label, paper_dp, paper_pp in ABLATIONS:
        out = []
        for d, planner, _ in columns:
            values = [v for _, v in slowdowns(rows, base, ablation, d, planner) if v is not None]
            if not values:
                out.append("–")
            elif len(values) == 1:
                out.append(f"{values[0]:.2f}×")
            else:
                out.append(f"{min(values):.2f}–{max(values):.2f}×")
        print(f"| {label} | {paper_dp} | {paper_pp} | " + " | ".join(out) + " |")

    print("\n### No configuration search: manual_pack(R, k) at u (slowdown; – out of GPU memory)\n")
    settings = list(dict.fromkeys(r["setting"] for r in rows if r["ablation"] == "manual"))
    print("| u-k | " + " | ".join(f"{mode} D={d}" for d, _, mode in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for setting in settings:
        out = []
        for d, planner, _ in columns:
            value = dict(slowdowns(rows, base, "manual", d, planner)).get(setting, "n/a")
            out.append("n/a" if value == "n/a" else "–" if value is None else f"{value:.2f}")
        print(f"| {setting} | " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
