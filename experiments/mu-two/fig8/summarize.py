#!/usr/bin/python3
"""Tables of μ-TWO's Figures 7, 8 and 9 from memsim's results (experiments/mu-two/fig8/README.md).

Usage: summarize.py RESULTS_CSV LINKS_CSV FUSION_CSV [SEQUENTIAL_CSV]
  (fig8 results, the link sweep, fusion-measured/comparison.csv, the pair_mode=sequential run)
"""
import csv
import sys

PLANNERS = ("hfta", "hfta-capuchin", "mu-two")


def load(path):
    cells = {}
    for row in csv.DictReader(open(path)):
        if row["planner"] in PLANNERS:
            key = (row["base_workload"], int(row["models"]), row["planner"], float(row["bandwidth_bytes_per_s"]))
            cells[key] = row
    return cells


def seconds(row):
    return float(row["steady_iteration_time_s"] or row["iteration_time_s"]) if row["feasible"] == "true" else None


def a100_ideal(*tables):
    """(workload, k) -> t_k, the k-fused trace's compute time on the A100: a cell's ideal_time_s is its N-fused
    trace's compute time through the cost model (whatever the planner, link or feasibility)."""
    return {(workload, n): float(row["ideal_time_s"]) for cells in tables
            for (workload, n, _, _), row in cells.items()}


def a100_fusion_gains(ideal):
    """(workload, k) -> t_k / (k * t_1) on the A100, for every k swept."""
    return {(w, n): t / (n * ideal[(w, 1)]) for (w, n), t in ideal.items() if (w, 1) in ideal}


def gain_at(gains, workload, partition):
    """A partition's A100 fusion gain: its sub-arrays' t_k/(k·t_1), weighted by their k (= Σ t_k / (N·t_1), the
    partition's compute against N single models); "–" without a plan or where a k was not swept. A plan's speedup over
    hfta is at most hfta's gain / its gain, reached when it neither recomputes nor stalls."""
    if not partition:
        return "–"
    ks = [int(k) for k in partition.split("+")]
    if any((workload, k) not in gains for k in ks):
        return "–"
    return f"{sum(k * gains[(workload, k)] for k in ks) / sum(ks):.3f}"


def fusion_gains(path):
    gains = {}
    for row in csv.DictReader(open(path)):
        gains[(row["workload"], int(row["models"]))] = float(row["efficiency_gain"])
    return gains


def fmt(value, digits=4):
    return "infeasible" if value is None else f"{value:.{digits}f}"


def ratio(baseline, value):
    return "" if baseline is None or value is None else f"{baseline / value:.3f}"


def workloads(cells):
    return sorted({key[0] for key in cells}, key=lambda w: (w.split("-")[0], int(w.split("-b")[-1])))


