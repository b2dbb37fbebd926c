#!/usr/bin/env python3
"""Summarises a Kineto trace (RINGPILOT_KINETO_TRACE) by kernel: GPU ms per step by
category and the top kernels, then for each of the top kernels the operators that launched
it (the innermost CPU op around the launch call, with up to two enclosing ones), so that a
generic kernel name (at::native::elementwise_kernel) says which op it was.
Last, each of the top kernels by launch shape (grid and block): microseconds per launch,
which tells a kernel's large calls from its small ones (BERT's 3072-wide column sums from
its 768-wide ones).
Usage: kernel_summary.py TRACE.json STEPS [TOP]"""
import bisect
import collections
import json
import re
import sys

CATEGORIES = [
    ("nccl", r"nccl"),
    ("gemm", r"gemm|xmma|cutlass|nvjet|cublas|sm\d+_.*(tn|nt|nn)"),
    ("attention", r"flash|fmha|attention|efficient"),
    ("conv", r"conv|implicit|wgrad|dgrad|cudnn"),
    ("norm", r"norm|welford|batch_norm|layer_norm"),
    ("optimizer", r"fused_adam|adam|sgd|multi_tensor|foreach"),
    ("softmax/loss", r"softmax|nll|cross_entropy|log_softmax"),
    ("embedding", r"embedding|index|gather|scatter|sort|radix"),
    ("dropout", r"dropout|fused_dropout|philox|bernoulli"),
    ("gelu/act", r"gelu|relu|activation"),
    ("reduce", r"reduce"),
    ("elementwise", r"elementwise|vectorized|unrolled|copy|fill|cast"),
]


def category(name):
    low = name.lower()
    for cat, pattern in CATEGORIES:
        if re.search(pattern, low):
            return cat
    return "other"


def trace_events(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def short_name(name):
    """A kernel's name without template arguments, at most 90 characters."""
    return re.sub(r"<.*", "", name)[:90]


def gpu_work(path, events=None):
    """(name, ms) of every kernel, memcpy and memset in a Kineto trace (its events, when
    already read); copies and sets are named "gpu_memcpy:..." / "gpu_memset:..."."""
    if events is None:
        events = trace_events(path)
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        name = e.get("name", "?")
        if e["cat"] != "kernel":
            name = e["cat"] + ":" + name
        yield name, float(e.get("dur", 0)) / 1000.0


def launching_ops(events):
    """{correlation id: "op < parent < grandparent"} for every kernel launch in the trace:
    the CPU ops (cat cpu_op) enclosing the runtime or driver call on the same thread. One
    sweep per thread with a stack of open ops (ops on one thread nest)."""
    ops = collections.defaultdict(list)
    launches = collections.defaultdict(list)
    for e in events:
        cat = e.get("cat")
        if cat == "cpu_op" and "dur" in e:
            start = float(e["ts"])
            ops[e.get("tid")].append((start, -(start + float(e["dur"])), e.get("name", "?")))
        elif cat in ("cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[e.get("tid")].append((float(e["ts"]), corr))
    found = {}
    for tid, calls in launches.items():
        spans = sorted(ops.get(tid, []))  # by start, the longer (outer) op first on ties
        stack, i = [], 0
        for t, corr in sorted(calls):
            while i < len(spans) and spans[i][0] <= t:
                while stack and -stack[-1][1] < spans[i][0]:
                    stack.pop()
                stack.append(spans[i])
                i += 1
            while stack and -stack[-1][1] < t:
                stack.pop()
            found[corr] = " < ".join(sp[2] for sp in reversed(stack[-3:])) or "(no op)"
    return found


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    by_name = collections.defaultdict(lambda: [0.0, 0])
    by_cat = collections.defaultdict(float)
    total = 0.0
    events = trace_events(path)  # one parse: traces run to hundreds of MB
    for name, dur in gpu_work(path, events):
        short = short_name(name)
        by_name[short][0] += dur
        by_name[short][1] += 1
        by_cat[category(name)] += dur
        total += dur
    print(f"GPU busy (sum of kernel/copy times): {total / steps:.2f} ms per step")
    for cat, ms in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:14s} {ms / steps:8.2f} ms  {100 * ms / max(total, 1e-9):5.1f}%")
    print(f"top {top} kernels (ms per step, launches per step):")
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    for name, (ms, n) in ranked:
        print(f"  {ms / steps:8.3f}  {n / steps:6.1f}  {name}")
    print_launching_ops(events, steps, [name for name, _ in ranked])
    print_launch_shapes(events, steps, [name for name, _ in ranked])


def print_launching_ops(events, steps, names):
    by_corr = launching_ops(events)
    per_kernel = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0]))
    for e in events:
        if e.get("cat") != "kernel":
            continue
        short = short_name(e.get("name", "?"))
        op = by_corr.get((e.get("args") or {}).get("correlation"), "(no launch found)")
        row = per_kernel[short][op]
        row[0] += float(e.get("dur", 0)) / 1000.0
        row[1] += 1
    print("launched by (ms per step, launches per step, op < enclosing ops):")
    for name in names:
        if name not in per_kernel:
            continue
        print(f"  {name}")
        for op, (ms, n) in sorted(per_kernel[name].items(), key=lambda kv: -kv[1][0])[:4]:
            print(f"    {ms / steps:8.3f}  {n / steps:6.1f}  {op}")


def print_launch_shapes(events, steps, names):
    shapes = collections.defaultdict(lambda: collections.defaultdict(list))
    for e in events:
        if e.get("cat") != "kernel":
            continue
        args = e.get("args") or {}
        shape = f"grid {args.get('grid', '?')} block {args.get('block', '?')}"
        shapes[short_name(e.get("name", "?"))][shape].append(float(e.get("dur", 0)))
    print("by launch shape (launches per step, mean and max us per launch, ms per step):")
    for name in names:
        if name not in shapes:
            continue
        print(f"  {name}")
        rows = sorted(shapes[name].items(), key=lambda kv: -sum(kv[1]))[:6]
        for shape, durs in rows:
            print(f"    {len(durs) / steps:6.1f}  {sum(durs) / len(durs):8.1f}  {max(durs):8.1f}"
                  f"  {sum(durs) / steps / 1000.0:7.3f}  {shape}")


if __name__ == "__main__":
    main()
