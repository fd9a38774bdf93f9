#!/usr/bin/python3
"""Plots of `memsim validate` (simulated vs measured on a GPU). Run with /usr/bin/python3 (matplotlib).

  plot_validation.py cell  --dir D --measured M   D holds summary.json, steps.csv, simulated.timeline.json;
                                                  writes D/timelines.png and D/step_scatter.png
  plot_validation.py sweep --dir D                D holds validation.csv and cells/<cell>.<kernels>/;
                                                  writes iteration_scatter.png, step_scatter.png,
                                                  error_by_planner.png and timelines_<cell>.<kernels>.png
"""
import argparse
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KIND_COLORS = {"compute": "#4477aa", "recompute": "#ee6677", "offload": "#228833", "prefetch": "#ccbb44",
               "free": "#bbbbbb", "send": "#66ccee", "recv": "#aa3377"}


def read_steps(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_timeline(path):
    with open(path) as f:
        return json.load(f)["steps"]


def draw_timeline(ax, steps, title, end):
    streams = []
    for s in steps:
        if s["stream"] not in streams:
            streams.append(s["stream"])
    for s in steps:
        if s["kind"] == "free":
            continue
        y = streams.index(s["stream"])
        width = max(s["end_s"] - s["start_s"], end * 1e-4)
        ax.broken_barh([(1e3 * s["start_s"], 1e3 * width)], (y - 0.4, 0.8), facecolors=KIND_COLORS.get(s["kind"], "k"))
    ax.set_yticks(range(len(streams)))
    ax.set_yticklabels(streams)
    ax.set_xlim(0, 1e3 * end * 1.02)
    ax.set_title(title, fontsize=9)


def timelines_figure(simulated, measured, title, out):
    end = max([s["end_s"] for s in simulated + measured] + [1e-9])
    fig, axes = plt.subplots(2, 1, figsize=(11, 4.2), sharex=True)
    sim_end = max([s["end_s"] for s in simulated] + [0])
    meas_end = max([s["end_s"] for s in measured] + [0])
    draw_timeline(axes[0], simulated, f"simulated ({1e3 * sim_end:.2f} ms)", end)
    draw_timeline(axes[1], measured, f"measured on the GPU ({1e3 * meas_end:.2f} ms)", end)
    axes[1].set_xlabel("time in the iteration (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for k, c in KIND_COLORS.items() if k not in ("free", "send", "recv")]
    axes[0].legend(handles, [k for k in KIND_COLORS if k not in ("free", "send", "recv")], fontsize=7, ncol=4,
                   loc="upper right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def step_scatter(rows_by_kind, title, out):
    fig, ax = plt.subplots(figsize=(5.5, 5))
    low, high = math.inf, 0
    for kind, rows in sorted(rows_by_kind.items()):
        xs = [float(r["measured_duration_s"]) * 1e3 for r in rows]
        ys = [float(r["simulated_duration_s"]) * 1e3 for r in rows]
        pairs = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0]
        if not pairs:
            continue
        # Sweep keys are "<kind> (<kernels>)": colour by the step kind, marker by the kernels.
        base = kind.split(" ")[0]
        ax.scatter([p[0] for p in pairs], [p[1] for p in pairs], s=6 if "(gemm)" not in kind else 10, alpha=0.5,
                   label=f"{kind} ({len(pairs)})", color=KIND_COLORS.get(base, "k"),
                   marker="x" if "(gemm)" in kind else "o", linewidths=0.8)
        low = min(low, min(min(p) for p in pairs))
        high = max(high, max(max(p) for p in pairs))
    if high > 0:
        ax.plot([low, high], [low, high], "k--", lw=0.8, label="simulated = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("measured step duration (ms)")
    ax.set_ylabel("simulated step duration (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def cell_mode(args):
    steps = read_steps(os.path.join(args.dir, "steps.csv"))
    by_kind = {}
    for r in steps:
        if r["kind"] != "free":
            by_kind.setdefault(r["kind"], []).append(r)
    with open(os.path.join(args.dir, "summary.json")) as f:
        summary = json.load(f)
    step_scatter(by_kind, f"per-step durations (iteration error {100 * summary['iteration_error']:+.2f}%)",
                 os.path.join(args.dir, "step_scatter.png"))
    timelines_figure(read_timeline(os.path.join(args.dir, "simulated.timeline.json")), read_timeline(args.measured),
                     "simulated vs measured", os.path.join(args.dir, "timelines.png"))


def sweep_mode(args):
    with open(os.path.join(args.dir, "validation.csv"), newline="") as f:
        rows = [r for r in csv.DictReader(f)]
    both = [r for r in rows if r["simulated_feasible"] == "true" and r["measured_feasible"] == "true"]

    # Simulated vs measured iteration time, one point per (cell, kernels).
    fig, ax = plt.subplots(figsize=(6, 5.5))
    planners = sorted({r["planner"] for r in both})
    markers = {"spin": "o", "gemm": "^"}
    cmap = plt.get_cmap("tab10")
    values = []
    for i, planner in enumerate(planners):
        for kernels, marker in markers.items():
            pts = [(float(r["measured_iteration_s"]) * 1e3, float(r["simulated_iteration_s"]) * 1e3) for r in both
                   if r["planner"] == planner and r["kernels"] == kernels]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=cmap(i % 10), s=30,
                           label=f"{planner} ({kernels})")
                values += [v for p in pts for v in p]
    if values:
        lo, hi = min(values) * 0.9, max(values) * 1.1
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("simulated iteration time (ms)")
    ax.set_title("iteration time: simulated vs measured", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(args.dir, "iteration_scatter.png"), dpi=110)
    plt.close(fig)

    # Iteration-time error by planner and budget, one panel per (workload, kernels).
    groups = sorted({(r["workload"], r["kernels"]) for r in both})
    if groups:
        fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.8), squeeze=False)
        for ax, (workload, kernels) in zip(axes[0], groups):
            sub = [r for r in both if r["workload"] == workload and r["kernels"] == kernels]
            budgets = sorted({r["budget_fraction"] or r["budget_bytes"] for r in sub}, key=float, reverse=True)
            names = sorted({r["planner"] for r in sub})
            width = 0.8 / max(1, len(budgets))
            for j, budget in enumerate(budgets):
                ys = []
                for name in names:
                    hit = [r for r in sub if r["planner"] == name and (r["budget_fraction"] or r["budget_bytes"]) == budget]
                    ys.append(100 * float(hit[0]["iteration_error"]) if hit else float("nan"))
                ax.bar([k + (j - (len(budgets) - 1) / 2) * width for k in range(len(names))], ys, width,
                       label=f"{budget}x peak" if sub[0]["budget_fraction"] else f"{budget} B")
            ax.axhline(0, color="k", lw=0.6)
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel("iteration error (%)  (sim - meas) / meas")
            ax.set_title(f"{workload}, {kernels} kernels", fontsize=9)
            ax.legend(fontsize=7, title="budget", title_fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.dir, "error_by_planner.png"), dpi=110)
        plt.close(fig)

    # Every compared step of every cell, by kind and kernels.
    by_kind = {}
    for r in both:
        steps_file = os.path.join(args.dir, "cells", f"{r['cell']}.{r['kernels']}", "steps.csv")
        if os.path.exists(steps_file):
            for s in read_steps(steps_file):
                if s["kind"] != "free":
                    by_kind.setdefault(f"{s['kind']} ({r['kernels']})", []).append(s)
    step_scatter({k: v for k, v in by_kind.items()}, "per-step durations, every cell",
                 os.path.join(args.dir, "step_scatter.png"))

    # The two timelines, for the cell with the largest |iteration error| per kernels, and for the transfer-heavy
    # cell (most transfer steps) with spin kernels.
    chosen = []
    for kernels in markers:
        sub = [r for r in both if r["kernels"] == kernels]
        if sub:
            chosen.append(max(sub, key=lambda r: abs(float(r["iteration_error"]))))
    spin = [r for r in both if r["kernels"] == "spin" and int(r["transfer_steps"]) > 0]
    if spin:
        chosen.append(max(spin, key=lambda r: (int(r["transfer_steps"]), r["cell"])))
    done = set()
    for r in chosen:
        key = f"{r['cell']}.{r['kernels']}"
        if key in done:
            continue
        done.add(key)
        cell_dir = os.path.join(args.dir, "cells", key)
        measured = os.path.join(args.measurements, f"{key}.measured.json") if args.measurements else None
        if not measured or not os.path.exists(measured):
            continue
        timelines_figure(read_timeline(os.path.join(cell_dir, "simulated.timeline.json")), read_timeline(measured),
                         f"{key}: iteration error {100 * float(r['iteration_error']):+.2f}%",
                         os.path.join(args.dir, f"timelines_{key}.png"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["cell", "sweep"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--measured", help="cell mode: the measured timeline")
    parser.add_argument("--measurements", help="sweep mode: the measurements folder (for the timeline figures)")
    args = parser.parse_args()
    if args.mode == "cell":
        if not args.measured:
            parser.error("cell mode needs --measured")
        cell_mode(args)
    else:
        sweep_mode(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
