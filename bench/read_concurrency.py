#!/usr/bin/env python3
"""How fast many threads read the samples of an image set, without decoding: from the
folder's files (open + pread + close each, as data/image_folder.cpp) and from tar shards
packed from it (pread at the member's offset on one shared descriptor per shard, as
data/image_shards.cpp), and from the shards with a descriptor per thread. Tells whether a
shared descriptor serialises reads on the machine (issue: image_shards trailing
image_folder with the same decoder). Page cache warmed by one pass first.

  read_concurrency.py FOLDER SHARD.tar[,SHARD.tar...] [--threads 15] [--passes 3]
Prints one JSON line."""
import argparse
import json
import os
import tarfile
import threading
import time


def folder_files(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names if n.lower().endswith((".jpg", ".jpeg", ".png"))]
    return sorted(out)


def shard_members(paths):
    out = []
    for i, p in enumerate(paths):
        with tarfile.open(p) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.lower().endswith((".jpg", ".jpeg", ".png")):
                    out.append((i, m.offset_data, m.size))
    return out


def run(threads, items, read_one):
    lock = threading.Lock()
    nxt = [0]
    total = [0]

    def work():
        local = 0
        while True:
            with lock:
                k = nxt[0]
                nxt[0] += 1
            if k >= len(items):
                break
            local += read_one(items[k])
        with lock:
            total[0] += local

    ts = [threading.Thread(target=work) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    return len(items) / dt, total[0] / dt / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("shards")
    ap.add_argument("--threads", type=int, default=15)
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    files = folder_files(a.folder)
    paths = a.shards.split(",")
    members = shard_members(paths)
    shared = [os.open(p, os.O_RDONLY) for p in paths]
    local = threading.local()

    def read_file(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            return len(os.pread(fd, os.fstat(fd).st_size, 0))
        finally:
            os.close(fd)

    def read_shared(m):
        return len(os.pread(shared[m[0]], m[2], m[1]))

    def read_own(m):
        fds = getattr(local, "fds", None)
        if fds is None:
            fds = local.fds = [os.open(p, os.O_RDONLY) for p in paths]
        return len(os.pread(fds[m[0]], m[2], m[1]))

    for f in files:
        read_file(f)
    row = {"what": "read_concurrency", "threads": a.threads, "files": len(files),
           "members": len(members)}
    for name, items, fn in (("folder", files, read_file), ("shards_shared_fd", members, read_shared),
                            ("shards_fd_per_thread", members, read_own)):
        best = max(run(a.threads, items, fn) for _ in range(a.passes))
        row[name + "_per_s"] = round(best[0])
        row[name + "_mb_s"] = round(best[1])
    print(json.dumps(row))


if __name__ == "__main__":
    main()
