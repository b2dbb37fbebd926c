"""NCCL's Inspector plugin beside ringpilot's (tests/gpu/nccl_profiler.sh, its inspector rows).

  python3 tests/gpu/inspector_summary.py OUT NRANKS

OUT holds the script's runs: on.out (ringpilot's plugin: "NCCLPROF {json}" per rank),
off-{1..5}.out (no plugin) and inspector-{1,2,3}.out with the Inspector's own files in
inspector-{1,2,3}/ (HOST-pidPID.log: JSON objects, each the latest completed collective of
one communicator when its dump thread woke). The Inspector samples collectives rather than
counting them, so bytes per step cannot be summed from it; what it can say, and is put
beside ringpilot's numbers: that every rank wrote records, the all-reduce message sizes it
saw (their sum against the gradient bytes: DDP's buckets add up to them when each size was
sampled at least once) and the bus bandwidth of the largest all-reduce.
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


def main():
    out, nranks = sys.argv[1], int(sys.argv[2])
    records = []
    for f in glob.glob(os.path.join(out, "inspector-1", "**", "*.log"), recursive=True):
        records += [o for o in objects(f) if "coll_perf" in o]
    per_rank = {}
    for o in records:
        per_rank.setdefault(o["header"]["rank"], []).append(o["coll_perf"])
    allreduce = {r: [c for c in cs if c.get("coll") == "AllReduce"] for r, cs in per_rank.items()}
    problems = [f"rank {r}: no records" for r in range(nranks) if r not in per_rank]
    problems += [f"rank {r}: no AllReduce" for r, cs in allreduce.items() if not cs]
    counts = ", ".join(f"rank {r} {len(per_rank[r])}" for r in sorted(per_rank))
    print(f"inspector\t{'FAIL' if problems or not records else 'PASS'}\t"
          f"{'; '.join(problems) or 'records per rank: ' + counts}")

    ours = rank_lines(os.path.join(out, "on.out"))
    ar0 = allreduce.get(0, [])
    if ar0 and ours:
        sizes = sorted({c["coll_msg_size_bytes"] for c in ar0})
        largest = max(sizes)
        bw = [c["coll_busbw_gbs"] for c in ar0 if c["coll_msg_size_bytes"] == largest]
        grad = ours[0]["grad_bytes"]
        ours_bw = ours[0]["allreduce_busbw"] / 1e9
        print(f"inspector-bw\tINFO\tall-reduce sizes {sizes} B (sum {sum(sizes)} vs gradients "
              f"{grad} B; ours {ours[0]['allreduce_bytes_per_step']:.0f} B/step in "
              f"{ours[0]['allreduce_ops_per_step']:.1f} ops); busbw of the {largest} B "
              f"all-reduce: median {statistics.median(bw):.1f} GB/s over {len(bw)} records "
              f"(Inspector) vs {ours_bw:.1f} GB/s (ringpilot, its largest)")
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
