#!/usr/bin/env python3
"""tests/gpu/kernel_summary.py's attribution of kernels to the ops that launched them, on a
small recorded-shape Kineto trace (runs anywhere: no GPU needed)."""
import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kernel_summary  # noqa: E402


def op(name, ts, dur, tid=1):
    return {"cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid}


def launch(corr, ts, tid=1, cat="cuda_runtime"):
    return {"cat": cat, "name": "cudaLaunchKernel", "ts": ts, "dur": 2, "tid": tid,
            "args": {"correlation": corr}}


class LaunchingOpsTest(unittest.TestCase):
    def test_innermost_op_and_its_parents(self):
        events = [
            op("aten::to", 0, 100), op("aten::_to_copy", 5, 90), op("aten::copy_", 10, 50),
            launch(1, 20),
            # After copy_ ended, still inside _to_copy and to.
            launch(2, 70),
            # A sibling op after the first tree closed.
            op("aten::add_", 200, 10), launch(3, 205),
            # Another thread (autograd's) with its own nesting; a driver-API launch.
            op("FusedBatchNormFnBackward", 0, 500, tid=2), op("aten::empty", 10, 5, tid=2),
            launch(4, 50, tid=2, cat="cuda_driver"),
            # A launch outside every op.
            launch(5, 1000),
        ]
        found = kernel_summary.launching_ops(events)
        self.assertEqual(found[1], "aten::copy_ < aten::_to_copy < aten::to")
        self.assertEqual(found[2], "aten::_to_copy < aten::to")
        self.assertEqual(found[3], "aten::add_")
        self.assertEqual(found[4], "FusedBatchNormFnBackward")
        self.assertEqual(found[5], "(no op)")

    def test_four_levels_name_the_innermost_three(self):
        events = [op("a", 0, 100), op("b", 1, 90), op("c", 2, 80), op("d", 3, 70), launch(1, 10)]
        self.assertEqual(kernel_summary.launching_ops(events)[1], "d < c < b")


def kernel(name, dur, grid, block=(256, 1, 1)):
    return {"cat": "kernel", "name": name, "ts": 0, "dur": dur,
            "args": {"grid": list(grid), "block": list(block)}}


class LaunchShapesTest(unittest.TestCase):
    def test_one_row_per_shape_largest_first(self):
        events = [kernel("k<float>", 10, (3, 256, 1)), kernel("k<float>", 30, (3, 256, 1)),
                  kernel("k<half>", 100, (12, 85, 1)), kernel("other", 5, (1, 1, 1))]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            kernel_summary.print_launch_shapes(events, 2, ["k"])
        lines = out.getvalue().splitlines()
        self.assertEqual(lines[1].strip(), "k")
        # 100 us in one launch of the wide grid over 2 steps: 0.5 a step, 0.050 ms a step.
        self.assertEqual(lines[2].split()[:4], ["0.5", "100.0", "100.0", "0.050"])
        self.assertIn("grid [12, 85, 1]", lines[2])
        self.assertEqual(lines[3].split()[:4], ["1.0", "20.0", "30.0", "0.020"])
        self.assertEqual(len(lines), 4)  # "other" is not among the names asked for


if __name__ == "__main__":
    unittest.main()
