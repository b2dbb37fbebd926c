#!/usr/bin/env python3
"""tests/gpu/gpu_watch.py on recorded nvidia-smi lines (runs anywhere: no GPU needed)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_watch  # noqa: E402

# Two GPUs; idle (start-up) samples, a malformed field and a line cut short must not count.
SMI = """\
2026/11/22 17:00:00.000, 0, 99, 1935, 693.1, Active
2026/11/22 17:00:00.000, 1, 99, 1890, 690.0, Active
2026/11/22 17:00:00.200, 0, 99, 1980, 650.1, Not Active
2026/11/22 17:00:00.200, 1, 99, 1860, 695.0, Active
2026/11/22 17:00:00.400, 0, 10, 345, 80.0, Not Active
2026/11/22 17:00:00.400, 1, [N/A], 1860, 695.0, Active
2026/11/22 17:00:00.400, 2, 99, 1200, 700.0, Active
2026/11/22 17:00:00.600, 1, 99, 18
"""


class GpuWatchTest(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".csv")
        with os.fdopen(fd, "w") as f:
            f.write(SMI)

    def tearDown(self):
        os.unlink(self.path)

    def test_slowest_gpu_median_clock_and_worst_power_share(self):
        f = gpu_watch.fields(self.path, [0, 1])
        self.assertEqual(f["sm_clock_mhz"], 1875.0)  # GPU 1's median; GPU 0's is 1957.5
        self.assertEqual(f["power_w"], 692.5)
        self.assertEqual(f["power_capped_share"], 1.0)  # GPU 0: 0.5
        f0 = gpu_watch.fields(self.path, [0])
        self.assertEqual(f0["sm_clock_mhz"], 1957.5)
        self.assertEqual(f0["power_capped_share"], 0.5)

    def test_nulls_without_busy_samples_of_the_used_gpus(self):
        for path, gpus in ((self.path, [3]), (self.path + ".missing", [0])):
            self.assertEqual(gpu_watch.fields(path, gpus),
                             {"sm_clock_mhz": None, "power_w": None, "power_capped_share": None})

    def test_merge_adds_the_fields_to_each_row(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "gpu_watch.py"), "merge", self.path, "1"],
                             input='{"impl": "ringpilot"}\n', capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        self.assertEqual(row["impl"], "ringpilot")
        self.assertEqual(row["sm_clock_mhz"], 1875.0)

    def test_usage_error_exits_non_zero(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "gpu_watch.py"), "bogus"],
                             capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)


if __name__ == "__main__":
    unittest.main()
