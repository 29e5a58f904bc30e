"""Smoke test of ``benchmarks/bench_moe_dispatch.py --quick``."""

import subprocess
import sys

from _benchmarks import BENCHMARKS

SCRIPT = BENCHMARKS / "bench_moe_dispatch.py"


def test_quick_mode_prints_the_tables():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--repeats", "1", "--skip-gpu"], capture_output=True,
        text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "dense/op" in out and "padded/op" in out and "topk/kth" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:4] == ["256", "16", "4", "2"]]
    assert len(rows) == 3
    # The baselines compute the same layer; the skewed loads are skewed.
    assert all(float(row[-1]) < 1e-5 for row in rows)
    assert float(rows[2][4]) > float(rows[0][4])
    # The whole-layer table: the dense MLP and the three routings, ratios against the dense MLP.
    layer_rows = {line.split()[5]: line.split() for line in out.splitlines()
                  if line.split()[:5] == ["8", "16", "16", "4", "2"]}
    assert set(layer_rows) == {"dense", "expert_race", "token_choice", "expert_choice"}
    assert layer_rows["dense"][7] == "1.00x" and layer_rows["dense"][9] == "1.00x"
