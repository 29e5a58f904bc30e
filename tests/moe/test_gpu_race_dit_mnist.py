"""The prepared GPU run of Race-DiT on MNIST: without CUDA it says so and exits cleanly.

Its CPU path (``--device cpu``) is the recipe's, tested in ``test_pretrain.py``; a full
small CPU run takes minutes, so it is left to the command in the script's docstring.
"""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_race_dit_mnist.py"


def test_without_cuda_the_gpu_run_exits_zero_after_saying_so(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "no CUDA device" in result.stdout
    assert not list(tmp_path.iterdir())
