#!/usr/bin/env python3
"""Summarises a Kineto trace (RINGPILOT_KINETO_TRACE) by kernel: GPU ms per step by
category and the top kernels. Usage: kernel_summary.py TRACE.json STEPS [TOP]"""
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


def gpu_work(path):
    """(name, ms) of every kernel, memcpy and memset in a Kineto trace; copies and sets are
    named "gpu_memcpy:..." / "gpu_memset:..."."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        name = e.get("name", "?")
        if e["cat"] != "kernel":
            name = e["cat"] + ":" + name
        yield name, float(e.get("dur", 0)) / 1000.0


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    by_name = collections.defaultdict(lambda: [0.0, 0])
    by_cat = collections.defaultdict(float)
    total = 0.0
    for name, dur in gpu_work(path):
        short = re.sub(r"<.*", "", name)[:90]
        by_name[short][0] += dur
        by_name[short][1] += 1
        by_cat[category(name)] += dur
        total += dur
    print(f"GPU busy (sum of kernel/copy times): {total / steps:.2f} ms per step")
    for cat, ms in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:14s} {ms / steps:8.2f} ms  {100 * ms / max(total, 1e-9):5.1f}%")
    print(f"top {top} kernels (ms per step, launches per step):")
    for name, (ms, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {ms / steps:8.3f}  {n / steps:6.1f}  {name}")


if __name__ == "__main__":
    main()
