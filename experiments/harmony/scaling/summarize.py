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
        print(f"\n{figure}: PP over DP (the DP-PP gap) and over ZeRO-Infinity, per N\n")
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


if __name__ == "__main__":
    main()
