"""Collective sweep through torch.distributed (ProcessGroupNCCL): the peer that
`ringpilot bench comm --device cuda` is set against where nccl-tests cannot be built.

Run under torchrun, one process per GPU:
    python3 -m torch.distributed.run --standalone --nproc_per_node=4 \
        tests/gpu/torch_comm_peer.py --min-bytes 1024 --max-bytes 1073741824 --step-factor 4

Sizes, bus-bandwidth factors and the timing follow nccl-tests and ringpilot bench comm:
`bytes` is the whole buffer (all blocks for all-gather, reduce-scatter and all-to-all),
float32, out of place (all-reduce and broadcast: in place, the only form torch offers), the mean of a back-to-back loop of --iters calls after --warmup,
the slowest rank's time. Rank 0 prints one JSON object per (op, bytes) line prefixed
"PEERCOMM ".
"""
import argparse
import json
import os

import torch
import torch.distributed as dist

OPS = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "sendrecv"]


def bus_factor(op, n):
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


def make_call(op, elems, rank, n, device):
    chunk = elems // n if op in ("allgather", "reduce_scatter", "alltoall") else elems
    if chunk == 0:
        return None, 0
    if op == "allreduce":
        # torch.distributed reduces in place; the values grow, the time does not.
        buf = torch.ones(elems, device=device)
        return (lambda: dist.all_reduce(buf)), elems * 4
    if op == "allgather":
        send = torch.ones(chunk, device=device)
        recv = torch.empty(chunk * n, device=device)
        return (lambda: dist.all_gather_into_tensor(recv, send)), chunk * n * 4
    if op == "reduce_scatter":
        send = torch.ones(chunk * n, device=device)
        recv = torch.empty(chunk, device=device)
        return (lambda: dist.reduce_scatter_tensor(recv, send)), chunk * n * 4
    if op == "broadcast":
        buf = torch.ones(elems, device=device)
        return (lambda: dist.broadcast(buf, src=0)), elems * 4
    if op == "alltoall":
        send = torch.ones(chunk * n, device=device)
        recv = torch.empty(chunk * n, device=device)
        return (lambda: dist.all_to_all_single(recv, send)), chunk * n * 4
    send = torch.ones(elems, device=device)
    recv = torch.empty(elems, device=device)
    nxt, prev = (rank + 1) % n, (rank + n - 1) % n

    def sendrecv():
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prev)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    return sendrecv, elems * 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--min-bytes", type=int, default=1024)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--step-factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    rank, n = dist.get_rank(), dist.get_world_size()
    sizes = []
    s = a.min_bytes
    while s <= a.max_bytes:
        sizes.append(s)
        s *= a.step_factor
    for op in a.ops.split(","):
        for size in sizes:
            call, nbytes = make_call(op, size // 4, rank, n, device)
            if call is None:
                continue
            for _ in range(a.warmup):
                call()
            torch.cuda.synchronize()
            dist.barrier()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.iters):
                call()
            stop.record()
            stop.synchronize()
            t = torch.tensor([start.elapsed_time(stop) / 1e3 / a.iters], device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            sec = float(t.item())
            algbw = nbytes / sec / 1e9
            if rank == 0:
                print("PEERCOMM " + json.dumps({
                    "op": op, "bytes": nbytes, "ranks": n, "time_us": sec * 1e6,
                    "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, n)}), flush=True)
            del call
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
