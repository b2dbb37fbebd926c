"""Peer baseline on CPU: stock PyTorch DDP (Python, gloo) training ringpilot's CPU models.

The same models and maths as ringpilot-trainer (trainer/models/resnet.cpp, trainer/models/bert.cpp), the
same kind of synthetic batch made on the CPU every step (trainer/synthetic_data.cpp), the
same optimizers (SGD with momentum for ResNet, AdamW for BERT) and DDP's stock reducer with
the bucket sizes ringpilot uses by default (25 MiB cap, 1 MiB first bucket). Launch it with
torchrun from the repository's venv, one thread per rank:

  .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
      bench/peer_cpu_ddp.py --model resnet18-cifar --batch 16 --steps 29 --warmup 1
  .venv/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \\
      bench/peer_cpu_ddp.py --model bert-tiny --batch 16 --steps 199 --warmup 1

Prints one line on rank 0:  PEER {json}
Fields: model, world, batch_per_rank, steps (timed), warmup, threads, parameters,
steps_per_second, samples_per_second (all ranks), step_ms_p50, step_ms_p99, final_loss,
optimizer (the implementation torch.optim picked), torch.

--phases adds a per-step breakdown (data, forward, backward (DDP all-reduce included,
it overlaps backward), optimizer) as phase_ms_p50; the extra timestamps cost nothing
measurable on CPU, where every op is synchronous.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--model", default="resnet18-cifar", choices=["resnet18-cifar", "bert-tiny"])
p.add_argument("--batch", type=int, default=16, help="samples per rank per step")
p.add_argument("--steps", type=int, default=29, help="timed steps")
p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
p.add_argument("--lr", type=float, default=None, help="default: 0.02 (sgd), 1e-4 (adamw)")
p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--weight-decay", type=float, default=0.0)
p.add_argument("--seq-len", type=int, default=128)
p.add_argument("--dropout", type=float, default=0.1)
p.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
p.add_argument("--bucket-mb", type=float, default=25.0)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--phases", action="store_true", help="report per-phase medians")
a = p.parse_args()

torch.set_num_threads(a.threads)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()

# ---------------------------------------------------------------------------------------
# ResNet-18, CIFAR variant (torchvision's BasicBlock ResNet with a 3x3 stride-1 stem and no
# max-pool), as trainer/models/resnet.cpp builds it.


class BasicBlock(nn.Module):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class ResNet18Cifar(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        layers, inp = [], 64
        for stage in range(4):
            planes = 64 << stage
            blocks = []
            for b in range(2):
                blocks.append(BasicBlock(inp, planes, 2 if (b == 0 and stage > 0) else 1))
                inp = planes
            layers.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def loss(self, x, y):
        h = self.relu(self.bn1(self.conv1(x)))
        h = self.layer4(self.layer3(self.layer2(self.layer1(h))))
        logits = self.fc(torch.flatten(self.avgpool(h), 1))
        return F.cross_entropy(logits.float(), y)

    def forward(self, x, y):
        return self.loss(x, y)


# ---------------------------------------------------------------------------------------
# BERT MLM (Hugging Face's maths: post-LN, exact GELU, tied decoder, SDPA attention), with
# the MLM head on the masked positions only, as trainer/models/bert.cpp does.


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter, dropout, eps):
        super().__init__()
        self.heads, self.p = heads, dropout
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, inter)
        self.output = nn.Linear(inter, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, l, h = x.shape
        d = h // self.heads
        split = lambda t: t.view(b, l, self.heads, d).transpose(1, 2)
        ctx = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)),
                                             split(self.value(x)),
                                             dropout_p=self.p if self.training else 0.0)
        ctx = ctx.transpose(1, 2).reshape(b, l, h)
        a = self.attn_norm(self.dropout(self.attn_out(ctx)) + x)
        f = self.output(F.gelu(self.intermediate(a)))
        return self.output_norm(self.dropout(f) + a)


class BertTinyMLM(nn.Module):
    def __init__(self, vocab=30522, hidden=128, layers=2, heads=2, inter=512, positions=512,
                 dropout=0.1, eps=1e-12):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.embeddings_norm = nn.LayerNorm(hidden, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            [BertLayer(hidden, heads, inter, dropout, eps) for _ in range(layers)])
        self.head_transform = nn.Linear(hidden, hidden)
        self.head_norm = nn.LayerNorm(hidden, eps=eps)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))
        # Hugging Face's initialisation, as bert.cpp: N(0, 0.02), zero biases, LN (1, 0).
        with torch.no_grad():
            for name, prm in self.named_parameters():
                if "norm" in name:
                    prm.fill_(1.0) if name.endswith("weight") else prm.zero_()
                elif name.endswith("bias"):
                    prm.zero_()
                else:
                    prm.normal_(0.0, 0.02)

    def forward(self, ids, target):
        l = ids.shape[1]
        pos = torch.arange(l)
        x = (self.word_embeddings(ids) + self.position_embeddings(pos).unsqueeze(0)
             + self.token_type_embeddings.weight[0])
        x = self.dropout(self.embeddings_norm(x))
        for layer in self.encoder:
            x = layer(x)
        masked = target.ne(-100)  # rows in (sample, position) order, like bert.cpp's gather
        rows, labels = x[masked], target[masked]
        t = self.head_norm(F.gelu(self.head_transform(rows)))
        logits = F.linear(t, self.word_embeddings.weight, self.decoder_bias)
        return F.cross_entropy(logits.float(), labels)


# ---------------------------------------------------------------------------------------
# Synthetic batches, made on the CPU every step from (seed, step, rank): the same shapes,
# dtypes and statistics as trainer/synthetic_data.cpp (not bit-identical).

VOCAB, FIRST_WORD, CLS, SEP, MASK = 30522, 1000, 101, 102, 103


class Images:
    def __init__(self, batch, num_classes=10, hw=32):
        self.batch, self.num_classes = batch, num_classes
        g = torch.Generator().manual_seed(a.seed)
        # Per-class plane wave per channel: sin(fx*x + fy*y + phase).
        f = 0.05 + 0.4 * torch.rand(num_classes, 3, 2, generator=g)
        phase = 2 * math.pi * torch.rand(num_classes, 3, 1, 1, generator=g)
        ys, xs = torch.meshgrid(torch.arange(hw, dtype=torch.float32),
                                torch.arange(hw, dtype=torch.float32), indexing="ij")
        self.pattern = torch.sin(f[..., 0, None, None] * xs + f[..., 1, None, None] * ys + phase)
        self.shape = (batch, 3, hw, hw)

    def __call__(self, g):
        labels = torch.randint(0, self.num_classes, (self.batch,), generator=g)
        noise = torch.rand(self.shape, generator=g) + torch.rand(self.shape, generator=g) - 1.0
        img = (128.0 + 70.0 * self.pattern[labels] + 50.0 * noise).clamp_(0, 255).to(torch.uint8)
        # What the model sees: NormalizeImages, (x - 128) / 64 in float32.
        return img.to(torch.float32).sub_(128.0).mul_(1.0 / 64.0), labels


class Tokens:
    def __init__(self, batch, seq_len, mask_fraction=0.15):
        self.batch, self.len = batch, seq_len
        self.body = seq_len - 2
        self.masked = max(1, round(mask_fraction * self.body))

    def __call__(self, g):
        b, body, rng = self.batch, self.body, VOCAB - FIRST_WORD
        start = torch.randint(0, rng, (b, 1), generator=g)
        stride = torch.randint(1, 8, (b, 1), generator=g)
        ids = torch.empty(b, self.len, dtype=torch.long)
        ids[:, 0], ids[:, -1] = CLS, SEP
        ids[:, 1:-1] = FIRST_WORD + (start + torch.arange(body) * stride) % rng
        # Exactly `masked` positions per row, uniformly chosen among 1..len-2.
        pos = 1 + torch.rand(b, body, generator=g).argsort(dim=1)[:, :self.masked]
        target = torch.full_like(ids, -100)
        target.scatter_(1, pos, ids.gather(1, pos))
        ids.scatter_(1, pos, MASK)
        return ids, target


# ---------------------------------------------------------------------------------------

torch.manual_seed(a.seed)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
if a.model == "resnet18-cifar":
    model, data = ResNet18Cifar(), Images(a.batch)
    lr = 0.02 if a.lr is None else a.lr
    make_opt = lambda ps: torch.optim.SGD(ps, lr=lr, momentum=a.momentum,
                                          weight_decay=a.weight_decay)
else:
    model, data = BertTinyMLM(dropout=a.dropout), Tokens(a.batch, a.seq_len)
    lr = 1e-4 if a.lr is None else a.lr
    make_opt = lambda ps: torch.optim.AdamW(ps, lr=lr, weight_decay=a.weight_decay)
nparams = sum(prm.numel() for prm in model.parameters())
model.train()
ddp = nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True,
                                          bucket_cap_mb=a.bucket_mb)
opt = make_opt(ddp.parameters())
d = opt.defaults
opt_impl = "fused" if d.get("fused") else ("foreach" if d.get("foreach") else
                                           "default (for-loop on CPU)")
torch.manual_seed(a.seed * 1000003 + 17 * rank + 1)  # per-rank dropout stream


def step(i, phases=None):
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed((a.seed * 1000003 + i) * world + rank)
    x, y = data(g)
    t1 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = ddp(x, y)
    t2 = time.perf_counter()
    loss.backward()
    t3 = time.perf_counter()
    opt.step()
    t4 = time.perf_counter()
    if phases is not None:
        phases.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
    return loss


for i in range(a.warmup):
    step(i)
dist.barrier()
times, phases = [], [] if a.phases else None
start = time.perf_counter()
for i in range(a.warmup, a.warmup + a.steps):
    t = time.perf_counter()
    loss = step(i, phases)
    times.append(time.perf_counter() - t)
wall = time.perf_counter() - start
final = torch.tensor([loss.item()], dtype=torch.float64)
dist.all_reduce(final)


def pct(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


if rank == 0:
    out = {
        "model": a.model, "world": world, "batch_per_rank": a.batch, "steps": a.steps,
        "warmup": a.warmup, "threads": torch.get_num_threads(), "parameters": nparams,
        "steps_per_second": round(a.steps / wall, 4),
        "samples_per_second": round(a.steps * a.batch * world / wall, 2),
        "step_ms_p50": round(pct(times, 0.5) * 1e3, 2),
        "step_ms_p99": round(pct(times, 0.99) * 1e3, 2),
        "final_loss": round(final.item() / world, 4),
        "optimizer": type(opt).__name__ + " " + opt_impl,
        "torch": torch.__version__,
    }
    if phases:
        names = ("data", "forward", "backward_and_allreduce", "optimizer")
        out["phase_ms_p50"] = {n: round(pct([ph[k] for ph in phases], 0.5) * 1e3, 2)
                               for k, n in enumerate(names)}
    print("PEER " + json.dumps(out), flush=True)
# Leave together: a rank tearing gloo down while its peer is still in a collective aborts
# ("terminate called without an active exception").
dist.barrier()
del ddp
dist.destroy_process_group()
