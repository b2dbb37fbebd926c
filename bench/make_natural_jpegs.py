#!/usr/bin/env python3
"""An ImageNet-like image folder for input-pipeline benchmarks, made offline from the
natural photographs that scikit-image ships (astronaut, coffee, chelsea, rocket, ...):
each output is a random crop of one photo (30-100% of its area), resized to 500x375
(landscape) or 375x500 (portrait, 1 in 4), mirrored at random, with a small brightness and
colour shift, saved as a baseline JPEG at --quality (ImageNet's median photo is 500x375 and
its JPEGs are ~110 KB; these are ~40-70 KB at quality 90). Deterministic in --seed.

  make_natural_jpegs.py OUT [--classes 100] [--per-class 60] [--quality 90] [--seed 0]
  [--val-per-class 0]   (also OUT/../val with that many per class)
"""
import argparse
import glob
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor

from PIL import Image, ImageEnhance


def sources():
    import skimage
    root = os.path.join(os.path.dirname(skimage.__file__), "data")
    out = []
    for path in sorted(glob.glob(os.path.join(root, "*.png")) + glob.glob(os.path.join(root, "*.jpg"))):
        try:
            im = Image.open(path)
            im.load()
        except Exception:
            continue
        if im.mode != "RGB" or min(im.size) < 256:
            continue
        out.append(im)
    if not out:
        sys.exit("make_natural_jpegs: no colour photographs under " + root)
    return out


PHOTOS = None


def make(job):
    path, seed, quality = job
    global PHOTOS
    if PHOTOS is None:
        PHOTOS = sources()
    rng = random.Random(seed)
    im = rng.choice(PHOTOS)
    w, h = im.size
    area = rng.uniform(0.3, 1.0) * w * h
    portrait = rng.random() < 0.25
    ratio = 375 / 500 if not portrait else 500 / 375
    cw = min(w, int((area / ratio) ** 0.5))
    ch = min(h, int(cw * ratio))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    out = im.crop((x, y, x + cw, y + ch)).resize((375, 500) if portrait else (500, 375), Image.BILINEAR)
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    out = ImageEnhance.Brightness(out).enhance(rng.uniform(0.7, 1.3))
    out = ImageEnhance.Color(out).enhance(rng.uniform(0.6, 1.4))
    out.save(path, "JPEG", quality=quality)
    return os.path.getsize(path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--per-class", type=int, default=60)
    p.add_argument("--val-per-class", type=int, default=0)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    jobs = []
    for split, per in (("train", a.per_class), ("val", a.val_per_class)):
        if per == 0:
            continue
        root = a.out if split == "train" else os.path.join(os.path.dirname(os.path.abspath(a.out)), "val")
        for c in range(a.classes):
            d = os.path.join(root, f"n{c:08d}")
            os.makedirs(d, exist_ok=True)
            for i in range(per):
                jobs.append((os.path.join(d, f"{split}_{c:04d}_{i:05d}.JPEG"),
                             ((a.seed * 1000003 + (split == "val")) * 1000003 + c) * 1000003 + i, a.quality))
    with ProcessPoolExecutor() as pool:
        sizes = list(pool.map(make, jobs, chunksize=64))
    print(f"make_natural_jpegs: {len(sizes)} JPEGs, mean {sum(sizes) / len(sizes) / 1024:.1f} KB, "
          f"quality {a.quality}, under {a.out}")


if __name__ == "__main__":
    main()
