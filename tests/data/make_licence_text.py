#!/usr/bin/env python3
"""Real English text for the token tests: the licence texts Debian installs in
/usr/share/common-licenses (base-files), split into unique paragraphs ("documents": a
paragraph of over 40 characters, whitespace collapsed, each kept once, files in name order,
links skipped).

Two layouts:
  make_licence_text.py OUT --hold-out-every 10
      OUT/train.txt and OUT/val.txt: every 10th paragraph (index 3, 13, ...) held out;
      paragraphs end with a blank line.
  make_licence_text.py OUT --corpus --train-chars 8000 --val-chars 2500
      OUT/corpus.txt (every paragraph, for spm_train), OUT/train.txt (the first paragraphs
      up to at least 8000 characters) and OUT/val.txt (the next, up to at least 2500);
      paragraphs separated by a blank line.
"""
import argparse
import os
import sys

ROOT = "/usr/share/common-licenses"


def paragraphs(root=ROOT):
    seen, out = set(), []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for p in text.split("\n\n"):
            p = " ".join(p.split())
            if len(p) > 40 and p not in seen:
                seen.add(p)
                out.append(p)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--hold-out-every", type=int, default=0)
    ap.add_argument("--corpus", action="store_true")
    ap.add_argument("--train-chars", type=int, default=8000)
    ap.add_argument("--val-chars", type=int, default=2500)
    args = ap.parse_args()
    if not os.path.isdir(ROOT):
        sys.exit(f"make_licence_text: {ROOT} missing (Debian base-files)")
    if (args.hold_out_every > 0) == args.corpus:
        sys.exit("make_licence_text: give one of --hold-out-every N and --corpus")
    docs = paragraphs()
    os.makedirs(args.out, exist_ok=True)
    path = lambda name: os.path.join(args.out, name)  # noqa: E731
    if args.hold_out_every > 0:
        with open(path("train.txt"), "w") as t, open(path("val.txt"), "w") as v:
            for i, p in enumerate(docs):
                (v if i % args.hold_out_every == 3 else t).write(p + "\n\n")
        return
    with open(path("corpus.txt"), "w") as f:
        f.write("\n\n".join(docs) + "\n")

    def take(first, chars, name):
        text, i = [], first
        while sum(len(t) for t in text) < chars:
            text.append(docs[i])
            i += 1
        with open(path(name), "w") as f:
            f.write("\n\n".join(text) + "\n")
        return i

    take(take(0, args.train_chars, "train.txt"), args.val_chars, "val.txt")


if __name__ == "__main__":
    main()
