#!/usr/bin/env python3
"""Splits an image folder into one folder per JPEG class (sampling, coding, size), hard
links to the same files, for timing nvJPEG on each class apart (which kind of file is slow
on the JPEG engines). Prints the classes and their counts.

  jpeg_classes.py SRC OUT"""
import os
import sys

from PIL import Image, JpegImagePlugin


def klass(path):
    im = Image.open(path)
    if im.format != "JPEG":
        return "other"
    coding = "progressive" if im.info.get("progressive") or im.info.get("progression") else "baseline"
    if im.mode == "L":
        sampling = "grey"
    elif im.mode == "CMYK":
        sampling = "cmyk"
    else:
        sampling = {0: "444", 1: "422", 2: "420"}.get(JpegImagePlugin.get_sampling(im), "other")
    pixels = im.size[0] * im.size[1]
    size = "small" if pixels <= 250_000 else "mid" if pixels <= 1_000_000 else "large"
    return f"{coding}_{sampling}_{size}"


def main():
    src, out = sys.argv[1], sys.argv[2]
    counts = {}
    for cls_dir in sorted(os.listdir(src)):
        for name in sorted(os.listdir(os.path.join(src, cls_dir))):
            path = os.path.join(src, cls_dir, name)
            k = klass(path)
            # One class folder per JPEG class: a folder set of one class for the bench.
            d = os.path.join(out, k, "c0")
            os.makedirs(d, exist_ok=True)
            os.link(path, os.path.join(d, f"{cls_dir}_{name}"))
            counts[k] = counts.get(k, 0) + 1
    for k, n in sorted(counts.items()):
        print(f"jpeg_classes: {k} {n}")


if __name__ == "__main__":
    main()
