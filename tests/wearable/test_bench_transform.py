"""Smoke test of ``benchmarks/bench_wearable_transform.py``, the measurement behind the documented speed."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_wearable_transform.py"


def test_benchmark_prints_weeks_per_second_against_the_summary_baseline():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--people", "4", "--weeks", "2", "--batch-sizes", "8", "--threads", "1",
         "--repeats", "1", "--clock", "process"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^\s+1 (summary-statistics|encoder batch_size=8)\s+[0-9.]+\s+([0-9.]+)\s", result.stdout, re.M)}
    assert set(rows) == {"summary-statistics", "encoder batch_size=8"} and all(rate > 0 for rate in rows.values())


def test_the_documented_transform_speed_names_its_benchmark():
    # Issue 28 (item 15): the user guide quoted 250 weeks/s that no script reproduced.
    guide = (ROOT / "doc" / "wearable.rst").read_text()
    assert "250 for the width-128 shipped encoder" not in guide
    assert "bench_wearable_transform.py" in guide
    assert "bench_wearable_transform.py" in (ROOT / "doc" / "performance.rst").read_text()
