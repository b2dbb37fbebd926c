"""GPU time per step by kernel in two PyTorch profiler traces, side by side, largest change
first: what a step gains or loses between two runs (1 GPU against 2, an option off and on).

  python3 tests/gpu/kernel_diff.py BASE.json NEW.json [--steps 3] [--top 30]

Each trace is a Kineto JSON (RINGPILOT_KINETO_TRACE, tests/gpu/profile_step.sh) covering
--steps steps, read by kernel_summary.py's gpu_work: kernels, memcpys and memsets, by name
(first 160 characters, template arguments kept). NCCL's kernels (kernel_summary.py's "nccl"
category) are summed apart as well: on the communication stream they overlap the step, so
their time is not the step's, while what they cost the other kernels shows as those
kernels' growth.
"""
import argparse
import collections

from kernel_summary import category, gpu_work


def load(path, steps):
    """{name: [ms per step, launches per step]}"""
    agg = collections.defaultdict(lambda: [0.0, 0.0])
    for name, ms in gpu_work(path):
        row = agg[name[:160]]
        row[0] += ms / steps
        row[1] += 1.0 / steps
    return agg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--steps", type=float, default=3.0)
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    base, new = load(a.base, a.steps), load(a.new, a.steps)

    def total(agg, nccl):
        return sum(v[0] for n, v in agg.items() if (category(n) == "nccl") == nccl)

    print(f"per step: base {total(base, False):.3f} ms, new {total(new, False):.3f} ms "
          f"(NCCL kernels apart: base {total(base, True):.3f}, new {total(new, True):.3f})")
    rows = []
    for name in set(base) | set(new):
        tb, cb = base.get(name, (0.0, 0.0))
        tn, cn = new.get(name, (0.0, 0.0))
        rows.append((tn - tb, tb, cb, tn, cn, name))
    rows.sort(key=lambda r: -abs(r[0]))
    print(f"{'change ms':>9} {'base ms':>8} {'n':>6} {'new ms':>8} {'n':>6}  kernel")
    for d, tb, cb, tn, cn, name in rows[:a.top]:
        print(f"{d:+9.3f} {tb:8.3f} {cb:6.1f} {tn:8.3f} {cn:6.1f}  {name}")


if __name__ == "__main__":
    main()
