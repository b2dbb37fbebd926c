"""NCCL's Inspector plugin beside ringpilot's (tests/gpu/nccl_profiler.sh, its inspector rows).

  python3 tests/gpu/inspector_summary.py OUT NRANKS

OUT holds the script's runs: on.out (ringpilot's plugin: "NCCLPROF {json}" per rank),
off-{1..5}.out (no plugin) and inspector-{1,2,3}.out with the Inspector's own files in
inspector-{1,2,3}/ (HOST-pidPID.log: JSON objects, each the latest completed collective of
one communicator when its dump thread woke). The Inspector samples collectives rather than
counting them, so bytes per step cannot be summed from it; what it can say, and is put
beside ringpilot's numbers: that every rank of every run wrote records, the all-reduce
message sizes it saw, and per size class (comm::SizeBucketIndex's) the median bus bandwidth
of the all-reduces it sampled beside ours of that class.
Prints tab-separated rows "name<TAB>PASS|FAIL<TAB>detail": inspector (loaded, records per
rank; FAIL without them), inspector-bw (bandwidth and sizes beside ours) and
inspector-overhead (step time), both INFO: numbers to read, not thresholds.
"""
import glob
import json
import os
import statistics
import sys


def objects(path):
    """Every JSON object in a file of concatenated objects (one per line or pretty-printed)."""
    text = open(path, errors="replace").read()
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            # A record cut off (the process ended, or two writers interleaved): go on at
            # the next line that starts an object.
            nxt = text.find("\n{", i)
            if nxt < 0:
                return out
            i = nxt + 1
            continue
        out.append(obj)


def rank_lines(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l.split(" ", 1)[1]) for l in open(path) if l.startswith("NCCLPROF ")]


def slowest_median(path):
    ms = [r["step_ms_median"] for r in rank_lines(path)]
    return max(ms) if ms else None


# comm::SizeBucketIndex's classes (comm/collective_op.cpp), by their label.
CLASSES = [("lt64KiB", 64 << 10), ("64KiB-1MiB", 1 << 20), ("1MiB-4MiB", 4 << 20),
           ("4MiB-16MiB", 16 << 20), ("16MiB-64MiB", 64 << 20), ("ge64MiB", 1 << 62)]


def size_class(nbytes):
    return next(name for name, limit in CLASSES if nbytes < limit)


def inspector_records(run_dir):
    """{rank: [coll_perf]} of one run's Inspector files."""
    per_rank = {}
    for f in glob.glob(os.path.join(run_dir, "**", "*.log"), recursive=True):
        for o in objects(f):
            if "coll_perf" in o and "header" in o:
                per_rank.setdefault(o["header"]["rank"], []).append(o["coll_perf"])
    return per_rank


def main():
    out, nranks = sys.argv[1], int(sys.argv[2])
    runs = sorted(glob.glob(os.path.join(out, "inspector-[0-9]")))
    # The Inspector writes its files from a dump thread; a rank that ends between two dumps
    # can leave none (seen once in three runs on 2026-11-29). It loaded, and its numbers
    # stand beside ours, when some run has every rank's all-reduces; runs missing a rank's
    # file are named, not failed.
    problems, gaps, counts, complete = [], [], [], 0
    for run in runs:
        per_rank = inspector_records(run)
        name = os.path.basename(run)
        gaps += [f"{name} rank {r}: no records" for r in range(nranks) if r not in per_rank]
        problems += [f"{name} rank {r}: no AllReduce" for r, cs in per_rank.items()
                     if not any(c.get("coll") == "AllReduce" for c in cs)]
        complete += len(per_rank) == nranks
        counts.append(f"{name} " + "/".join(str(len(per_rank.get(r, []))) for r in range(nranks)))
    if not complete:
        problems += gaps or ["no Inspector run"]
    detail = "; ".join(problems) or ("records per rank: " + ", ".join(counts) +
                                     (f" ({'; '.join(gaps)})" if gaps else ""))
    print(f"inspector\t{'FAIL' if problems else 'PASS'}\t{detail}")

    # The first run's rank 0 beside the plugin run's rank 0, size class by size class:
    # the Inspector's median bus bandwidth of the all-reduces it sampled in a class and
    # their pooled one (bytes over time, as ours), ours of the class's busiest (algorithm,
    # protocol) cell.
    ours = rank_lines(os.path.join(out, "on.out"))
    ar0 = [c for c in inspector_records(runs[0]).get(0, []) if c.get("coll") == "AllReduce"] \
        if runs else []
    if ar0 and ours:
        mine = ours[0].get("allreduce_busbw_by_class", {})
        cells = []
        for name, _ in CLASSES:
            sampled = [c for c in ar0 if size_class(c["coll_msg_size_bytes"]) == name]
            theirs = [c["coll_busbw_gbs"] for c in sampled]
            # Ours is the class's bytes over its time; the same over the sampled records
            # (busbw = algbw for all-reduce's 2(n-1)/n only at n = 2, so scaled by their ratio).
            seconds = sum(c["coll_exec_time_us"] * 1e-6 for c in sampled)
            pooled = (sum(c["coll_msg_size_bytes"] * c["coll_busbw_gbs"] / max(c["coll_algobw_gbs"], 1e-12)
                          for c in sampled) / seconds / 1e9) if seconds > 0 else None
            cell = max(mine.get(name, []), key=lambda x: x["ops"], default=None)
            if not theirs and cell is None:
                continue
            t = (f"median {statistics.median(theirs):.1f}, pooled "
                 f"{pooled:.1f} GB/s ({len(theirs)} sampled)") if theirs and pooled else "-"
            m = (f"{cell['busbw'] / 1e9:.1f} GB/s ({cell['ops']:.0f} ops, {cell['algo']}/"
                 f"{cell['proto']})") if cell else "-"
            cells.append(f"{name}: Inspector {t} vs ringpilot {m}")
        sizes = sorted({c["coll_msg_size_bytes"] for c in ar0})
        print(f"inspector-bw\tINFO\tall-reduce busbw by size class, rank 0: {'; '.join(cells)}. "
              f"Sizes the Inspector saw: {sizes} B; ringpilot counted "
              f"{ours[0]['allreduce_bytes_per_step']:.0f} B/step in "
              f"{ours[0]['allreduce_ops_per_step']:.1f} ops (gradients {ours[0]['grad_bytes']} B)")
    else:
        print("inspector-bw\tFAIL\tno AllReduce records of rank 0 or no ringpilot run to compare")

    ins = [slowest_median(os.path.join(out, f"inspector-{i}.out")) for i in (1, 2, 3)]
    off = [slowest_median(os.path.join(out, f"off-{i}.out")) for i in range(1, 6)]
    ins, off = [x for x in ins if x], [x for x in off if x]
    if ins and off:
        m_in, m_off = statistics.median(ins), statistics.median(off)
        print(f"inspector-overhead\tINFO\tstep {m_in:.3f} ms with the Inspector vs {m_off:.3f} ms "
              f"without a plugin ({100 * (m_in / m_off - 1):+.1f}%)")
    else:
        print("inspector-overhead\tFAIL\tno step times")


if __name__ == "__main__":
    main()
