#!/usr/bin/env python3
"""A user's own data-parallel training program, as `ringpilot run` launches it.

Stock PyTorch DDP on Fashion-MNIST (Debian's dataset-fashion-mnist, photos of 10 kinds of
garment): a small CNN, SGD with momentum, a seeded shuffle per epoch with a disjoint share
per rank, and its own checkpoints (in RINGPILOT_RUN_DIR/checkpoints under `ringpilot run`,
else runs/ddp_fashion_mnist/), from which every start resumes. Nothing in it is
ringpilot-specific besides reading RINGPILOT_RUN_DIR and RINGPILOT_ATTEMPT when they are
there; it runs the same under torchrun.

    build/bin/ringpilot run examples/ddp-fashion-mnist.yaml           # a job file
    mpirun -np 2 build/bin/ringpilot exec -- python3 examples/ddp_fashion_mnist.py

GPUs (one per rank, LOCAL_RANK picks it) use NCCL; without them the ranks use gloo on the
CPU. SIGUSR1 (preemption, Slurm's warning before the time limit) makes every rank stop at
the next step boundary after rank 0 saved a checkpoint, with exit status 75, which
`ringpilot run` reports as preempted and a requeued job resumes from.
"""
import argparse
import gc
import gzip
import json
import os
import signal
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

EXIT_PREEMPTED = 75  # ringpilot's "checkpointed and stopped" (base/exit_status.h)
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=DEFAULT_DATA, help="folder of the four *-ubyte.gz files")
    p.add_argument("--train-samples", type=int, default=0, help="first N training images (0: all)")
    p.add_argument("--test-samples", type=int, default=2000, help="first N test images evaluated")
    p.add_argument("--steps", type=int, default=600, help="optimizer steps")
    p.add_argument("--batch", type=int, default=64, help="images per rank per step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--out", default="",
                   help="checkpoints/ and result.json go here; default: $RINGPILOT_RUN_DIR, "
                   "else runs/ddp_fashion_mnist")
    p.add_argument("--log-every", type=int, default=50, help="steps between progress lines")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    # Fault injection for tests: rank R fails at step S, on the first attempt only unless
    # --crash-every-attempt, with SIGKILL unless --crash-exit CODE.
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--crash-step", type=int, default=-1)
    p.add_argument("--crash-exit", type=int, default=0)
    p.add_argument("--crash-every-attempt", action="store_true")
    return p.parse_args()


