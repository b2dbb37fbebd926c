#!/usr/bin/env python3
"""How much an all-reduce beside backward slows the backward, by who moves the bytes (issue 32).

BERT-base on 2 GPUs loses ~1 ms a step (92-94% of 1 GPU) with 0.003 ms of it exposed: NCCL's
kernels share the SMs, HBM and the 700 W budget with backward. Before building a copy-engine
all-reduce into comm/ (several sessions: IPC buffers, cross-process events in captured graphs),
this measures the lever in one process on 2 GPUs:

  none   backward-shaped GEMM chunks alone, no gradient exchange
  nccl   after each chunk, NCCL all-reduces that chunk's gradient bucket on a side stream
         (torch.cuda.nccl, the same kernels ringpilot's ranks launch)
  ce     the same buckets, reduced with the copy engines: each GPU pulls the peer's half it
         owns (cudaMemcpyPeerAsync), adds it in one short kernel, and pushes the sum back

The next iteration's first chunk waits for the last bucket, as the optimizer does. Prints one
JSON line per variant: ms per iteration (median of repeats, host wall: the last bucket's
exchange is exposed), the backward chunks' own time on the slower GPU's compute stream (the
interference alone), each against `none`, the all-reduce alone, and nvidia-smi's SM clock, power and power-cap share while it ran.

  allreduce_interference.py [--iters 60] [--repeats 5] [--variants none,nccl,ce]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import gpu_watch  # noqa: E402

TOKENS, HIDDEN, FFN, LAYERS = 64 * 128, 768, 3072, 12
LAYER_PARAMS = 4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN + 9 * HIDDEN + FFN  # ~7.1 M
EMBEDDING_PARAMS = 30522 * HIDDEN + 512 * HIDDEN  # the word and position tables, ~23.8 M


def cudart():
    lib = ctypes.CDLL("libcudart.so.13")
    lib.cudaMemcpyPeerAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    lib.cudaSetDevice.argtypes = [ctypes.c_int]
    lib.cudaDeviceEnablePeerAccess.argtypes = [ctypes.c_int, ctypes.c_uint]
    return lib


class Gpu:
    """One GPU's weights, activations, gradient buckets and two streams."""

    def __init__(self, device):
        self.device = device
        d = torch.device("cuda", device)
        bf = dict(device=d, dtype=torch.bfloat16)
        self.x = torch.randn(TOKENS, HIDDEN, **bf)
        self.h = torch.empty(TOKENS, FFN, **bf)
        self.qkv = torch.empty(TOKENS, 3 * HIDDEN, **bf)
        self.o = torch.empty(TOKENS, HIDDEN, **bf)
        self.w_qkv = torch.randn(HIDDEN, 3 * HIDDEN, **bf) * 0.02
        self.w_o = torch.randn(HIDDEN, HIDDEN, **bf) * 0.02
        self.w_up = torch.randn(HIDDEN, FFN, **bf) * 0.02
        self.w_down = torch.randn(FFN, HIDDEN, **bf) * 0.02
        self.q = torch.randn(64 * 12, 128, 64, **bf)
        self.scores = torch.empty(64 * 12, 128, 128, **bf)
        self.ctx = torch.empty(64 * 12, 128, 64, **bf)
        sizes = [LAYER_PARAMS] * LAYERS + [EMBEDDING_PARAMS]
        self.buckets = [torch.full((n,), float(device + 1), device=d, dtype=torch.float32)
                        for n in sizes]
        self.scratch = torch.empty(max(sizes) // 2 + 1, device=d, dtype=torch.float32)
        self.compute = torch.cuda.Stream(device=d)
        self.comm = torch.cuda.Stream(device=d)

    def layer_backward(self):
        """About one BERT-base layer's backward at b64 x 128: twice its forward GEMMs."""
        for _ in range(2):
            torch.matmul(self.x, self.w_qkv, out=self.qkv)
            torch.bmm(self.q, self.q.transpose(1, 2), out=self.scores)
            torch.bmm(self.scores, self.q, out=self.ctx)
            torch.matmul(self.x, self.w_o, out=self.o)
            torch.matmul(self.x, self.w_up, out=self.h)
            torch.nn.functional.gelu(self.h)
            torch.matmul(self.h, self.w_down, out=self.o)
            torch.nn.functional.layer_norm(self.o, (HIDDEN,))


def ce_all_reduce(lib, gpus, k):
    """Bucket k summed over both GPUs with copy-engine transfers and one add kernel each."""
    n = gpus[0].buckets[k].numel()
    half = n // 2
    spans = [(0, half), (half, n - half)]  # GPU i owns span i
    for i, g in enumerate(gpus):
        peer = gpus[1 - i]
        start, count = spans[i]
        lib.cudaSetDevice(g.device)
        lib.cudaMemcpyPeerAsync(g.scratch.data_ptr(), g.device,
                                peer.buckets[k].data_ptr() + 4 * start, peer.device,
                                4 * count, ctypes.c_void_p(g.comm.cuda_stream))
        with torch.cuda.device(g.device), torch.cuda.stream(g.comm):
            g.buckets[k][start:start + count].add_(g.scratch[:count])
    # No wait on the peer before the push: the push writes the peer's copy of this GPU's span,
    # which only this GPU's own pull (earlier on the same stream) reads.
    for i, g in enumerate(gpus):
        peer = gpus[1 - i]
        start, count = spans[i]
        lib.cudaSetDevice(g.device)
        lib.cudaMemcpyPeerAsync(peer.buckets[k].data_ptr() + 4 * start, peer.device,
                                g.buckets[k].data_ptr() + 4 * start, g.device,
                                4 * count, ctypes.c_void_p(g.comm.cuda_stream))


def run(variant, gpus, lib, iters, with_compute=True):
    """Queues `iters` iterations on both GPUs. Returns (ms per iteration, host wall and synced;
    ms of backward chunks per iteration, the compute stream's events on the slower GPU)."""
    for g in gpus:
        torch.cuda.synchronize(g.device)
    marks = []  # per iteration, per GPU: (start, end) on the compute stream
    start = time.perf_counter()
    for _ in range(iters):
        pairs = []
        for g in gpus:
            with torch.cuda.device(g.device):
                pairs.append([torch.cuda.Event(enable_timing=True),
                              torch.cuda.Event(enable_timing=True)])
                pairs[-1][0].record(g.compute)
        marks.append(pairs)
        for k in range(LAYERS + 1):
            if k == LAYERS:
                for g, pair in zip(gpus, pairs):
                    pair[1].record(g.compute)
            ready = []
            for g in gpus:
                with torch.cuda.device(g.device), torch.cuda.stream(g.compute):
                    if with_compute and k < LAYERS:
                        g.layer_backward()
                    ready.append(g.compute.record_event())
            if variant == "none":
                continue
            for g in gpus:  # a bucket is exchanged once both GPUs produced it
                for e in ready:
                    g.comm.wait_event(e)
            if variant == "nccl":
                torch.cuda.nccl.all_reduce([g.buckets[k] for g in gpus],
                                           streams=[g.comm for g in gpus])
            else:
                ce_all_reduce(lib, gpus, k)
        for g in gpus:  # the optimizer needs every bucket
            for h in gpus:
                g.compute.wait_stream(h.comm)
    for g in gpus:
        torch.cuda.synchronize(g.device)
    wall = (time.perf_counter() - start) * 1e3 / iters
    compute = max(sum(p[i][0].elapsed_time(p[i][1]) for p in marks) / iters
                  for i in range(len(gpus)))
    return wall, compute


def check_sum(variant, gpus, lib):
    """One exchange of known values: every element must be 1 + 2 on both GPUs."""
    for g in gpus:
        for b in g.buckets:
            b.fill_(float(g.device + 1))
    run(variant, gpus, lib, 1, with_compute=False)
    return all(bool((b == 3.0).all()) for g in gpus for b in g.buckets)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--variants", default="none,nccl,ce")
    args = parser.parse_args()
    lib = cudart()
    for dev, peer in ((0, 1), (1, 0)):
        lib.cudaSetDevice(dev)
        lib.cudaDeviceEnablePeerAccess(peer, 0)  # 704 (already enabled) is fine
    gpus = [Gpu(0), Gpu(1)]
    cap = "clocks_event_reasons.sw_power_cap"
    base = None
    for variant in args.variants.split(","):
        if variant != "none" and not check_sum(variant, gpus, lib):
            print(json.dumps({"variant": variant, "error": "wrong sum"}), flush=True)
            continue
        alone = run(variant, gpus, lib, 10, with_compute=False)[0] if variant != "none" else 0.0
        run(variant, gpus, lib, 10)  # warm-up
        smi_path = tempfile.mktemp(suffix=".smi")
        with open(smi_path, "w") as smi_out:
            watcher = subprocess.Popen(
                ["nvidia-smi", f"--query-gpu=timestamp,index,utilization.gpu,clocks.sm,power.draw,{cap}",
                 "--format=csv,noheader,nounits", "-lms", "200"], stdout=smi_out,
                stderr=subprocess.DEVNULL)
            times = [run(variant, gpus, lib, args.iters) for _ in range(args.repeats)]
            watcher.terminate()
            watcher.wait()
        ms = statistics.median(t for t, _ in times)
        compute = statistics.median(c for _, c in times)
        if variant == "none":
            base = (ms, compute)
        row = {"variant": variant, "ms_per_iter": round(ms, 3),
               "runs_ms": [round(t, 3) for t, _ in times],
               "slowdown": round(ms / base[0], 4) if base else None,
               "backward_ms": round(compute, 3),
               "backward_slowdown": round(compute / base[1], 4) if base else None,
               "all_reduce_alone_ms": round(alone, 3),
               "gradient_mb": round(sum(b.numel() for b in gpus[0].buckets) * 4 / 2**20, 1)}
        row.update(gpu_watch.fields(smi_path, [0, 1]))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
