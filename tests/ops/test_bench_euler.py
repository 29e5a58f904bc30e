"""Smoke test of ``benchmarks/bench_ops_euler.py --quick``."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ops_euler.py"


def test_quick_mode_prints_the_table():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "graphs/s" in out and "rows/|E|" in out and "vs nx" in out and "vs ref" in out
    for route in ("networkx", "reference", "op (C)"):
        assert route in out
    assert "all outputs checked" in out and "target op >= 20x networkx on molecules" in out
