#!/usr/bin/env python3
"""An ImageNet-like image folder for input-pipeline benchmarks, made offline from the
natural photographs that scikit-image ships (astronaut, coffee, chelsea, rocket, ...):
each output is a random crop of one photo (30-100% of its area), resized to 500x375
(landscape) or 375x500 (portrait, 1 in 4), mirrored at random, with a small brightness and
colour shift, saved as a baseline JPEG at --quality (ImageNet's median photo is 500x375 and
its JPEGs are ~110 KB; these are ~40-70 KB at quality 90). Deterministic in --seed.

--imagenet-like makes files like ImageNet's train set instead: sizes that vary as its do
(six in ten near 500x375 or 500x333 in either orientation, a quarter smaller or squarer, one
in eight larger, up to 2500 pixels a side), the grain of real photographs (sensor noise),
qualities 90-98, so the mean file is ~120 KB (median ~90); and the odd files a real set holds: 3%
progressive, 3% greyscale, 0.5% CMYK.

  make_natural_jpegs.py OUT [--classes 100] [--per-class 60] [--quality 90] [--seed 0]
  [--val-per-class 0]   (also OUT/../val with that many per class)  [--imagenet-like]
"""
import argparse
import glob
import os
import random
import sys
from concurrent.futures import ProcessPoolExecutor

from PIL import Image, ImageEnhance

try:
    import numpy as np
except ImportError:  # only --imagenet-like needs it
    np = None


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


def imagenet_like_size(rng):
    """(width, height) drawn to vary as ImageNet's train images do."""
    r = rng.random()
    if r < 0.60:
        long_side, short_side = 500, rng.choice((375, 333, 375, 375, 334))
    elif r < 0.87:
        short_side = rng.randint(250, 500)
        long_side = int(short_side * rng.choice((4 / 3, 3 / 2, 1.0, 16 / 9, 5 / 4)))
    elif r < 0.97:
        long_side = rng.randint(600, 1200)
        short_side = int(long_side / rng.choice((4 / 3, 3 / 2, 16 / 9)))
    else:
        long_side = rng.randint(1200, 2500)
        short_side = int(long_side / rng.choice((4 / 3, 3 / 2)))
    return (long_side, short_side) if rng.random() < 0.75 else (short_side, long_side)


def make_imagenet_like(path, rng):
    im = rng.choice(PHOTOS)
    size = imagenet_like_size(rng)
    w, h = im.size
    # A random part of the photo at the target's aspect, resized to the target.
    aspect = size[0] / size[1]
    cw = min(w, int((rng.uniform(0.3, 1.0) * w * h * aspect) ** 0.5))
    ch = min(h, max(1, int(cw / aspect)))
    cw = min(cw, int(ch * aspect))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    out = im.crop((x, y, x + cw, y + ch)).resize(size, Image.BICUBIC)
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    out = ImageEnhance.Brightness(out).enhance(rng.uniform(0.7, 1.3))
    out = ImageEnhance.Color(out).enhance(rng.uniform(0.6, 1.4))
    # Sensor grain: photographs are never as smooth as an upscaled crop.
    pixels = np.asarray(out, dtype=np.float32)
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(4.0, 8.0), pixels.shape)
    out = Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8))
    kind = rng.random()
    args = dict(quality=rng.randint(90, 98), subsampling=2 if rng.random() < 0.9 else 0)
    if kind < 0.03:
        out = out.convert("L")
    elif kind < 0.06:
        args["progressive"] = True
    elif kind < 0.065:
        out = out.convert("CMYK")
    out.save(path, "JPEG", **args)
    return os.path.getsize(path)


def make(job):
    path, seed, quality, imagenet_like = job
    global PHOTOS
    if PHOTOS is None:
        PHOTOS = sources()
    rng = random.Random(seed)
    if imagenet_like:
        return make_imagenet_like(path, rng)
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
    p.add_argument("--imagenet-like", action="store_true")
    a = p.parse_args()
    if a.imagenet_like and np is None:
        sys.exit("make_natural_jpegs: --imagenet-like needs numpy")
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
                             ((a.seed * 1000003 + (split == "val")) * 1000003 + c) * 1000003 + i, a.quality,
                             a.imagenet_like))
    with ProcessPoolExecutor() as pool:
        sizes = list(pool.map(make, jobs, chunksize=64))
    what = "ImageNet-like" if a.imagenet_like else f"quality {a.quality}"
    print(f"make_natural_jpegs: {len(sizes)} JPEGs, mean {sum(sizes) / len(sizes) / 1024:.1f} KB, "
          f"{what}, under {a.out}")


if __name__ == "__main__":
    main()