def load_idx(path):
    """An IDX file (the MNIST format): big-endian magic, dimensions, then uint8 data."""
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def load_split(folder, prefix, limit):
    images = load_idx(os.path.join(folder, prefix + "-images-idx3-ubyte.gz"))
    labels = load_idx(os.path.join(folder, prefix + "-labels-idx1-ubyte.gz"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.2860) / 0.3530  # Fashion-MNIST's mean and deviation
    return x, torch.from_numpy(labels.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def rank_indices(n, world, rank, epoch, seed):
    """This rank's share of epoch `epoch`: a seeded permutation, cut to a multiple of the
    world size (every rank takes the same number of steps), every world-th index."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(n, generator=g)
    usable = n - n % world
    return order[rank:usable:world]


def latest_checkpoint(folder):
    if not os.path.isdir(folder):
        return None
    names = sorted(n for n in os.listdir(folder) if n.startswith("step-") and n.endswith(".pt"))
    return os.path.join(folder, names[-1]) if names else None


def save_checkpoint(folder, step, model, optimizer, keep=2):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "step-%08d.pt" % step)
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()},
               tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)  # a checkpoint is whole or absent
    names = sorted(n for n in os.listdir(folder) if n.startswith("step-") and n.endswith(".pt"))
    for old in names[:-keep]:
        os.remove(os.path.join(folder, old))
    return path


def shut_down():
    """Ends the process group while the interpreter is whole; the caller has dropped its
    DistributedDataParallel wrapper first. The wrapper's reducer holds the group, which would
    otherwise outlive destroy_process_group and end (its gloo threads with it) during
    interpreter shutdown, where a rank aborted with "terminate called without an active
    exception" (fresh-clone CI, 2026-11-29, twice). Every rank is done with the group
    before any tears it down."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    restarts = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    attempt = os.environ.get("RINGPILOT_ATTEMPT", str(restarts + 1))
    out_dir = args.out or os.environ.get("RINGPILOT_RUN_DIR") or "runs/ddp_fashion_mnist"
    ckpt_dir = os.path.join(out_dir, "checkpoints")

    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend, init_method="env://")

    if not os.path.isfile(os.path.join(args.data, "train-images-idx3-ubyte.gz")):
        print("ddp_fashion_mnist: no Fashion-MNIST in %s (apt install dataset-fashion-mnist, or "
              "--data DIR)" % args.data, file=sys.stderr)
        return 2
    train_x, train_y = load_split(args.data, "train", args.train_samples)
    test_x, test_y = load_split(args.data, "t10k", args.test_samples)

    torch.manual_seed(args.seed)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    start_step = 0
    resumed = latest_checkpoint(ckpt_dir)
    if resumed:
        state = torch.load(resumed, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step = int(state["step"])
    ddp = DistributedDataParallel(model, device_ids=[device.index] if use_cuda else None)
    print("rank %d/%d attempt %s (TORCHELASTIC_RESTART_COUNT %d) on %s with %s: %s"
          % (rank, world, attempt, restarts, device, backend,
             "resumed from step %d (%s)" % (start_step, resumed) if resumed else "from scratch"),
          flush=True)

    preempt = {"requested": False}
    signal.signal(signal.SIGUSR1, lambda *_: preempt.update(requested=True))

    per_epoch = (len(train_x) // world) // args.batch
    if per_epoch == 0:
        print("ddp_fashion_mnist: fewer than --batch images per rank", file=sys.stderr)
        return 2
    epoch, indices = -1, None
    loss_value = float("nan")
    t0 = time.time()
    for step in range(start_step, args.steps):
        if (args.crash_rank == rank and step == args.crash_step and
                (restarts == 0 or args.crash_every_attempt)):
            print("rank %d: injected failure at step %d" % (rank, step), flush=True)
            if args.crash_exit:
                os._exit(args.crash_exit)
            os.kill(os.getpid(), signal.SIGKILL)
        # Every rank sees a SIGUSR1 by the same step (mpirun delivers it to all of them,
        # not at the same instant): stop where the first one saw it.
        stop = torch.tensor([1.0 if preempt["requested"] else 0.0], device=device)
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop.item() > 0:
            if rank == 0:
                save_checkpoint(ckpt_dir, step, model, optimizer)
            dist.barrier()
            print("rank %d: preempted: checkpoint at step %d, exit %d" % (rank, step,
                                                                            EXIT_PREEMPTED),
                  flush=True)
            del ddp  # before the group it holds: see shut_down
            shut_down()
            return EXIT_PREEMPTED
        if step // per_epoch != epoch:
            epoch = step // per_epoch
            indices = rank_indices(len(train_x), world, rank, epoch, args.seed)
        offset = (step % per_epoch) * args.batch
        batch = indices[offset:offset + args.batch]
        x, y = train_x[batch].to(device), train_y[batch].to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        optimizer.step()
        done = step + 1
        if done % args.log_every == 0 or done == args.steps:
            loss_value = loss.item()
            if rank == 0:
                print("step %d/%d loss %.4f (%.1f steps/s)"
                      % (done, args.steps, loss_value, (done - start_step) / (time.time() - t0)),
                      flush=True)
        if rank == 0 and (done % args.checkpoint_every == 0 or done == args.steps):
            save_checkpoint(ckpt_dir, done, model, optimizer)

    # Test accuracy over the whole test set: each rank a share, the counts summed.
    model.eval()
    correct = torch.zeros(2, device=device)
    with torch.no_grad():
        for i in range(rank * 500, len(test_x), world * 500):
            x, y = test_x[i:i + 500].to(device), test_y[i:i + 500].to(device)
            correct[0] += (model(x).argmax(1) == y).sum()
            correct[1] += len(y)
    dist.all_reduce(correct)
    accuracy = (correct[0] / correct[1]).item()
    if rank == 0:
        print("test accuracy %.4f on %d images after %d steps" % (accuracy, int(correct[1].item()),
                                                                  args.steps), flush=True)
        result = {"steps": args.steps, "resumed_from_step": start_step, "attempt": attempt,
                  "world_size": world, "final_loss": loss_value, "test_accuracy": accuracy}
        with open(os.path.join(out_dir, "result.json"), "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    del ddp  # before the group it holds: see shut_down
    shut_down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
