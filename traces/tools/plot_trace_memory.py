#!/usr/bin/python3
"""Draw a trace's memory over one iteration under the default schedule (called by `memsim trace plot`).

Reads the CSV memsim writes (op, phase, layer, start_s, end_s, bytes_in_use) and draws bytes in use against time,
with the forward / loss / backward / update phases shaded, as PNG.
"""

import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PHASE_COLORS = {"forward": "#4c72b0", "loss": "#8172b2", "backward": "#dd8452", "update": "#55a868"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--out", required=True)
    parser.add_argument("--title", default="")
    parser.add_argument("--resident", type=int, default=0, help="bytes resident throughout (weights, inputs)")
    args = parser.parse_args()
    times, used, spans = [], [], []
    with open(args.csv, newline="") as data:
        for row in csv.DictReader(data):
            start, end, in_use = float(row["start_s"]), float(row["end_s"]), int(row["bytes_in_use"]) / 2**30
            times += [start, end]
            used += [in_use, in_use]
            if spans and spans[-1][0] == row["phase"]:
                spans[-1][2] = end
            else:
                spans.append([row["phase"], start, end])
    if not times:
        raise SystemExit("plot_trace_memory: the trace has no ops")
    # A trace without times (some imports) is drawn against op index instead.
    by_index = times[-1] <= 0
    if by_index:
        times = [i / 2 for i in range(len(times))]
        spans = []
        with open(args.csv, newline="") as data:
            for index, row in enumerate(csv.DictReader(data)):
                if spans and spans[-1][0] == row["phase"]:
                    spans[-1][2] = index + 1
                else:
                    spans.append([row["phase"], index, index + 1])
    figure, axes = plt.subplots(figsize=(9, 4.5))
    for phase, start, end in spans:
        axes.axvspan(start, end, color=PHASE_COLORS.get(phase, "#999999"), alpha=0.12, lw=0)
    axes.plot(times, used, color="black", lw=1.2, label="in use (default schedule)")
    if args.resident:
        axes.axhline(args.resident / 2**30, color="gray", ls="--", lw=1, label="resident (weights, inputs, state)")
    peak = max(used)
    axes.axhline(peak, color="#c44e52", ls=":", lw=1, label=f"peak {peak:.2f} GiB")
    handles, labels = axes.get_legend_handles_labels()
    for phase, color in PHASE_COLORS.items():
        if any(span[0] == phase for span in spans):
            handles.append(plt.Rectangle((0, 0), 1, 1, color=color, alpha=0.3))
            labels.append(phase)
    axes.legend(handles, labels, loc="upper right", fontsize=8)
    axes.set_xlabel("op index" if by_index else "time in the iteration (s)")
    axes.set_ylabel("device memory in use (GiB)")
    axes.set_ylim(bottom=0)
    axes.set_title(args.title, fontsize=9)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
