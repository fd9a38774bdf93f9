#!/usr/bin/python3
"""Check `memsim import` against the reference data of other projects (by hand; never from tests).

    /usr/bin/python3 traces/tools/validate_importers.py --memsim build/x/experiments/memsim \
        --dtr-logs ../shared/data/dtr-logs/logs.zip --checkmate ../shared/data/checkmate-graphs

DTR logs: imports each log and compares the trace's total_time_s and default_peak_bytes (`memsim trace info --json`)
with an independent replay of the log by the DTR authors' accounting (simrd's parser + eager-eviction runtime with an
unlimited budget: a storage's memory is added when the CALL / MUTATE / CONSTANT that creates it runs and removed when
its last handle is released; constants are pinned). simrd counts a CONSTANT from the line where it appears, memsim
counts weights as resident from the start, so both peaks are printed: 'as logged' and 'constants from the start'.
Checkmate graphs: compares total_time_s with the sum of cost_cpu and the node count with the op count.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile


def simrd_accounting(lines):
    """(total compute ns, peak as logged, peak with constants resident from the start, constant bytes)."""
    records = [json.loads(line) for line in lines if line.strip()]
    for i, record in enumerate(records):
        if record["INSTRUCTION"] == "ANNOTATE" and record.get("ANNOTATION") == "START":
            records = records[i + 1:]
            break
    size, refs, pinned = {}, {}, set()  # storage -> bytes / handle count
    handle = {}
    next_storage = [0]
    in_use = peak = 0
    late_constants = 0  # constant bytes that appear after the point where the running peak was reached
    compute_ns = 0
    constant_bytes = 0
    # (in_use, constants seen so far) at every compute, for the 'constants from the start' variant
    samples = []

    def new(nbytes):
        sid = next_storage[0]
        next_storage[0] += 1
        size[sid], refs[sid] = nbytes, 1
        return sid

    def drop(sid):
        nonlocal in_use
        refs[sid] -= 1
        if refs[sid] == 0 and sid not in pinned:
            in_use -= size[sid]

    i = 0
    while i < len(records):
        r = records[i]
        kind = r["INSTRUCTION"]
        if kind == "CONSTANT":
            nbytes = int(records[i + 1]["MEMORY"])
            sid = new(nbytes)
            pinned.add(sid)
            handle[r["NAME"]] = sid
            in_use += nbytes
            constant_bytes += nbytes
            samples.append((in_use, constant_bytes))
            i += 2
            continue
        if kind == "COPY":
            sid = handle[r["SRC"]]
            handle[r["DST"]] = sid
            refs[sid] += 1
        elif kind == "COPY_FROM":
            old = handle[r["DST"]]
            sid = handle[r["SRC"]]
            refs[sid] += 1
            handle[r["DST"]] = sid
            drop(old)
        elif kind == "RELEASE":
            if r["NAME"] in handle:
                drop(handle[r["NAME"]])
        elif kind == "CALL":
            compute_ns += int(r["TIME"])
            args = [handle[a] for a in r["ARGS"]]
            allocated = 0
            fresh = []
            for k, name in enumerate(r["RESULT"]):
                memory, alias = records[i + 1 + 2 * k], records[i + 2 + 2 * k]
                if int(alias["ALIAS"]) == -1:
                    sid = new(int(memory["MEMORY"]))
                    allocated += size[sid]
                    fresh.append((name, sid))
                else:
                    sid = args[int(alias["ALIAS"])]
                    refs[sid] += 1
                    fresh.append((name, sid))
            in_use += allocated
            samples.append((in_use, constant_bytes))
            for name, sid in fresh:
                handle[name] = sid
            i += 1 + 2 * len(r["RESULT"])
            continue
        elif kind == "MUTATE":
            compute_ns += int(r["TIME"])
            olds = []
            for m in r["MUTATE"]:
                name = r["ARGS"][m]
                old = handle[name]
                sid = new(size[old])
                in_use += size[sid]
                handle[name] = sid
                olds.append(old)
            samples.append((in_use, constant_bytes))
            for old in olds:
                drop(old)
        i += 1
    peak_as_logged = max(s[0] for s in samples)
    peak_resident = max(s[0] - s[1] for s in samples) + constant_bytes
    return compute_ns, peak_as_logged, peak_resident, constant_bytes


def memsim_info(memsim, trace):
    out = subprocess.run([memsim, "trace", "info", trace, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memsim", required=True)
    parser.add_argument("--dtr-logs", help="logs.zip of uwsampl/dtr-prototype (simrd)")
    parser.add_argument("--checkmate", help="folder of Checkmate / Moccasin node-link graphs")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        if args.dtr_logs:
            print("DTR logs: memsim import dtr vs simrd accounting (unlimited budget, eager release)")
            print(f"{'log':<52} {'ops':>6} {'compute s':>10} {'simrd s':>10} {'memsim peak':>14} "
                  f"{'simrd peak (const. resident)':>29} {'simrd peak as logged':>21}")
            with zipfile.ZipFile(args.dtr_logs) as archive:
                for name in sorted(n for n in archive.namelist() if n.endswith(".log")):
                    path = os.path.join(scratch, os.path.basename(name))
                    with open(path, "wb") as out:
                        out.write(archive.read(name))
                    trace = path + ".trace.json"
                    subprocess.run([args.memsim, "import", "dtr", path, "-o", trace], check=True,
                                   capture_output=True)
                    info = memsim_info(args.memsim, trace)
                    lines = io.TextIOWrapper(io.BytesIO(archive.read(name))).readlines()
                    compute_ns, peak_logged, peak_resident, _ = simrd_accounting(lines)
                    same = (abs(info["total_time_s"] - compute_ns * 1e-9) <= 1e-9 * max(1, compute_ns * 1e-9)
                            and info["default_peak_bytes"] == peak_resident)
                    failures += not same
                    print(f"{os.path.basename(name)[:52]:<52} {info['ops']:>6} {info['total_time_s']:>10.4f} "
                          f"{compute_ns * 1e-9:>10.4f} {info['default_peak_bytes']:>14} {peak_resident:>29} "
                          f"{peak_logged:>21} {'ok' if same else 'MISMATCH'}")
        if args.checkmate:
            print("Checkmate graphs: memsim import checkmate (cost units as milliseconds)")
            for name in sorted(os.listdir(args.checkmate)):
                if not name.endswith(".json"):
                    continue
                source = os.path.join(args.checkmate, name)
                trace = os.path.join(scratch, name + ".trace.json")
                subprocess.run([args.memsim, "import", "checkmate", source, "-o", trace], check=True,
                               capture_output=True)
                info = memsim_info(args.memsim, trace)
                graph = json.load(open(source))
                tag = graph.get("graph", {}).get("node_duration_tag", "cost_cpu")
                cost = sum(node[tag] for node in graph["nodes"]) * 1e-3
                same = len(graph["nodes"]) == info["ops"] and abs(cost - info["total_time_s"]) < 1e-9 * max(1, cost)
                failures += not same
                print(f"  {name:<44} {info['ops']:>5} ops, total_time_s {info['total_time_s']:.3f} (sum of costs "
                      f"{cost:.3f}), default_peak_bytes {info['default_peak_bytes']}, chain view "
                      f"{'yes' if info['chain_view'] else 'no'} {'ok' if same else 'MISMATCH'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
