#!/usr/bin/env python3
"""Where a traced process's CUDA streams and host threads spend their time, from a Kineto
trace (RINGPILOT_KINETO_TRACE): for each stream, its GPU work per step, and how long each
operation waited between its API call and its start on the GPU (queueing behind other
streams' kernels shows here); for each host thread, the CUDA API calls that held it longest.
Used to see what an input pipeline's copies and kernels do beside the step.
Usage: stream_summary.py TRACE.json STEPS [TOP]"""
import collections
import json
import sys

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
API_CATS = ("cuda_runtime", "cuda_driver")


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    events = json.load(open(path))["traceEvents"]
    api_by_corr = {}
    thread_names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            thread_names[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
        if e.get("cat") in API_CATS:
            corr = e.get("args", {}).get("correlation")
            if corr is not None:
                api_by_corr[corr] = e
    streams = collections.defaultdict(lambda: {"busy": 0.0, "ops": 0, "wait": [], "names": collections.Counter()})
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        args = e.get("args", {})
        s = streams[args.get("stream", e.get("tid"))]
        s["busy"] += float(e.get("dur", 0)) / 1000.0
        s["ops"] += 1
        name = e.get("name", "?") if e["cat"] == "kernel" else e["cat"] + ":" + e.get("name", "?")
        s["names"][name.split("<")[0].split("(")[0][:60]] += 1
        api = api_by_corr.get(args.get("correlation"))
        if api is not None:
            # From the end of the call that queued it (the work exists from then) to its start.
            s["wait"].append((float(e["ts"]) - float(api["ts"]) - float(api.get("dur", 0))) / 1000.0)
    print(f"streams (per step over {steps} steps; wait = API call's end to GPU start, ms):")
    for sid, s in sorted(streams.items(), key=lambda kv: -kv[1]["busy"]):
        w = s["wait"]
        common = ", ".join(f"{n} x{c / steps:.0f}" for n, c in s["names"].most_common(3))
        print(f"  stream {sid}: busy {s['busy'] / steps:7.2f} ms, {s['ops'] / steps:6.1f} ops; "
              f"wait p50 {percentile(w, 0.5):.3f} p90 {percentile(w, 0.9):.3f} "
              f"max {max(w) if w else 0:.3f}; {common}")
    threads = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0]))
    for e in events:
        if e.get("cat") in API_CATS:
            t = threads[(e.get("pid"), e.get("tid"))][e.get("name", "?")]
            t[0] += float(e.get("dur", 0)) / 1000.0
            t[1] += 1
    print(f"host threads' CUDA API time (per step; top {top} calls each):")
    ranked = sorted(threads.items(), key=lambda kv: -sum(v[0] for v in kv[1].values()))
    for (pid, tid), calls in ranked:
        total = sum(v[0] for v in calls.values())
        name = thread_names.get((pid, tid), "")
        print(f"  thread {tid} {name}: {total / steps:.2f} ms in {sum(v[1] for v in calls.values()) / steps:.0f} calls")
        for call, (ms, n) in sorted(calls.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"      {ms / steps:8.3f} ms {n / steps:7.1f}x  {call}")


if __name__ == "__main__":
    main()
