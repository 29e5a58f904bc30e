"""Smoke tests of ``benchmarks/bench_moe_digits.py``: the quick run, its saved results, and the curve hook."""

import json
import subprocess
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits

from skicml.moe import RaceDiTGenerator

from _benchmarks import BENCHMARKS, load_benchmark

SCRIPT = BENCHMARKS / "bench_moe_digits.py"


def _bench():
    return load_benchmark("bench_moe_digits")


def test_quick_mode_prints_the_tables_and_saves_what_load_reports(tmp_path):
    saved = tmp_path / "results.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--contenders", "race", "dense",
                             "--save", str(saved)], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
            if line.split() and line.split()[0] in ("race", "dense") and "(" in line}
    assert set(rows) == {"race", "dense"}
    assert "difference from dense" in result.stdout and "race             score" in result.stdout
    assert "held-out score against optimiser step" in result.stdout and "race             layer 0:" in result.stdout
    results = json.loads(saved.read_text())
    assert [step for step, _ in results["race"][0]["curve"]] == [10, 20, 24]  # every 10 steps, then the end
    assert "maxvio" in results["race"][0] and "maxvio" not in results["dense"][0]
    # --load reproduces the report of the run that saved the results
    loaded = subprocess.run([sys.executable, str(SCRIPT), "--load", str(saved)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() in result.stdout


def test_the_curve_hook_leaves_training_unchanged():
    digits = load_digits()
    params = dict(hidden_dim=16, depth=1, max_epochs=2, batch_size=64, random_state=0, device="cpu")
    plain = RaceDiTGenerator(**params).fit(digits.images[:256], digits.target[:256])
    tracked = _bench().CurveGenerator(eval_x=digits.images[256:320], eval_y=digits.target[256:320],
                                      eval_every=3, **params).fit(digits.images[:256], digits.target[:256])
    assert [step for step, _ in tracked.curve_] == [3, 6]
    assert tracked.n_steps_ == 8
    for name, value in plain.module_.state_dict().items():
        torch.testing.assert_close(tracked.module_.state_dict()[name], value, rtol=0, atol=0, equal_nan=True)
    # held-out scores were taken at those steps
    assert np.isfinite([score for _, score in tracked.curve_]).all()
