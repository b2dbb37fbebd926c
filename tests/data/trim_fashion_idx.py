#!/usr/bin/env python3
"""Copies the first N training and M test records of Fashion-MNIST's IDX files (Debian's
dataset-fashion-mnist) into OUT_DIR under the distribution's names, headers adjusted, so a
machine without the package (the GPU machine) can make the same real image folders from a
small carried copy with make_image_folder_fashion.py --source OUT_DIR.

  trim_fashion_idx.py OUT_DIR [--train N] [--test M] [--source DIR]
"""
import argparse
import gzip
import os
import struct
import sys

SOURCE = "/usr/share/datasets/fashion-mnist"


def trim(src, dst, count):
    with gzip.open(src, "rb") as f:
        data = f.read()
    magic, total = struct.unpack(">II", data[:8])
    dims = (magic & 0xFF) - 1  # sizes after the count: 2 for images, 0 for labels
    header = 8 + 4 * dims
    record = 1
    for d in struct.unpack(f">{dims}I", data[8:header]):
        record *= d
    if count > total:
        sys.exit(f"trim_fashion_idx: {src} holds {total} records, asked for {count}")
    body = data[header:header + count * record]
    with gzip.open(dst, "wb", compresslevel=9) as f:
        f.write(struct.pack(">II", magic, count) + data[8:header] + body)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train", type=int, default=2560)
    p.add_argument("--test", type=int, default=1000)
    p.add_argument("--source", default=SOURCE)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for prefix, n in (("train", a.train), ("t10k", a.test)):
        for kind in ("images-idx3", "labels-idx1"):
            name = f"{prefix}-{kind}-ubyte.gz"
            src = os.path.join(a.source, name)
            if not os.path.exists(src):
                sys.exit(f"trim_fashion_idx: {src} missing (apt-get install dataset-fashion-mnist)")
            trim(src, os.path.join(a.out, name), n)
    print(f"trim_fashion_idx: {a.train} training and {a.test} test records in {a.out}")


if __name__ == "__main__":
    main()