def fig8(cells, gains, link):
    print("| workload | N | hfta | hfta (s) | hfta-capuchin (s) | mu-two | mu-two (s) | speedup over hfta: "
          "capuchin / mu-two | fusion gain t_k/(k·t_1) at mu-two's largest k |")
    print("| --- | ---: | --- | ---: | ---: | --- | ---: | --- | ---: |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            row = {p: cells.get((workload, n, p, link)) for p in PLANNERS}
            if any(r is None for r in row.values()):
                continue
            hfta, capuchin, mu_two = (seconds(row[p]) for p in PLANNERS)
            largest = max(int(k) for k in row["mu-two"]["partition"].split("+")) if mu_two else None
            gain = gains.get((workload, largest))
            print(f"| {workload} | {n} | {row['hfta']['partition']} | {fmt(hfta)} | {fmt(capuchin)} | "
                  f"{row['mu-two']['partition']} | {fmt(mu_two)} | {ratio(hfta, capuchin) or '–'} / "
                  f"{ratio(hfta, mu_two) or '–'} | {'' if gain is None else f'{gain:.3f}'} |")


def fig7(cells, link):
    print("| workload | N | hfta GPU h | hfta-capuchin GPU h | mu-two GPU h | mu-two saves (h) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            hours = [cells.get((workload, n, p, link)) for p in PLANNERS]
            if any(r is None for r in hours) or n == 1:
                continue
            values = [float(r["gpu_hours_10k"]) if r["feasible"] == "true" else None for r in hours]
            saved = "" if values[0] is None or values[2] is None else f"{values[0] - values[2]:.2f}"
            print(f"| {workload} | {n} | {fmt(values[0], 2)} | {fmt(values[1], 2)} | {fmt(values[2], 2)} | {saved} |")


def fig9(cells, link):
    print("| workload | N | excess peak before optimization (keep-all / 40 GiB): capuchin (N fused) / mu-two "
          "(its partition) | recompute fraction: capuchin / mu-two | swap overlap fraction: capuchin / mu-two | "
          "mu-two partition |")
    print("| --- | ---: | --- | --- | --- | --- |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            capuchin = cells.get((workload, n, "hfta-capuchin", link))
            mu_two = cells.get((workload, n, "mu-two", link))
            if capuchin is None or mu_two is None or float(capuchin["excess_peak_ratio"]) <= 1:
                continue

            def pair(column):
                return " / ".join(f"{float(r[column]):.3f}" if r["feasible"] == "true" else "–"
                                  for r in (capuchin, mu_two))
            # Per configuration (the plan's keep_all_peak_bytes). An infeasible cell keeps the N-fused workload's,
            # which is hfta-capuchin's configuration anyway.
            peaks = f"{float(capuchin['excess_peak_ratio']):.2f} / " + (
                f"{float(mu_two['excess_peak_ratio']):.2f}" if mu_two["feasible"] == "true" else "–")
            print(f"| {workload} | {n} | {peaks} | {pair('recompute_fraction')} | "
                  f"{pair('swap_overlap_fraction')} | {mu_two['partition']} |")


def breakdown(row):
    """(useful compute, recompute, stall) seconds per steady iteration, or None for an infeasible cell.

    The columns are totals over the whole simulated run (iteration_time_s = compute_busy_s + stall_time_s on the one
    compute stream; compute_busy_s includes the recompute). Recompute and stall are taken per cycle (total /
    iterations) and the rest of the steady iteration is useful compute: mu-two's rings run three cycles, and the
    first one's extra length is the prologue's forward, pure compute (so useful compute comes out as the sum of the
    sub-arrays' fused compute times: check_useful_compute). One-iteration plans are exact either way."""
    if row["feasible"] != "true":
        return None
    cycles = int(row["iterations"])
    recompute, stall = float(row["recompute_time_s"]) / cycles, float(row["stall_time_s"]) / cycles
    return (seconds(row) - recompute - stall, recompute, stall)


def check_useful_compute(cells, a100_ideal):
    """Every feasible cell's useful compute per steady iteration is the sum of its sub-arrays' fused compute times
    (ideal_time_s of the k-fused cells), where every k of its partition was swept."""
    for (workload, n, planner, link), row in cells.items():
        part = breakdown(row)
        ks = [int(k) for k in row["partition"].split("+")] if part else []
        if part and all((workload, k) in a100_ideal for k in ks):
            expected = sum(a100_ideal[(workload, k)] for k in ks)
            if abs(part[0] - expected) > 1e-9 * expected:
                sys.exit(f"{workload} N={n} {planner} at {link:g} B/s: useful compute {part[0]} is not the sum of "
                         f"its sub-arrays' compute {expected}: the Fig. 9a reading does not hold")


def fig9a(cells, link):
    print("| workload | N | hfta: compute / recompute / stall (s) | hfta-capuchin: compute / recompute / stall (s) | "
          "mu-two: compute / recompute / stall (s) | mu-two partition | useful compute / hfta's: capuchin / mu-two |")
    print("| --- | ---: | --- | --- | --- | --- | --- |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            row = {p: cells.get((workload, n, p, link)) for p in PLANNERS}
            if any(r is None for r in row.values()) or float(row["hfta-capuchin"]["excess_peak_ratio"]) <= 1:
                continue
            parts = {p: breakdown(row[p]) for p in PLANNERS}

            def shown(part):
                return "infeasible" if part is None else " / ".join(f"{value:.4f}" for value in part)

            def against_hfta(part):
                return "–" if part is None or parts["hfta"] is None else f"{part[0] / parts['hfta'][0]:.3f}"
            print(f"| {workload} | {n} | {shown(parts['hfta'])} | {shown(parts['hfta-capuchin'])} | "
                  f"{shown(parts['mu-two'])} | {row['mu-two']['partition']} | "
                  f"{against_hfta(parts['hfta-capuchin'])} / {against_hfta(parts['mu-two'])} |")


def links(cells, baseline, gains):
    speeds = sorted({key[3] for key in cells})
    print("| workload | N | planner | " + " | ".join(f"{s / 1e9:.0f} GB/s (s)" for s in speeds) +
          " | speedup over hfta at " + " / ".join(f"{s / 1e9:.0f}" for s in speeds) +
          " | fusion gain Σt_k/(N·t_1) of the partition (A100): hfta / this row at " +
          " / ".join(f"{s / 1e9:.0f}" for s in speeds) + " |")
    print("| --- | ---: | --- |" + " ---: |" * len(speeds) + " --- | --- |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            hfta = baseline.get((workload, n, "hfta", 24e9))
            for planner in ("hfta-capuchin", "mu-two"):
                rows = [cells.get((workload, n, planner, s)) for s in speeds]
                if any(r is None for r in rows):
                    continue
                times = [seconds(r) for r in rows]
                label = " ".join(r["partition"] or "–" for r in rows) if planner == "mu-two" else ""
                ks = [r["partition"] if r["feasible"] == "true" else "" for r in rows]
                print(f"| {workload} | {n} | {planner} {label} | " + " | ".join(fmt(t) for t in times) + " | " +
                      " / ".join(ratio(seconds(hfta), t) or "–" for t in times) + " | " +
                      gain_at(gains, workload, hfta["partition"]) + " / " +
                      " / ".join(gain_at(gains, workload, k) for k in ks) + " |")


def load_sequential(path):
    return {(row["base_workload"], int(row["models"])): row for row in csv.DictReader(open(path))}


def sequential(cells, sequential_rows, gains, link):
    """The cells where pair_mode=sequential and ring differ (partition, or time by more than 1e-9 relative)."""
    print("| workload | N | hfta (s) | ring | ring (s) | sequential | sequential (s) | seq / ring | hfta / seq | "
          "fusion gain Σt_k/(N·t_1) of the partition (A100): hfta / ring / seq |")
    print("| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- |")
    for workload in workloads(cells):
        for n in sorted({key[1] for key in cells if key[0] == workload}):
            hfta, ring = cells.get((workload, n, "hfta", link)), cells.get((workload, n, "mu-two", link))
            seq = sequential_rows.get((workload, n))
            if hfta is None or ring is None or seq is None:
                continue
            t_hfta, t_ring, t_seq = seconds(hfta), seconds(ring), seconds(seq)
            same_time = t_ring is not None and t_seq is not None and abs(t_seq - t_ring) <= 1e-9 * t_ring
            if ring["partition"] == seq["partition"] and same_time:
                continue
            gain = " / ".join(gain_at(gains, workload, r["partition"] if r["feasible"] == "true" else "")
                              for r in (hfta, ring, seq))
            print(f"| {workload} | {n} | {fmt(t_hfta)} | {ring['partition']} | {fmt(t_ring)} | {seq['partition']} | "
                  f"{fmt(t_seq)} | {ratio(t_ring, t_seq) and f'{t_seq / t_ring:.4f}' or '–'} | "
                  f"{ratio(t_hfta, t_seq) and f'{t_hfta / t_seq:.4f}' or '–'} | {gain} |")


def main():
    cells = load(sys.argv[1])
    link_cells = load(sys.argv[2])
    gains = fusion_gains(sys.argv[3])
    sequential_rows = load_sequential(sys.argv[4]) if len(sys.argv) > 4 else {}
    ideal = a100_ideal(cells, link_cells)
    a100_gains = a100_fusion_gains(ideal)
    check_useful_compute(cells, ideal)
    check_useful_compute(link_cells, ideal)
    print("## Figure 8 (24 GB/s)\n")
    fig8(cells, gains, 24e9)
    print("\n## Figure 7: GPU hours for 10,000 iterations (24 GB/s)\n")
    fig7(cells, 24e9)
    print("\n## Figure 9 (24 GB/s, N whose N-fused keep-all exceeds the GPU)\n")
    fig9(cells, 24e9)
    print("\n## Figure 9a: iteration latency breakdown (24 GB/s, the same N; per steady iteration)\n")
    fig9a(cells, 24e9)
    print("\n## Host link sweep\n")
    links(link_cells, cells, a100_gains)
    if sequential_rows:
        print("\n## pair_mode=sequential against ring (24 GB/s; the cells where they differ)\n")
        sequential(cells, sequential_rows, a100_gains, 24e9)


if __name__ == "__main__":
    main()
