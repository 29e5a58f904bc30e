"""bench_graph_git.py's in-context protocol: GIT scored by its own rule, runs in parts that survive a kill."""

import json
from pathlib import Path

import numpy as np
import pytest

from skicml.datasets import make_graph_domains
from skicml.graph import GITClassifier

from _benchmarks import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_graph_git")


def test_nearest_centroid_compares_by_cosine_to_the_prototype_not_by_dot_product(bench):
    # Class 0's support points two ways (a short mean), class 1's one way (a long mean): the query's
    # direction is class 0's mean, so the cosine says 0 while the dot product with the unnormalised
    # means says 1.
    rows = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.6, 0.8], [0.71, 0.70]])
    labels = np.array([0, 0, 1, 1, 0])
    assert bench.nearest_centroid(rows, labels, np.arange(4), np.array([4])) == 1.0


@pytest.mark.parametrize("task", ["node", "edge", "graph"])
def test_the_benchmarks_git_scores_are_gitclassifiers_own(bench, task):
    """The benchmark scores GIT's embeddings with nearest_centroid: that must be GIT's in-context score."""
    domain = make_graph_domains(1, task=task, n_nodes=150, n_features=16, n_graphs=60, noise=3.0,
                                random_state=0)[0]
    domain.task = task
    X, graph, y = bench.examples(domain)
    support, query = bench.shots_split(y, 3, np.random.default_rng(0))
    model = GITClassifier(graph=graph, task=task, mode="in_context", hidden_dim=8, random_state=0, device="cpu")
    model.fit(bench.take(X, support), y[support])
    embedded = model.transform(X).astype(np.float64)
    assert bench.nearest_centroid(embedded, y, support, query) == pytest.approx(
        model.score(bench.take(X, query), y[query]))


def _small_semantic(task, seed):
    """Numeric stand-ins for the MiniLM domains (same fields), small enough for a test."""
    domain = make_graph_domains(1, task=task, n_classes={"node": 3, "edge": 3, "graph": 2}[task], n_nodes=80,
                                n_features=12, n_graphs=24, random_state=seed)[0]
    domain.task = task
    return domain


def _rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_in_context_runs_chosen_seeds_keeps_finished_ones_and_tabulates_the_file(bench, monkeypatch, tmp_path,
                                                                                     capsys):
    monkeypatch.setattr(bench, "semantic_domain", _small_semantic)
    results, backbone = tmp_path / "results.jsonl", tmp_path / "backbone.pt"
    common = ["--protocol", "in-context", "--domains", "semantic", "--support-sets", "2", "--scratch-inits", "1",
              "--shots", "2", "--hidden-dim", "8", "--pretrain-domains", "1", "--pretrain-epochs", "1",
              "--backbone", str(backbone), "--results", str(results)]
    bench.main(common + ["--seed-list", "1", "--tasks", "node,graph"])
    rows = _rows(results)
    assert [(r["seed"], r["task"]) for r in rows] == [(1, "node"), (1, "graph")]
    assert set(rows[0]["scores"]) == {"centroid x", "centroid A^2 x", "logreg", "gcn", "git scratch",
                                      "git pretrained"}
    assert backbone.exists()
    capsys.readouterr()

    # A second run reuses seed 1's rows (a killed run's finished tasks), adds seed 2 and the missing task.
    calls = []
    original = bench.git_embeddings
    monkeypatch.setattr(bench, "git_embeddings", lambda d, *a: calls.append((d.task, a[0] is None)) or original(d, *a))
    bench.main(common + ["--seed-list", "1,2", "--tasks", "node,edge,graph"])
    out = capsys.readouterr().out
    assert "seed 1 node: in the results file, not rerun" in out and "seed 1 graph: in the results file" in out
    assert [(r["seed"], r["task"]) for r in _rows(results)][2:] == [(1, "edge"), (2, "node"), (2, "edge"),
                                                                   (2, "graph")]
    assert ("node", True) in calls and len(calls) == 2 * 4  # 4 tasks computed, 1 scratch + 1 pretrained each
    assert "node (seeds [1, 2])" in out and "git pretrained - scratch by seed" in out

    # --summarize reads the file only; other settings (another rule, shots...) are not mixed in.
    monkeypatch.setattr(bench, "git_embeddings", None)
    bench.main(common + ["--summarize", "--tasks", "node"])
    assert "node (seeds [1, 2])" in capsys.readouterr().out
    bench.main(common[:-2] + ["--results", str(results), "--summarize", "--shots", "3", "--tasks", "node"])
    assert "node (seeds" not in capsys.readouterr().out


def test_width_sweep_pretrains_one_backbone_a_width_with_early_stopping_on_the_probe(bench, monkeypatch,
                                                                                        tmp_path, capsys):
    monkeypatch.setattr(bench, "semantic_domain", _small_semantic)
    backbone = tmp_path / "git.pt"
    bench.main(["--protocol", "in-context", "--domains", "semantic", "--support-sets", "1", "--scratch-inits", "1",
                "--shots", "2", "--widths", "4,8", "--pretrain-domains", "1", "--pretrain-epochs", "3",
                "--pretrain-patience", "1", "--backbone", str(backbone), "--seed-list", "0", "--tasks", "node"])
    out = capsys.readouterr().out
    assert (tmp_path / "git_w4.pt").exists() and (tmp_path / "git_w8.pt").exists()
    assert "width 4 random weights: probe" in out and "width 8 epoch 1: loss" in out and "best probe" in out
    for name in ("git scratch 4", "git pretrained 4", "git scratch 8", "git pretrained 8"):
        assert name in out
