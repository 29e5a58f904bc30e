"""Smoke test of ``benchmarks/bench_clip_stability.py --quick``."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_clip_stability.py"

pytest.importorskip("torch")
pytest.importorskip("scipy")


def test_quick_mode_prints_the_table():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "case" in out and "method" in out and "max|dLL|" in out and "fit s" in out
    assert "skicml" in out and "official" in out
