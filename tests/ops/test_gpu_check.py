"""The dry run of ``benchmarks/gpu_check.py``: every op with a Triton kernel, checked and compiled without a GPU.

The script runs in a subprocess as CI would run it: its children run the
kernels in Triton's interpreter against the references (and opcheck), and
compile for an H100 (sm_90) every configuration they launched, so a kernel
that only a GPU compiler would refuse fails here. Two estimators keep the
estimator part of the run (fit on the CPU twice, compare) cheap.
"""

import ast
import json
import resource
import subprocess
import sys
import time

import pytest
import torch

from _benchmarks import BENCHMARKS, load_benchmark

pytest.importorskip("triton")

SCRIPT = BENCHMARKS / "gpu_check.py"
OPS_FOLDER = BENCHMARKS.parent / "skicml" / "ops"


def _jitted_functions():
    """``{name: source}`` of every ``@triton.jit`` function of ``skicml/ops/*_triton.py``."""
    found = {}
    for path in sorted(OPS_FOLDER.glob("*_triton.py")):
        source = path.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                found[node.name] = ast.get_source_segment(source, node)
    return found


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--compile", "tiny",
         "--estimators", "GraphGPTRegressor", "RaceDiTGenerator"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = {"wall": time.perf_counter() - start,
               "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}
    report_path = out / "gpu_check.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return result, report, (out / "gpu_check.rst"), seconds


def test_the_dry_run_passes_and_names_every_op(dry_run):
    result, report, table, _ = dry_run
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    script = load_benchmark("gpu_check")
    ops = set(script.OPS)
    assert set(report["ops_checked"]) == ops
    for name in ops:
        assert name in result.stdout
        assert name in table.read_text()
    rows = report["ops"]
    # float32 and bfloat16 everywhere, float64 where the CUDA path sends it to the kernel.
    assert {(row["op"], row["dtype"]) for row in rows} == (
        {(name, dtype) for name in ops for dtype in ("float32", "bfloat16")}
        | {(name, "float64") for name in script.FLOAT64_TO_KERNEL})
    assert all(row["ok"] for row in rows)
    # opcheck once per op and dtype; every row timed the kernel and the reference.
    assert sum(row.get("opcheck") == "passed" for row in rows) == 2 * len(ops) + len(script.FLOAT64_TO_KERNEL)
    assert all(row["kernel_ms"] > 0 and row["reference_ms"] > 0 for row in rows)
    assert report["failures"] == []


def test_every_kernel_compiles_for_an_h100(dry_run):
    _, report, _, _ = dry_run
    compiled = report["compile"]
    assert compiled and all(entry["ok"] for entry in compiled), [e for e in compiled if not e["ok"]]
    assert {entry["target"] for entry in compiled} == {"sm_90"}
    launched = {entry["kernel"].rsplit(".", 1)[-1] for entry in compiled}
    jitted = _jitted_functions()
    # Helpers are compiled inside the kernels that call them.
    helpers = {name for name in jitted if any(f"{name}(" in source for other, source in jitted.items()
                                              if other != name)}
    assert set(jitted) - helpers == launched


def test_the_estimators_agree_with_themselves_on_the_cpu(dry_run):
    _, report, _, _ = dry_run
    rows = {row["estimator"]: row for row in report["estimators"]}
    assert set(rows) == {"GraphGPTRegressor", "RaceDiTGenerator"}
    assert all(row["verdict"] == "same" for row in rows.values())


def test_the_dry_run_fits_the_ci_budget(dry_run):
    # Two minutes on the 2-core CI machine. CPU seconds (of the script and all its children),
    # not wall time, which a shared machine stretches: about 30 here, so under a minute of wall
    # time on two free cores.
    seconds = dry_run[3]
    assert seconds["cpu"] < 100, seconds


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_the_gpu_run_says_so_and_exits_0(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "no CUDA device" in result.stdout
    assert not (tmp_path / "gpu_check.json").exists()
