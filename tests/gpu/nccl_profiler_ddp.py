"""Stock PyTorch DDP, one process per GPU, for tests/gpu/nccl_profiler.sh: a user program
that knows nothing of ringpilot. Run under `ringpilot exec` (env:// rendezvous from the
torchrun contract exec sets). With the NCCL profiler plugin loaded (exec sets
RINGPILOT_METRICS_PORT_BASE; the plugin serves on base + RANK), every rank scrapes its own
port while it trains: after the
warm-up and again after --steps more steps, and reports the all-reduce bytes the plugin
counted per step next to the model's gradient bytes. Each rank prints one line
"NCCLPROF {json}".
"""
import argparse
import json
import os
import re
import statistics
import time
import urllib.request

import torch
import torch.distributed as dist
import torch.nn as nn


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def series(text, name):
    """[(labels dict, value)] of every sample of metric `name`."""
    out = []
    for m in re.finditer(r"^" + re.escape(name) + r"\{([^}]*)\} (\S+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        out.append((labels, float(m.group(2))))
    return out


def total(text, name, **want):
    return sum(v for labels, v in series(text, name)
               if all(labels.get(k) == w for k, w in want.items()))


def settled(port):
    """A scrape after the plugin has seen every enqueued operation complete (the proxy
    thread reports kernel channels shortly after the GPU finished them)."""
    deadline = time.time() + 2.0
    while True:
        text = scrape(port)
        if total(text, "ringpilot_nccl_inflight_ops") == 0 or time.time() > deadline:
            return text
        time.sleep(0.01)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--stall-seconds", type=float, default=3.0,
                   help="after the steps the last rank waits this long before one more "
                        "all-reduce; the others scrape while they are stuck in it (0: off)")
    a = p.parse_args()

    # Two ranks share the GPU on a one-GPU machine (tests/gpu/nccl_profiler.sh).
    local_rank = int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = []
    for _ in range(a.depth):
        layers += [nn.Linear(a.width, a.width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(a.width, 10)).cuda()
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    grad_bytes = sum(q.numel() * q.element_size() for q in model.parameters() if q.requires_grad)
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(a.batch, a.width, device="cuda", generator=g)
    y = torch.randint(0, 10, (a.batch,), device="cuda", generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    base = os.environ.get("RINGPILOT_METRICS_PORT_BASE")
    # Only ringpilot's plugin serves a port; another plugin (NCCL's Inspector) writes files.
    plugin = os.path.basename(os.environ.get("NCCL_PROFILER_PLUGIN", ""))
    port = int(base) + rank if base and plugin.startswith("libringpilot") else None
    before = settled(port) if port else None
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    result = {"rank": rank, "world": world, "grad_bytes": grad_bytes,
              "step_ms_median": 1e3 * statistics.median(times),
              "step_ms_mean": 1e3 * statistics.mean(times), "plugin": bool(port)}
    if port:
        after = settled(port)
        dbytes = (total(after, "ringpilot_collective_bytes_total", op="allreduce")
                  - total(before, "ringpilot_collective_bytes_total", op="allreduce"))
        dops = (total(after, "ringpilot_nccl_ops_total", op="allreduce")
                - total(before, "ringpilot_nccl_ops_total", op="allreduce"))
        started = total(after, "ringpilot_collective_last_started_seq")
        completed = total(after, "ringpilot_collective_last_completed_seq")
        busbw = [v for labels, v in series(after, "ringpilot_collective_bus_bandwidth_bytes_per_second")
                 if labels.get("op") == "allreduce"]
        info = [labels for labels, _ in series(after, "ringpilot_nccl_communicator_info")]
        # Per size class: every (algorithm, protocol) cell's operations and bus bandwidth,
        # for tests/gpu/inspector_summary.py to put beside NCCL's Inspector.
        ops = {(l["size_bucket"], l["algo"], l["proto"]): v
               for l, v in series(after, "ringpilot_nccl_ops_total") if l.get("op") == "allreduce"}
        by_class = {}
        for l, v in series(after, "ringpilot_nccl_bus_bandwidth_bytes_per_second"):
            if l.get("op") == "allreduce":
                key = (l["size_bucket"], l["algo"], l["proto"])
                by_class.setdefault(l["size_bucket"], []).append(
                    {"algo": l["algo"], "proto": l["proto"], "ops": ops.get(key, 0), "busbw": v})
        result.update({
            "allreduce_bytes_per_step": dbytes / a.steps,
            "allreduce_ops_per_step": dops / a.steps,
            "seq_started": started, "seq_completed": completed,
            "allreduce_busbw": max(busbw) if busbw else 0.0,
            "allreduce_busbw_by_class": by_class,
            "allreduce_seconds_count": total(after, "ringpilot_collective_seconds_count", op="allreduce"),
            "api_versions": sorted({i.get("api_version") for i in info}),
            "timing": sorted({i.get("timing") for i in info}),
            "rank_label": sorted({l.get("rank") for l, _ in series(after, "ringpilot_nccl_inflight_ops")}),
        })
    if port and a.stall_seconds > 0 and world > 1:
        # The last rank stalls; the others enqueue an all-reduce and look at themselves
        # while their kernel waits for it.
        t = torch.ones(1 << 20, device="cuda")
        dist.barrier()
        torch.cuda.synchronize()
        if rank == world - 1:
            time.sleep(a.stall_seconds)
            dist.all_reduce(t)
        else:
            dist.all_reduce(t)
            time.sleep(a.stall_seconds / 2)
            stuck = scrape(port)
            ages = [(labels.get("op"), v) for labels, v in
                    series(stuck, "ringpilot_nccl_oldest_inflight_seconds")]
            result["stall"] = {
                "inflight": total(stuck, "ringpilot_nccl_inflight_ops"),
                "oldest": ages,
                "started": total(stuck, "ringpilot_collective_last_started_seq"),
                "completed": total(stuck, "ringpilot_collective_last_completed_seq"),
            }
        torch.cuda.synchronize()
    print("NCCLPROF " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
