"""The contexture benchmarks run and print what doc/performance.rst records."""

import numpy as np
import pytest

from _benchmarks import load_benchmark


def test_tau_benchmark_prints_the_correlations(capsys):
    bench = load_benchmark("bench_contexture_tau")
    bench.main(["--datasets", "iris", "wine", "--settings", "3", "--n-masks", "2", "--threads", "1"])
    out = capsys.readouterr().out
    assert "iris" in out and "wine" in out and "median Pearson" in out and "paper, 28 OpenML datasets" in out
    assert "within one context type" in out
    assert "the guard" in out and "flagged+misranked" in out


def test_distance_correlation_is_one_for_a_linear_relation_and_zero_for_independence():
    bench = load_benchmark("bench_contexture_tau")
    a = np.arange(20.0)
    assert bench.distance_correlation(a, 3 * a + 1) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    assert bench.distance_correlation(rng.normal(size=400), rng.normal(size=400)) < 0.15


@pytest.mark.parametrize("name", ["contexture-knn", "spectral", "contexture-rbf", "kernel-pca"])
def test_spectrum_benchmark_contenders_fit_and_report(name, capsys):
    bench = load_benchmark("bench_contexture_spectrum")
    bench.fit_one(name, 1100, threads=1)
    out = capsys.readouterr().out
    assert '"fit_s"' in out and '"peak_mb"' in out and '"accuracy"' in out
    assert ('"transform_s"' in out) == name.startswith("contexture")


def test_speed_benchmark_prints_fit_and_transform_against_spectral_embedding(capsys):
    bench = load_benchmark("bench_contexture_speed")
    ratios = bench.main(["--sizes", "400", "--repeats", "1"])
    out = capsys.readouterr().out
    for name in ("contexture", "spectral", "kernel-pca", "fit / spectral", "transform s", "1.5x target"):
        assert name in out
    assert set(ratios) == {400} and ratios[400] > 0


def test_tau_benchmark_loads_the_pima_diabetes_and_names_the_regression_set_apart():
    bench = load_benchmark("bench_contexture_tau")
    assert "diabetes" not in bench.DATASETS and {"sklearn_diabetes", "pima"} <= set(bench.DATASETS)
    X, y, classification = bench.load("sklearn_diabetes", 2000, np.random.default_rng(0))
    assert X.shape == (442, 10) and not classification
    X, y, classification = bench.load("pima", 2000, np.random.default_rng(0))
    assert X.shape == (532, 7) and classification and y.sum() == 177
