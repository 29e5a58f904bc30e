"""Smoke test of ``benchmarks/bench_moe_digits.py --quick``."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_moe_digits.py"


def test_quick_mode_prints_the_table_and_the_differences():
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--contenders", "race", "dense"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("race", "dense") and "(" in line}
    assert set(rows) == {"race", "dense"}
    assert rows["dense"][-2] == "-"  # a dense model has no experts per token
    assert "difference from dense" in result.stdout and "race          score" in result.stdout
