#!/usr/bin/env python3
"""GPU clocks and power while a benchmark runs, for bench_train.sh rows.

  gpu_watch.py fields SMI_CSV GPUS   the fields below as one JSON object
  gpu_watch.py merge SMI_CSV GPUS    a JSON row on stdin, those fields added, on stdout

SMI_CSV: `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,clocks.sm,power.draw,
<reason>.sw_power_cap --format=csv,noheader,nounits -lms 200` output; GPUS: the physical
indices the run used ("0 1"). Only busy samples count (utilization >= 80%: the timed
steps, not start-up). Fields:
  sm_clock_mhz        the lowest per-GPU median SM clock (a synchronised step goes at the
                      slowest GPU's pace)
  power_w             the highest per-GPU median board power
  power_capped_share  the highest per-GPU share of busy samples with the software power
                      cap active (clocks lowered to stay inside the power limit)
Each is null when no busy sample was taken (a run shorter than the sampling period).
"""
import json
import statistics
import sys

BUSY_UTILIZATION = 80.0


def busy_samples(path, gpus):
    per_gpu = {g: [] for g in gpus}
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return per_gpu
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 6:
            continue
        try:
            gpu, util, clock, power = int(cells[1]), float(cells[2]), float(cells[3]), float(cells[4])
        except ValueError:  # a header, "[N/A]", or a line cut short when the watcher stopped
            continue
        if gpu in per_gpu and util >= BUSY_UTILIZATION:
            per_gpu[gpu].append((clock, power, cells[5].lower() == "active"))
    return per_gpu


def fields(path, gpus):
    per_gpu = {g: s for g, s in busy_samples(path, gpus).items() if s}
    if not per_gpu:
        return {"sm_clock_mhz": None, "power_w": None, "power_capped_share": None}
    return {
        "sm_clock_mhz": min(statistics.median(c for c, _, _ in s) for s in per_gpu.values()),
        "power_w": max(statistics.median(p for _, p, _ in s) for s in per_gpu.values()),
        "power_capped_share": max(sum(cap for _, _, cap in s) / len(s) for s in per_gpu.values()),
    }


def main(argv):
    if len(argv) != 4 or argv[1] not in ("fields", "merge"):
        sys.exit(__doc__)
    gpus = [int(g) for g in argv[3].replace(",", " ").split()]
    extra = fields(argv[2], gpus)
    if argv[1] == "fields":
        print(json.dumps(extra))
        return
    for line in sys.stdin:
        if line.strip():
            row = json.loads(line)
            row.update(extra)
            print(json.dumps(row))


if __name__ == "__main__":
    main(sys.argv)
