#!/usr/bin/env python3
"""Writes a small real CIFAR-10-format dataset from Fashion-MNIST (Debian's
dataset-fashion-mnist: photos of clothing, 10 classes): 28x28 grey images padded to 32x32
and repeated over R, G, B; labels as they are. Real images for learning checks, no network.

  make_cifar_fashion.py OUT_DIR [--train N] [--test M] [--source DIR]

OUT_DIR gets data_batch_fashion.bin (the first N training images) and test_batch_fashion.bin
(the first M test images), the layout of cifar-10-batches-bin under names that are not the
distribution's (data_batch_1.bin must hold CIFAR-10's 10,000 records).
"""
import argparse
import gzip
import os
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        data = f.read()
    got, count = struct.unpack(">II", data[:8])
    if got != magic:
        sys.exit(f"make_cifar_fashion: {path}: not an IDX file (magic {got:#x})")
    return count, data


def convert(prefix, n, out_path, source):
    count, images = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    _, labels = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    rows, cols = struct.unpack(">II", images[8:16])
    n = min(n, count)
    side, pad = 32, (32 - rows) // 2
    with open(out_path, "wb") as out:
        for i in range(n):
            img = images[16 + i * rows * cols:16 + (i + 1) * rows * cols]
            plane = bytearray(side * side)
            for y in range(rows):
                start = (y + pad) * side + pad
                plane[start:start + cols] = img[y * cols:(y + 1) * cols]
            out.write(bytes([labels[8 + i]]) + bytes(plane) * 3)
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train", type=int, default=2000)
    p.add_argument("--test", type=int, default=500)
    p.add_argument("--source", default=SOURCE)
    a = p.parse_args()
    if not os.path.isdir(a.source):
        sys.exit(f"make_cifar_fashion: {a.source}: missing (apt-get install dataset-fashion-mnist)")
    os.makedirs(a.out, exist_ok=True)
    # What earlier versions of this script wrote there (distribution names, which must hold
    # CIFAR-10's 10,000 records each): a folder read as CIFAR would list them too. A file of
    # the distribution's size (the real CIFAR-10's) is left alone.
    for old in ("data_batch_1.bin", "test_batch.bin"):
        path = os.path.join(a.out, old)
        if os.path.isfile(path) and os.path.getsize(path) != 10000 * 3073:
            os.remove(path)
    n = convert("train", a.train, os.path.join(a.out, "data_batch_fashion.bin"), a.source)
    m = convert("t10k", a.test, os.path.join(a.out, "test_batch_fashion.bin"), a.source)
    print(f"make_cifar_fashion: {a.out}: {n} training, {m} test images")


if __name__ == "__main__":
    main()
