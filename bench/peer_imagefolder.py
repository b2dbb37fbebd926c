#!/usr/bin/env python3
"""The stock PyTorch peer of ringpilot's image input: torchvision ImageFolder + DataLoader
(num_workers = all cores, pin_memory, persistent workers) + PIL RandomResizedCrop(224),
RandomHorizontalFlip, ToTensor, Normalize, feeding torchvision's ResNet-50 in bf16 autocast,
channels_last, fused SGD: what a user writes from the PyTorch ImageNet example. One GPU.

  peer_imagefolder.py ROOT [--batch 256] [--steps 50] [--warmup 10] [--workers N]
                      [--loader-only]   (the input pipeline alone: batches to the GPU, no model)
Prints one line: PEER {json}.
"""
import argparse
import json
import os
import time

import torch
import torchvision
from torchvision import transforms

p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--batch", type=int, default=256)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--workers", type=int, default=os.cpu_count())
p.add_argument("--loader-only", action="store_true")
a = p.parse_args()

torch.backends.cudnn.benchmark = True
normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
dataset = torchvision.datasets.ImageFolder(a.root, transforms.Compose([
    transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
    normalize]))
loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch, shuffle=True, drop_last=True,
                                     num_workers=a.workers, pin_memory=True,
                                     persistent_workers=True, prefetch_factor=4)
model = torchvision.models.resnet50(num_classes=len(dataset.classes)).cuda().to(
    memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, fused=True)


def batches():
    while True:
        for x, y in loader:
            yield x, y


it = batches()
done = 0
start = None
for i in range(a.warmup + a.steps):
    if i == a.warmup:
        torch.cuda.synchronize()
        start = time.time()
    x, y = next(it)
    x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
    y = y.cuda(non_blocking=True)
    if not a.loader_only:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
torch.cuda.synchronize()
wall = time.time() - start
print("PEER " + json.dumps({
    "what": "loader" if a.loader_only else "resnet50", "images": len(dataset),
    "batch": a.batch, "workers": a.workers, "steps": a.steps,
    "img_per_s": round(a.steps * a.batch / wall, 1)}), flush=True)
