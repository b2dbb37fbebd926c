#!/usr/bin/env python3
"""Writes an image folder with one class per kind of file a real image set holds, from the
natural photographs scikit-image ships (crops of astronaut, coffee, chelsea, ...), for the
GPU image pipeline's test (tests/data/cuda_image_pipeline_test.cpp):
  baseline JPEGs at 4:2:0, 4:2:2 and 4:4:4, odd sizes and a large one, greyscale (also with
  2x2 sampling factors on its one component),
  progressive (colour and grey), CMYK, and PNG;
and, with --bad, a second folder OUT-bad whose class "bad" holds a truncated JPEG and a
file that is no image, beside a class of good ones.

  make_jpeg_kinds.py OUT [--per-kind 6] [--bad]
Needs Pillow and scikit-image (both on the GPU machines)."""
import argparse
import glob
import io
import os
import random
import sys

from PIL import Image


def photos():
    import skimage
    root = os.path.join(os.path.dirname(skimage.__file__), "data")
    out = []
    for path in sorted(glob.glob(os.path.join(root, "*.png")) + glob.glob(os.path.join(root, "*.jpg"))):
        try:
            im = Image.open(path)
            im.load()
        except Exception:
            continue
        if im.mode == "RGB" and min(im.size) >= 256:
            out.append(im)
    if not out:
        sys.exit("make_jpeg_kinds: no colour photographs under " + root)
    return out


KINDS = [
    # name, size, mode, save arguments
    ("k0_baseline420", (500, 375), "RGB", dict(format="JPEG", quality=90, subsampling=2)),
    ("k1_baseline422", (500, 375), "RGB", dict(format="JPEG", quality=90, subsampling=1)),
    ("k2_baseline444", (375, 500), "RGB", dict(format="JPEG", quality=95, subsampling=0)),
    ("k3_odd_size", (333, 251), "RGB", dict(format="JPEG", quality=85, subsampling=2)),
    ("k4_large", (1600, 1200), "RGB", dict(format="JPEG", quality=92, subsampling=2)),
    ("k5_grey", (500, 375), "L", dict(format="JPEG", quality=90)),
    # A lone Y with 2x2 sampling factors (Pillow writes it when asked for 4:2:0).
    ("k5_grey_sampled", (500, 334), "L", dict(format="JPEG", quality=92, subsampling=2)),
    ("k6_progressive", (500, 375), "RGB", dict(format="JPEG", quality=90, progressive=True)),
    ("k7_progressive_grey", (500, 333), "L", dict(format="JPEG", quality=90, progressive=True)),
    ("k8_cmyk", (400, 300), "CMYK", dict(format="JPEG", quality=90)),
    ("k9_png", (320, 240), "RGB", dict(format="PNG")),
]


def image(rng, sources, size):
    im = rng.choice(sources)
    w, h = im.size
    cw = rng.randint(w // 2, w)
    ch = min(h, int(cw * size[1] / size[0]))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    return im.crop((x, y, x + cw, y + ch)).resize(size, Image.BILINEAR)


def encoded(im, mode, args):
    buf = io.BytesIO()
    im.convert(mode).save(buf, **args)
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--per-kind", type=int, default=6)
    p.add_argument("--bad", action="store_true")
    a = p.parse_args()
    rng = random.Random(7)
    sources = photos()
    for name, size, mode, args in KINDS:
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        ext = "png" if args["format"] == "PNG" else "jpg"
        for i in range(a.per_kind):
            with open(os.path.join(d, f"{i:03d}.{ext}"), "wb") as f:
                f.write(encoded(image(rng, sources, size), mode, args))
    if a.bad:
        root = a.out.rstrip("/") + "-bad"
        good, bad = os.path.join(root, "good"), os.path.join(root, "bad")
        os.makedirs(good, exist_ok=True)
        os.makedirs(bad, exist_ok=True)
        for i in range(6):
            with open(os.path.join(good, f"{i:03d}.jpg"), "wb") as f:
                f.write(encoded(image(rng, sources, (500, 375)), "RGB", KINDS[0][3]))
        whole = encoded(image(rng, sources, (500, 375)), "RGB", KINDS[0][3])
        with open(os.path.join(bad, "truncated.jpg"), "wb") as f:
            f.write(whole[: len(whole) // 2])
        with open(os.path.join(bad, "not_an_image.jpg"), "wb") as f:
            f.write(b"this is a text file, not a JPEG\n" * 20)
    print(f"make_jpeg_kinds: {len(KINDS)} kinds x {a.per_kind} under {a.out}")


if __name__ == "__main__":
    main()
