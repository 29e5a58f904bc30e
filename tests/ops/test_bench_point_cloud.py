"""Smoke test of ``benchmarks/bench_ops_point_cloud.py --quick``."""

import subprocess
import sys

from _benchmarks import BENCHMARKS

SCRIPT = BENCHMARKS / "bench_ops_point_cloud.py"


def test_quick_mode_prints_the_tables():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--repeats", "1"], capture_output=True,
        text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "torch/op" in out and "cdist/op" in out and "kdtree/op" in out and "sort/topk" in out
    rows = [line.split() for line in out.splitlines()
            if line.split()[:2] in (["2", "64"], ["1", "200"])]
    # Two FPS rows, one kNN row, one interpolation row; every route agrees.
    assert len(rows) == 4
    fps_rows, knn_row, interp_row = rows[:2], rows[2], rows[3]
    for row, n_ratios in ((fps_rows[0], 3), (fps_rows[1], 3), (knn_row, 2)):
        assert row[-1] == "True"
        # fpsample is optional: its cells are "-" when it is not installed.
        assert all(cell.endswith("x") or cell == "-" for cell in row[-1 - n_ratios:-1])
    assert float(interp_row[-1]) < 1e-5
