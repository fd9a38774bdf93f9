#!/usr/bin/python3
"""Table IV trend from memsim: accuracy and inference time of the pilot against its size, next to the paper's.

Reads results.csv and timing.csv (run.py) here and writes size_trend.png here.

    /usr/bin/python3 experiments/dynn-offload/pilot-size/plot.py
"""
import csv
import pathlib

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
PAPER_INFERENCE_US = {256: 5, 512: 12, 1024: 20, 2048: 42, 4096: 80}


def main():
    rows = list(csv.DictReader(open(HERE / "results.csv")))
    timing = {r["neurons"]: r for r in csv.DictReader(open(HERE / "timing.csv"))}
    neurons = [int(r["neurons"]) for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2))
    left.plot(neurons, [float(r["accuracy"]) for r in rows], "o-", color="black", label="memsim (treelstm)")
    left.plot(neurons, [float(r["paper_accuracy"]) for r in rows], "x:", color="tab:red", label="paper (Table IV)")
    left.set(xscale="log", xlabel="neurons of one MLP (4 w)", ylabel="exact-match accuracy", ylim=(0, 1))
    left.set_xticks(neurons, [str(n) for n in neurons])
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.legend(fontsize=8)
    right.plot(neurons, [float(timing[str(n)]["inference_us"]) for n in neurons], "o-", color="black",
               label="memsim, measured (busy 2-core machine)")
    right.plot(neurons, [PAPER_INFERENCE_US[n] for n in neurons], "x:", color="tab:red", label="paper")
    right.set(xscale="log", yscale="log", xlabel="neurons of one MLP (4 w)", ylabel="inference per prediction (us)")
    right.set_xticks(neurons, [str(n) for n in neurons])
    right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "size_trend.png", dpi=100)
    print(f"wrote {HERE / 'size_trend.png'}")


if __name__ == "__main__":
    main()
