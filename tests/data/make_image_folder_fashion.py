#!/usr/bin/env python3
"""Writes a small real image folder (data.kind image_folder's layout) from Fashion-MNIST
(Debian's dataset-fashion-mnist: photos of clothing, 10 classes): OUT/train/classK/N.png and
OUT/val/classK/N.png, 28x28 greyscale PNGs (zlib only: no imaging library needed). Real
images for learning checks, no network.

  make_image_folder_fashion.py OUT_DIR [--train N] [--val M] [--source DIR]
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

SOURCE = "/usr/share/datasets/fashion-mnist"


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        data = f.read()
    got, count = struct.unpack(">II", data[:8])
    if got != magic:
        sys.exit(f"make_image_folder_fashion: {path}: not an IDX file (magic {got:#x})")
    return count, data


def png(width, height, grey):
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + grey[y * width:(y + 1) * width] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows, 6)) +
            chunk(b"IEND", b""))


def convert(prefix, n, out_dir, source):
    count, images = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"), 0x803)
    _, labels = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"), 0x801)
    rows, cols = struct.unpack(">II", images[8:16])
    n = min(n, count)
    for c in range(10):
        os.makedirs(os.path.join(out_dir, f"class{c}"), exist_ok=True)
    for i in range(n):
        img = images[16 + i * rows * cols:16 + (i + 1) * rows * cols]
        path = os.path.join(out_dir, f"class{labels[8 + i]}", f"{i:05d}.png")
        with open(path, "wb") as f:
            f.write(png(cols, rows, img))
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train", type=int, default=3000)
    p.add_argument("--val", type=int, default=1000)
    p.add_argument("--source", default=SOURCE)
    a = p.parse_args()
    t = convert("train", a.train, os.path.join(a.out, "train"), a.source)
    v = convert("t10k", a.val, os.path.join(a.out, "val"), a.source)
    print(f"make_image_folder_fashion: {t} training and {v} validation PNGs in {a.out}")


if __name__ == "__main__":
    main()
