"""Markdown tables of results.csv (run.sh) for README.md: samples/s per model, system and N, then the paper's
claims (PP scaling, the DP-PP gap, the speedup over ZeRO-Infinity, the host-memory limit). Usage: summarize.py [CSV]"""
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {"harmony-pp": "Harmony PP", "harmony-dp": "Harmony DP", "zero-infinity": "ZeRO-Infinity"}


def billions(model):
    return int(model.split("_")[1].rstrip("b"))


def main():
    rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.csv"))))
    cell = {(r["figure"], r["model"], r["planner"], int(r["gpus"])): r for r in rows}

    def rate(figure, model, planner, n):
        r = cell.get((figure, model, planner, n))
        return float(r["samples_per_s"]) if r and r["feasible"] == "true" else None

    fig17 = [r for r in rows if r["figure"] == "fig17"]
    if fig17:
        n = max(int(r["gpus"]) for r in fig17)
        base = rate("fig17", "gpt2_10b", "zero-infinity", n)
        models = sorted({r["model"] for r in fig17}, key=billions)
        print(f"\n### Fig. 17 (N={n}): throughput normalized to ZeRO-Infinity's 10B, and over the model's 10B\n")
        print("| system | " + " | ".join(models) + " | 40B ÷ 10B |")
        print("|---|" + "---:|" * (len(models) + 1))
        for planner in NAMES:
            values = [rate("fig17", m, planner, n) for m in models]
            cells = [f"{v / base:.2f}" if v and base else "OOM" for v in values]
            small, large = rate("fig17", "gpt2_10b", planner, n), rate("fig17", "gpt2_40b", planner, n)
            print(f"| {NAMES[planner]} | " + " | ".join(cells) + " | "
                  + (f"{large / small:.3f}" if small and large else "–") + " |")
    for figure in ("fig17", "fig16"):
        cells = [r for r in rows if r["figure"] == figure]
        if not cells:
            continue
        models = sorted({r["model"] for r in cells}, key=billions)
        gpus = sorted({int(r["gpus"]) for r in cells})
        planners = [p for p in NAMES if any(r["planner"] == p for r in cells)]
        limit = int(cells[0]["host_memory_bytes"])
        print(f"\n### {figure} ({cells[0]['machine']}, D={cells[0]['minibatch']}, packs of {cells[0]['pack_size']}):"
              " samples/s\n")
        print("| model | W+dW+K GB (host "f"{limit / 1e9:.0f} GB) | system | " + " | ".join(f"N={n}" for n in gpus)
              + f" | N=1→{gpus[-1]} | peak host GB (N={gpus[-1]}) |")
        print("|---|---:|---|" + "---:|" * (len(gpus) + 2))
        for model in models:
            for planner in planners:
                values = []
                for n in gpus:
                    r = cell.get((figure, model, planner, n))
                    if r is None:
                        values.append("–")
                    elif r["feasible"] == "true":
                        values.append(f"{float(r['samples_per_s']):.4f}")
                    else:
                        values.append("host OOM" if r["reason"] == "host_out_of_memory" else r["reason"][:40])
                first, last = rate(figure, model, planner, gpus[0]), rate(figure, model, planner, gpus[-1])
                scaling = f"{last / first:.2f}×" if first and last else "–"
                r = cell.get((figure, model, planner, gpus[-1]))
                peak = f"{int(r['peak_host_bytes']) / 1e9:.0f}" if r and r["feasible"] == "true" else "–"
                state = int(cell[(figure, model, planners[0], gpus[0])]["model_state_bytes"]) / 1e9
                print(f"| {model} | {state:.0f} | {NAMES[planner]} | " + " | ".join(values)
                      + f" | {scaling} | {peak} |")
        against = " and over ZeRO-Infinity" if "zero-infinity" in planners else ""
        print(f"\n{figure}: throughput ratios per N: Harmony PP over DP (the DP-PP gap){against}\n")
        print("| model | ratio | " + " | ".join(f"N={n}" for n in gpus) + " |")
        print("|---|---|" + "---:|" * len(gpus))
        for model in models:
            for a, b in (("harmony-pp", "harmony-dp"), ("harmony-pp", "zero-infinity"),
                         ("harmony-dp", "zero-infinity")):
                if b not in planners:
                    continue
                ratios = []
                for n in gpus:
                    x, y = rate(figure, model, a, n), rate(figure, model, b, n)
                    ratios.append(f"{x / y:.2f}×" if x and y else "–")
                print(f"| {model} | {NAMES[a]} ÷ {NAMES[b]} | " + " | ".join(ratios) + " |")
            estimates = []
            for n in gpus:
                pp, dp = cell.get((figure, model, "harmony-pp", n)), cell.get((figure, model, "harmony-dp", n))
                estimates.append(f"{float(dp['estimate_s']) / float(pp['estimate_s']):.2f}×"
                                 if pp and dp and pp["estimate_s"] and dp["estimate_s"] else "–")
            print(f"| {model} | Harmony PP ÷ Harmony DP, Harmony's estimator | " + " | ".join(estimates) + " |")


if __name__ == "__main__":
    main()
