"""The README's tables from fig10/results.csv: throughput and speedups (normalized as the paper's Fig. 10: to DP Swap
at the model's smallest D), per-GPU and global swap volume (Fig. 11), and the paper's orderings checked per cell.
Usage: summarize.py [RESULTS_CSV]"""
import csv
import os
import sys

SYSTEMS = [("harmony-pp", "", "Harmony PP"), ("harmony-dp", "", "Harmony DP"), ("dp-swap", "false", "DP Swap"),
           ("dp-swap", "true", "DP Swap (R)"), ("gpipe-swap", "false", "GP Swap"), ("gpipe-swap", "true", "GP Swap (R)"),
           ("pipedream2bw-swap", "false", "2BW Swap"), ("pipedream2bw-swap", "true", "2BW Swap (R)")]
# (faster, slower): the paper's expected throughput orderings (spec §3.2), "a >= b" reads "a at least as fast as b".
ORDERINGS = [("Harmony PP", "Harmony DP"), ("Harmony DP", "DP Swap (R)"), ("Harmony DP", "GP Swap (R)"),
             ("Harmony DP", "2BW Swap (R)"), ("DP Swap (R)", "DP Swap"), ("GP Swap (R)", "GP Swap"),
             ("2BW Swap (R)", "2BW Swap"), ("GP Swap", "DP Swap"), ("2BW Swap", "GP Swap"),
             ("2BW Swap (R)", "GP Swap (R)")]


def per_gpu_volume(row):
    pairs = zip(row["h2d_bytes_per_gpu"].split(";"), row["d2h_bytes_per_gpu"].split(";"))
    return [int(h) + int(d) for h, d in pairs]


def feasible(row):
    return row is not None and row["feasible"] == "true"


def minibatches(cells, model):
    return sorted({d for m, d, _ in cells if m == model})


def print_table(title, cells, models, names, feasible_cell, last_column=None):
    """A table of one row per model and minibatch D and one column per system: feasible_cell(model, d, row) where
    the run is feasible, – elsewhere; last_column, a (header, cell(model, d)) pair, adds one more column."""
    columns = names + [last_column[0]] if last_column else names
    print(title)
    print("| model | D | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for model in models:
        for d in minibatches(cells, model):
            rows = [cells.get((model, d, name)) for name in names]
            out = [feasible_cell(model, d, row) if feasible(row) else "–" for row in rows]
            if last_column:
                out.append(last_column[1](model, d))
            print(f"| {model} | {d} | " + " | ".join(out) + " |")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "results.csv")
    rows = list(csv.DictReader(open(source)))
    cells = {}
    for row in rows:
        label = next(name for planner, recompute, name in SYSTEMS
                     if row["planner"] == planner and row["recompute"] == recompute)
        cells[(row["model"], int(row["minibatch"]), label)] = row
    models = list(dict.fromkeys(row["model"] for row in rows))
    names = [name for _, _, name in SYSTEMS]

    def throughput(model, d, row):
        base = cells.get((model, minibatches(cells, model)[0], "DP Swap"))
        base_rate = float(base["samples_per_s"]) if feasible(base) else None
        rate = float(row["samples_per_s"])
        ratio = f", {rate / base_rate:.1f}×" if base_rate else ""
        return f"{rate:.3f} (u={row['u_bwd']}{ratio})"

    def swap_volume(model, d, row):
        volume = per_gpu_volume(row)
        return f"{max(volume) / 1e9:.1f} / {sum(volume) / 1e9:.1f}"

    def global_swap_ratio(model, d):
        total = {name: sum(per_gpu_volume(cells[(model, d, name)])) for name in ("DP Swap", "Harmony PP")
                 if feasible(cells.get((model, d, name)))}
        return f"{total['DP Swap'] / total['Harmony PP']:.0f}×" if len(total) == 2 else "–"

    print_table("### Throughput (samples/s; in brackets: u, then × DP Swap at the smallest D; – infeasible)\n",
                cells, models, names, throughput)
    print_table("\n### Swap volume (h2d + d2h, GB): busiest GPU / all GPUs\n", cells, models, names, swap_volume,
                ("DP Swap ÷ Harmony PP (global)", global_swap_ratio))

    print("\n### Harmony: its estimator against memsim's simulation (seconds per iteration)\n")
    print("| model | D | mode | u (plan) | Top-1 estimate | estimate of the planned configuration | simulated | "
          "simulated ÷ estimate |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        for d in minibatches(cells, model):
            for name in ("Harmony PP", "Harmony DP"):
                row = cells.get((model, d, name))
                if not feasible(row):
                    continue
                simulated, estimate = float(row["iteration_time_s"]), float(row["estimate_s"])
                print(f"| {model} | {d} | {name[-2:]} | {row['u_bwd']} | {float(row['search_estimate_s']):.3f} | "
                      f"{estimate:.3f} | {simulated:.3f} | {simulated / estimate:.2f} |")

    print("\n### The baselines' estimates against the simulation (simulated ÷ estimate over the feasible cells)\n")
    print("| system | cells | min | median | max |")
    print("|---|---|---|---|---|")
    for _, _, name in SYSTEMS[2:]:
        ratios = sorted(float(row["iteration_time_s"]) / float(row["estimate_s"])
                        for (m, d, n), row in cells.items() if n == name and feasible(row) and row["estimate_s"])
        if ratios:
            print(f"| {name} | {len(ratios)} | {ratios[0]:.2f} | {ratios[len(ratios) // 2]:.2f} | {ratios[-1]:.2f} |")

    variants_csv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dp-variants.csv")
    if len(sys.argv) < 2 and os.path.exists(variants_csv):
        print("\n### Harmony DP's dW swap-out: rank 0 (the authors' code) or every rank (the paper's count)\n")
        print("| model | D | s/iter, rank 0 | s/iter, every rank | d2h GB, rank 0 | d2h GB, every rank |")
        print("|---|---|---|---|---|---|")
        rows = {}
        with open(variants_csv) as f:
            for row in csv.DictReader(f):
                rows[(row["model"], int(row["minibatch"]), row["gradient_out"])] = row
        for model, d in sorted({(m, d) for m, d, _ in rows}, key=lambda k: (models.index(k[0]), k[1])):
            code, paper = rows.get((model, d, "updater")), rows.get((model, d, "every_rank"))
            if not feasible(code) or not feasible(paper):
                continue
            print(f"| {model} | {d} | {float(code['iteration_time_s']):.3f} | {float(paper['iteration_time_s']):.3f} | "
                  f"{int(code['d2h_bytes']) / 1e9:.1f} | {int(paper['d2h_bytes']) / 1e9:.1f} |")

    print("\n### The paper's orderings (throughput), cell by cell\n")
    print("| ordering | holds | fails (model D: a vs b samples/s) | not comparable (infeasible) |")
    print("|---|---|---|---|")
    for faster, slower in ORDERINGS:
        holds, fails, missing = 0, [], 0
        for model in models:
            for d in minibatches(cells, model):
                a, b = cells.get((model, d, faster)), cells.get((model, d, slower))
                if not feasible(a) or not feasible(b):
                    missing += 1
                    continue
                ra, rb = float(a["samples_per_s"]), float(b["samples_per_s"])
                if ra >= rb:
                    holds += 1
                else:
                    fails.append(f"{model} {d}: {ra:.3f} vs {rb:.3f}")
        print(f"| {faster} ≥ {slower} | {holds} | {len(fails)}{': ' + '; '.join(fails) if fails else ''} | "
              f"{missing} |")


if __name__ == "__main__":
    main()
