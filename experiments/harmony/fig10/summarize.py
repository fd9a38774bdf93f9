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

    print("### Throughput (samples/s; in brackets: u, then × DP Swap at the smallest D; – infeasible)\n")
    print("| model | D | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for model in models:
        ds = sorted({d for m, d, _ in cells if m == model})
        base = cells.get((model, ds[0], "DP Swap"))
        base_rate = float(base["samples_per_s"]) if base and base["feasible"] == "true" else None
        for d in ds:
            out = []
            for name in names:
                row = cells.get((model, d, name))
                if row is None or row["feasible"] != "true":
                    out.append("–")
                    continue
                rate = float(row["samples_per_s"])
                ratio = f", {rate / base_rate:.1f}×" if base_rate else ""
                out.append(f"{rate:.3f} (u={row['u_bwd']}{ratio})")
            print(f"| {model} | {d} | " + " | ".join(out) + " |")

    print("\n### Swap volume (h2d + d2h, GB): busiest GPU / all GPUs\n")
    print("| model | D | " + " | ".join(names) + " | DP Swap ÷ Harmony PP (global) |")
    print("|---|---|" + "---|" * (len(names) + 1))
    for model in models:
        for d in sorted({d for m, d, _ in cells if m == model}):
            out, total = [], {}
            for name in names:
                row = cells.get((model, d, name))
                if row is None or row["feasible"] != "true":
                    out.append("–")
                    continue
                volume = per_gpu_volume(row)
                total[name] = sum(volume)
                out.append(f"{max(volume) / 1e9:.1f} / {sum(volume) / 1e9:.1f}")
            ratio = (f"{total['DP Swap'] / total['Harmony PP']:.0f}×" if "DP Swap" in total and "Harmony PP" in total
                     else "–")
            print(f"| {model} | {d} | " + " | ".join(out) + f" | {ratio} |")

    print("\n### Harmony: its estimator against memsim's simulation (seconds per iteration)\n")
    print("| model | D | mode | u (plan) | Top-1 estimate | estimate of the planned configuration | simulated | "
          "simulated ÷ estimate |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        for d in sorted({d for m, d, _ in cells if m == model}):
            for name in ("Harmony PP", "Harmony DP"):
                row = cells.get((model, d, name))
                if row is None or row["feasible"] != "true":
                    continue
                simulated, estimate = float(row["iteration_time_s"]), float(row["estimate_s"])
                print(f"| {model} | {d} | {name[-2:]} | {row['u_bwd']} | {float(row['search_estimate_s']):.3f} | "
                      f"{estimate:.3f} | {simulated:.3f} | {simulated / estimate:.2f} |")

    print("\n### The paper's orderings (throughput), cell by cell\n")
    print("| ordering | holds | fails (model D: a vs b samples/s) | not comparable (infeasible) |")
    print("|---|---|---|---|")
    for faster, slower in ORDERINGS:
        holds, fails, missing = 0, [], 0
        for model in models:
            for d in sorted({d for m, d, _ in cells if m == model}):
                a, b = cells.get((model, d, faster)), cells.get((model, d, slower))
                if not a or not b or a["feasible"] != "true" or b["feasible"] != "true":
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
