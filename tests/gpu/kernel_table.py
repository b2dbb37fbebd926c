#!/usr/bin/env python3
"""The kernel table of one profiled step (tests/gpu/kernel_table.sh): reads Nsight Compute's
raw page (CSV, base units) and prints markdown: per category and per kernel name, the GPU
time and its share of the step, HBM bytes, FLOPs, and the device's floor,
max(bytes / bandwidth, tensor FLOPs / tensor peak + CUDA-core FLOPs / FP32 peak).

Usage: kernel_table.py NCU.csv [--device NAME] [--title TEXT] [--bandwidth B/s]
           [--tensor-peak FLOP/s] [--fp32-peak FLOP/s] [--top N]
ncu serialises kernels and flushes caches between them, so its times are each kernel alone
and cold; the shares are of the sum of those times."""
import argparse
import collections
import csv
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_summary import category  # noqa: E402  (the categories of the Kineto summary)

# Memory bandwidth (datasheet; a device-to-device copy measured ~4.3 TB/s on an H200 and
# ~3.0 on an H100 here), dense bf16 tensor rate (an 8192^3 bf16 product measured 788-798
# TFLOP/s on both), FP32 CUDA-core rate (datasheet, SXM).
DEVICES = {
    "H200": (4.8e12, 790e12, 67e12),
    "H100": (3.35e12, 790e12, 67e12),
}
TENSOR = ("sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
          "sm__ops_path_tensor_src_tf32_dst_fp32.sum")
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"


def number(text):
    text = (text or "").replace(",", "").strip()
    if text in ("", "n/a", "N/A"):
        return 0.0
    try:
        return float(text)
    except ValueError:
        return 0.0


def short_name(name):
    # Template arguments and parameter lists make every instance unique; keep the base name.
    name = re.sub(r"\(.*", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).strip()
    name = re.sub(r"^void ", "", name)
    return name[:100]


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's own notes are unquoted
    reader = csv.DictReader(lines)
    rows = []
    for row in reader:
        if not row.get("ID", "").strip():  # the units row
            continue
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--device", default="")
    ap.add_argument("--title", default="one step")
    ap.add_argument("--bandwidth", type=float)
    ap.add_argument("--tensor-peak", type=float)
    ap.add_argument("--fp32-peak", type=float)
    ap.add_argument("--top", type=int, default=0, help="kernel rows (0: every kernel name)")
    args = ap.parse_args()
    spec = next((v for k, v in DEVICES.items() if k in args.device), DEVICES["H200"])
    bw = args.bandwidth or spec[0]
    tensor_peak = args.tensor_peak or spec[1]
    fp32_peak = args.fp32_peak or spec[2]

    rows = read_rows(args.csv)
    if not rows:
        sys.exit(f"kernel_table: no kernels in {args.csv}")
    name_key = "Kernel Name" if "Kernel Name" in rows[0] else "Function Name"
    Agg = lambda: {"n": 0, "ns": 0.0, "bytes": 0.0, "tflop": 0.0, "cflop": 0.0}  # noqa: E731
    by_name = collections.defaultdict(Agg)
    by_cat = collections.defaultdict(Agg)
    total = Agg()
    for r in rows:
        ns = number(r.get("gpu__time_duration.sum"))
        nbytes = number(r.get("dram__bytes_read.sum")) + number(r.get("dram__bytes_write.sum"))
        tflop = sum(number(r.get(k)) for k in TENSOR)
        cflop = 2 * number(r.get(FFMA)) + number(r.get(FADD)) + number(r.get(FMUL))
        name = r.get(name_key, "?")
        for agg in (by_name[short_name(name)], by_cat[category(name)], total):
            agg["n"] += 1
            agg["ns"] += ns
            agg["bytes"] += nbytes
            agg["tflop"] += tflop
            agg["cflop"] += cflop

    def floor_ms(a):
        return max(a["bytes"] / bw, a["tflop"] / tensor_peak + a["cflop"] / fp32_peak) * 1e3

    def line(label, a):
        ms = a["ns"] / 1e6
        fl = floor_ms(a)
        bound = "memory" if a["bytes"] / bw >= a["tflop"] / tensor_peak + a["cflop"] / fp32_peak else "math"
        return (f"| {label} | {a['n']} | {ms:.3f} | {100 * ms / (total['ns'] / 1e6):.1f}% | "
                f"{a['bytes'] / 1e9:.3f} | {a['tflop'] / 1e12:.3f} | {a['cflop'] / 1e12:.4f} | "
                f"{fl:.3f} | {bound} | {ms / fl if fl > 0 else float('inf'):.1f}x |")

    head = ("| {} | kernels | ms | share | HBM GB | tensor TFLOP | CUDA-core TFLOP | floor ms | "
            "bound | time / floor |\n|---|---|---|---|---|---|---|---|---|---|")
    print(f"### {args.title} on {args.device or 'the GPU'}\n")
    print(f"Floors at {bw / 1e12:.2f} TB/s, {tensor_peak / 1e12:.0f} TFLOP/s on tensor cores, "
          f"{fp32_peak / 1e12:.0f} TFLOP/s FP32 on CUDA cores. Times are ncu's: each kernel "
          f"alone, caches flushed, clocks as found.\n")
    print(f"Step: {total['n']} kernels, {total['ns'] / 1e6:.2f} ms of kernel time, floor "
          f"{floor_ms(total):.2f} ms (sum of the kernels' floors "
          f"{sum(floor_ms(a) for a in by_name.values()):.2f} ms), "
          f"{total['bytes'] / 1e9:.2f} GB from and to HBM, "
          f"{total['tflop'] / 1e12:.3f} tensor TFLOP.\n")
    print(head.format("category"))
    for cat, a in sorted(by_cat.items(), key=lambda kv: -kv[1]["ns"]):
        print(line(cat, a))
    print()
    print(head.format("kernel"))
    names = sorted(by_name.items(), key=lambda kv: -kv[1]["ns"])
    for name, a in names[: args.top or len(names)]:
        print(line(name.replace("|", "/"), a))


if __name__ == "__main__":
    main()
