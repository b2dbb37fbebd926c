#!/usr/bin/env python3
"""Fails when a project file includes a header of a room it may not depend on.

The rooms and their allowed dependencies are docs/architecture.md's table: every arrow
points down. Run by the build (target ringpilot_layering, part of `all`) and by ctest
(lint.layering), so an upward include fails both. Tests and benchmarks may include any room.
"""
import pathlib
import re
import subprocess
import sys

# room -> rooms it may include (besides itself). A trainer sub-room is "trainer/<name>".
ALLOWED = {
    "base": set(),
    "config": {"base"},
    "history": {"base"},
    "data": {"base"},
    "data/cuda": {"data", "base"},
    "topology": {"base"},
    "metrics": {"topology", "base"},
    "comm": {"base"},
    "nccl_profiler": {"history", "metrics", "comm", "base"},
    "slurm": {"config", "base"},
    "k8s": {"config", "base"},
    "mpirun": {"base"},
    "doctor": {"mpirun", "config", "topology", "metrics", "base"},
    "diagnose": {"history", "metrics", "topology", "comm", "base"},
    "commbench": {"mpirun", "comm", "topology", "base"},
    "launcher": {"history", "mpirun", "slurm", "config", "base"},
    "trainer/ops": {"comm", "base"},
    "trainer/models": {"trainer/ops", "comm", "config", "base"},
    "trainer/checkpoint": {"comm", "base"},
    "trainer/telemetry": {"history", "comm", "metrics", "topology", "config", "base"},
    "trainer/input": {"data", "data/cuda", "trainer/models", "trainer/telemetry", "history", "topology",
                      "config", "base"},
    "trainer/startup": {"trainer/telemetry", "comm", "topology", "config", "base"},
    "trainer/step": {"trainer/startup", "trainer/input", "trainer/models", "trainer/checkpoint",
                     "trainer/telemetry", "trainer/ops", "comm", "config", "base"},
    "trainer": {"data", "data/cuda", "trainer/step", "trainer/startup", "trainer/input", "trainer/ops", "trainer/models", "trainer/checkpoint", "trainer/telemetry",
                "history", "comm", "metrics", "topology", "config", "base"},
    "cli": {"launcher", "doctor", "diagnose", "commbench", "slurm", "k8s", "mpirun",
            "history", "topology", "metrics", "comm", "data", "config", "base"},
}
UNCHECKED = {"tests", "bench", "cmake", "deploy", "docs", "examples", "scripts"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room(path):
    parts = path.split("/")
    if parts[0] in ("trainer", "data") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.h", "*.cpp", "*.cu", "*.cuh"], cwd=root,
                           capture_output=True, text=True, check=False).stdout.split()
    if not files:  # not a git checkout (a source tarball): every file on disk
        files = [str(p.relative_to(root)) for ext in ("h", "cpp", "cu", "cuh")
                 for p in root.rglob("*." + ext)
                 if not any(part.startswith((".", "build")) for part in p.relative_to(root).parts)]
    bad = 0
    for f in sorted(files):
        mine = room(f)
        if mine in UNCHECKED or "/" not in f:
            continue
        if mine not in ALLOWED:
            print(f"check_layering: {f}: room '{mine}' is not in the table "
                  "(scripts/check_layering.py, docs/architecture.md)")
            bad += 1
            continue
        text = (root / f).read_text(errors="replace")
        for inc in INCLUDE.findall(text):
            if "/" not in inc:
                continue
            theirs = room(inc)
            if theirs != mine and theirs not in ALLOWED[mine] and theirs in ALLOWED:
                line = text[:text.find(inc)].count("\n") + 1
                print(f"{f}:{line}: includes {inc}: room '{mine}' may not depend on "
                      f"'{theirs}' (allowed: {', '.join(sorted(ALLOWED[mine])) or 'nothing'})")
                bad += 1
    if bad:
        return 1
    print(f"check_layering: {len(files)} files ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
