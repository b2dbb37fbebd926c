"""`ringpilot bench comm` against nccl-tests, size by size (tests/gpu/scaling_suite.sh comm).

Reads, from the part's folder DIR:
  comm-allreduce.json         ringpilot's out-of-place all-reduce sweep (--json)
  comm-allreduce-graphs.json  the same sweep with each loop replayed from a CUDA graph
                              (--graphs 10), optional
  comm-all.json               ringpilot's sweep of every collective, in and out of place
  nccl-tests-allreduce.txt    all_reduce_perf on the same sizes as comm-allreduce.json, one
                              process per GPU (mpirun), as `bench comm` runs
  nccl-tests-threads-allreduce.txt   the same by one process driving every GPU (-g N):
                              printed beside, not judged
  nccl-tests-graph-allreduce.txt     the mpirun run again with its iterations captured in
                              CUDA graphs (-G): no host launch work between operations, so
                              at small sizes it shows whether a gap is the host's or the
                              collective's; judged against ringpilot's graphed sweep (like
                              with like) where that exists, else against the eager one
  nccl-tests-OP.txt           OP_perf (all_gather, ...) on the sizes of comm-all.json
and prints, per collective, each size's bus bandwidth on both sides and their ratio, then
one verdict line per collective: how many sizes >= 64 KiB are within 2% of nccl-tests (the
target; faster counts as within). Sizes only one side measured print '-'. Exit 1 when a
file ringpilot should have written is missing or unreadable; nccl-tests' files are optional.

  python3 tests/gpu/comm_vs_nccl_tests.py DIR
"""
import json
import os
import sys

TOLERANCE = 0.02
MIN_BYTES = 64 * 1024
# nccl-tests' program names -> `bench comm --op` names.
OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reduce_scatter",
       "broadcast": "broadcast", "alltoall": "alltoall", "sendrecv": "sendrecv"}


def read_nccl_tests(path):
    """{(bytes, in_place): busbw GB/s} from one nccl-tests output: each data row is size,
    count, type, redop, root, then time, algbw, busbw, #wrong out of place and the same four
    in place."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) < 13 or line.lstrip().startswith("#") or not f[0].isdigit():
            continue
        try:
            rows[(int(f[0]), False)] = float(f[7])
            rows[(int(f[0]), True)] = float(f[11])
        except ValueError:
            continue  # a row nccl-tests marked N/A
    return rows


def read_ours(path):
    with open(path) as fh:
        return json.load(fh)["results"]


def compare(title, ours, theirs, references=()):
    """Prints the table (each of `references`, (header, rows) of another nccl-tests run, as
    a column beside); returns (sizes >= MIN_BYTES compared, of them within, worst)."""
    print(f"\n{title}")
    extra = "".join(f" {header:>10}" for header, _ in references)
    print(f"{'bytes':>12} {'mode':>6} {'ringpilot':>10} {'nccl-tests':>10} {'ratio':>6}{extra}")
    compared, within, worst = 0, 0, None
    for r in ours:
        mode = "in" if r["in_place"] else "out"
        q = theirs.get((r["bytes"], r["in_place"]))
        ratio = r["busbw_gbps"] / q if q else None
        ref = ""
        for _, rows in references:
            x = rows.get((r["bytes"], r["in_place"]))
            ref += f" {x if x else '-':>10}"
        print(f"{r['bytes']:>12} {mode:>6} {r['busbw_gbps']:>10.2f} "
              f"{q if q else '-':>10} {f'{ratio:.3f}' if ratio else '-':>6}{ref}")
        if ratio is None or r["bytes"] < MIN_BYTES:
            continue
        compared += 1
        within += ratio >= 1 - TOLERANCE
        if worst is None or ratio < worst[0]:
            worst = (ratio, r["bytes"], mode)
    return compared, within, worst


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    verdicts = []
    try:
        allreduce = read_ours(os.path.join(d, "comm-allreduce.json"))
        every = read_ours(os.path.join(d, "comm-all.json"))
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"comm_vs_nccl_tests: ringpilot's sweep unreadable: {e}")
    theirs = read_nccl_tests(os.path.join(d, "nccl-tests-allreduce.txt"))
    if theirs:
        threads = read_nccl_tests(os.path.join(d, "nccl-tests-threads-allreduce.txt"))
        graph = read_nccl_tests(os.path.join(d, "nccl-tests-graph-allreduce.txt"))
        columns = [c for c in (("1 process", threads), ("graphs", graph)) if c[1]]
        verdicts.append(("allreduce 64K-2G", compare("all-reduce, out of place, 40 iterations",
                                                     allreduce, theirs, columns)))
        graphed = os.path.join(d, "comm-allreduce-graphs.json")
        if graph and os.path.exists(graphed):
            try:
                ours_graphed = read_ours(graphed)
            except (OSError, ValueError, KeyError) as e:
                sys.exit(f"comm_vs_nccl_tests: ringpilot's graphed sweep unreadable: {e}")
            verdicts.append(("allreduce 64K-2G, both under CUDA graphs",
                             compare("all-reduce, both sides' loops in CUDA graphs "
                                     "(--graphs 10, -G 10)", ours_graphed, graph)))
        elif graph:
            verdicts.append(("allreduce 64K-2G against nccl-tests under CUDA graphs",
                             compare("all-reduce against nccl-tests -G", allreduce, graph)))
    for prog, op in OPS.items():
        theirs = read_nccl_tests(os.path.join(d, f"nccl-tests-{prog}.txt"))
        mine = [r for r in every if r["op"] == op]
        if theirs and mine:
            verdicts.append((op, compare(f"{op}, 20 iterations", mine, theirs)))
    print()
    for name, (compared, within, worst) in verdicts:
        w = f"; lowest {worst[0]:.3f} at {worst[1]} B {worst[2]}" if worst else ""
        print(f"VERDICT {name}: {within} of {compared} sizes >= 64 KiB within "
              f"{100 * TOLERANCE:.0f}% of nccl-tests{w}")
    if not verdicts:
        print("VERDICT none: no nccl-tests output to compare with")


if __name__ == "__main__":
    main()
