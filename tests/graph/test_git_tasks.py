"""GIT's link prediction and multi-task binary protocol: scores in [0, 1], planted tasks near ROC AUC 1, null
tasks near 0.5, the negative sampler and the masked loss."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from skicml.datasets import make_graph_domains
from skicml.graph import GITClassifier
from skicml.graph._git._classifier import _multitask_targets
from skicml.graph._git._links import multitask_loss, sample_negative_pairs

SMALL = dict(hidden_dim=16, random_state=0, device="cpu", verbose=0)


def _split_links(edge_index, n_nodes, n_test, seed):
    """Held-out links and as many non-edges, and the observed graph's edges without the held-out ones."""
    rng = np.random.default_rng(seed)
    edges = edge_index.T[rng.permutation(edge_index.shape[1])]
    test, train = edges[:n_test], edges[n_test:]
    existing = {tuple(e) for e in edges} | {tuple(e[::-1]) for e in edges}
    negative = []
    while len(negative) < n_test:
        u, v = rng.integers(n_nodes, size=2)
        if u != v and (u, v) not in existing:
            negative.append((u, v))
    X = np.vstack([test, np.array(negative)])
    return train, X, np.r_[np.ones(n_test), np.zeros(n_test)]


def _random_graph(n_nodes, n_edges, seed):
    rng = np.random.default_rng(seed)
    pairs = np.unique(np.sort(rng.integers(n_nodes, size=(3 * n_edges, 2)), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return pairs[rng.permutation(len(pairs))[:n_edges]].T


# ------------------------------------------------------------------- links
@pytest.fixture(scope="module")
def planted_links():
    # 20 classes, every edge inside its class, features pointing at it: a link is "same class", which a random
    # non-edge is 1 time in 20, so ROC AUC near 1 is reachable.
    domain = make_graph_domains(1, n_nodes=300, n_classes=20, n_features=16, noise=0.5, homophily=1.0,
                                degree=8.0, random_state=0)[0]
    train, X, y = _split_links(domain.edge_index, 300, 100, seed=0)
    return {"x": domain.x, "edge_index": train.T}, train, X, y


def test_fine_tuned_link_prediction_ranks_held_out_links_of_a_planted_graph(planted_links):
    graph, train, X, y = planted_links
    model = GITClassifier(task="link", graph=graph, max_epochs=10, lr=5e-3, **SMALL).fit(train)
    proba = model.predict_proba(X)
    assert proba.shape == (len(X), 2) and np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert roc_auc_score(y, proba[:, 1]) > 0.9
    np.testing.assert_allclose(model.decision_function(X), model.transform(X).sum(1), rtol=1e-4, atol=1e-4)
    assert set(model.predict(X)) <= {0, 1}
    assert model.history_["train_loss"][-1] < model.history_["train_loss"][0]


def test_zero_shot_link_scores_need_no_training_and_beat_chance(planted_links):
    graph, train, X, y = planted_links
    model = GITClassifier(task="link", graph=graph, mode="zero_shot", **SMALL).fit(train)
    proba = model.predict_proba(X)[:, 1]
    assert np.all((proba >= 0) & (proba <= 1))
    assert roc_auc_score(y, proba) > 0.75
    assert "train_loss" not in model.history_


def test_links_of_a_random_graph_with_random_features_are_not_predictable():
    rng = np.random.default_rng(1)
    edges = _random_graph(300, 1200, seed=1)
    train, X, y = _split_links(edges, 300, 200, seed=1)
    graph = {"x": rng.normal(size=(300, 16)), "edge_index": train.T}
    model = GITClassifier(task="link", graph=graph, max_epochs=10, lr=5e-3, **SMALL).fit(train)
    assert 0.38 < roc_auc_score(y, model.predict_proba(X)[:, 1]) < 0.62


def test_link_labels_may_be_given_and_are_checked(planted_links):
    graph, train, X, y = planted_links
    model = GITClassifier(task="link", graph=graph, max_epochs=2, **SMALL).fit(X, y.astype(int))
    assert list(model.classes_) == [0, 1]
    with pytest.raises(ValueError, match="1 \\(a link\\) or 0"):
        GITClassifier(task="link", graph=graph, **SMALL).fit(X, y + 1)


@pytest.mark.parametrize("params, match", [
    (dict(mode="in_context"), "task='edge'"),
    (dict(graph=None), "needs graph="),
    (dict(specialize=True, class_embeddings=np.eye(2)), "specialize=False"),
])
def test_link_prediction_refuses_what_it_cannot_do(planted_links, params, match):
    graph, train, _, _ = planted_links
    with pytest.raises(ValueError, match=match):
        GITClassifier(task="link", **{"graph": graph, **SMALL, **params}).fit(train)


@settings(max_examples=25, deadline=None)
@given(n_nodes=st.integers(3, 12), density=st.floats(0.0, 0.8), seed=st.integers(0, 10_000))
def test_sampled_negative_pairs_are_never_edges_nor_self_loops(n_nodes, density, seed):
    rng = np.random.default_rng(seed)
    upper = [(u, v) for u in range(n_nodes) for v in range(u + 1, n_nodes) if rng.random() < density]
    keys = sorted({u * n_nodes + v for u, v in upper} | {v * n_nodes + u for u, v in upper})
    pairs = sample_negative_pairs(n_nodes, 20, torch.as_tensor(keys, dtype=torch.int64),
                                  generator=torch.Generator().manual_seed(seed))
    assert len(pairs) <= 20 and pairs.shape[1] == 2
    assert bool((pairs[:, 0] != pairs[:, 1]).all())
    assert not set((pairs[:, 0] * n_nodes + pairs[:, 1]).tolist()) & set(keys)


# --------------------------------------------------------- multi-task binary
@pytest.fixture(scope="module")
def graph_tasks():
    domain = make_graph_domains(1, task="graph", n_graphs=160, n_classes=3, n_features=16, noise=1.0,
                                random_state=0)[0]
    planted = np.eye(3)[domain.target]  # task t: "the majority class is t"
    return domain, planted, np.arange(80), np.arange(80, 160)


def _take(graphs, rows):
    return [graphs[i] for i in rows]


def _aucs(Y, proba):
    return [roc_auc_score(Y[:, t], proba[:, t]) for t in range(Y.shape[1])]


def test_in_context_multitask_prototypes_score_planted_tasks_near_one_and_null_tasks_near_half(graph_tasks):
    domain, planted, train, test = graph_tasks
    model = GITClassifier(task="graph", mode="in_context", **SMALL).fit(_take(domain.graphs, train), planted[train])
    proba = model.predict_proba(_take(domain.graphs, test))
    assert proba.shape == (len(test), 3) and np.all((proba >= 0) & (proba <= 1))
    assert model.prototypes_.shape == (6, 16) and model.n_outputs_ == 3
    assert min(_aucs(planted[test], proba)) > 0.95
    np.testing.assert_array_equal(model.predict(_take(domain.graphs, test)),
                                  (model.decision_function(_take(domain.graphs, test)) > 0).astype(int))
    null = np.random.default_rng(0).integers(0, 2, size=planted.shape).astype(float)
    model.fit(_take(domain.graphs, train), null[train])
    assert abs(np.mean(_aucs(null[test], model.predict_proba(_take(domain.graphs, test)))) - 0.5) < 0.12


def test_fine_tuned_multitask_head_skips_missing_labels(graph_tasks):
    domain, planted, train, test = graph_tasks
    Y = planted.copy()
    Y[np.random.default_rng(0).random(Y.shape) < 0.3] = np.nan
    model = GITClassifier(task="graph", max_epochs=15, lr=5e-3, **SMALL).fit(_take(domain.graphs, train), Y[train])
    assert np.isfinite(model.history_["train_loss"]).all()
    assert min(_aucs(planted[test], model.predict_proba(_take(domain.graphs, test)))) > 0.9


def test_zero_shot_multitask_reads_positive_then_negative_class_embeddings(graph_tasks):
    domain, planted, train, test = graph_tasks
    vectors = np.vstack([domain.class_embeddings, -domain.class_embeddings])
    model = GITClassifier(task="graph", mode="zero_shot", class_embeddings=vectors, **{**SMALL, "hidden_dim": None})
    proba = model.fit(_take(domain.graphs, train), planted[train]).predict_proba(_take(domain.graphs, test))
    assert proba.shape == (len(test), 3) and np.all((proba >= 0) & (proba <= 1))
    with pytest.raises(ValueError, match=r"expected \(6, d\)"):
        model.set_params(class_embeddings=domain.class_embeddings).fit(_take(domain.graphs, train), planted[train])


def test_in_context_multitask_needs_both_labels_of_every_task(graph_tasks):
    domain, planted, train, _ = graph_tasks
    Y = planted[train].copy()
    Y[:, 1] = 1.0
    with pytest.raises(ValueError, match="task \\(column\\) 1"):
        GITClassifier(task="graph", mode="in_context", **SMALL).fit(_take(domain.graphs, train), Y)
    with pytest.raises(ValueError, match="binary tasks"):
        GITClassifier(task="graph", mode="in_context", **SMALL).fit(_take(domain.graphs, train), planted[train] * 2)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.integers(0, 10_000))
def test_the_masked_loss_is_the_loss_of_the_labels_present(n, tasks, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, tasks, generator=generator)
    target = (torch.rand(n, tasks, generator=generator) < 0.5).double()
    missing = torch.rand(n, tasks, generator=generator) < 0.4
    target[missing] = float("nan")
    loss = multitask_loss(logits, target)
    if missing.all():
        assert float(loss) == 0.0
    else:
        present = ~missing
        expected = torch.nn.functional.binary_cross_entropy_with_logits(logits[present], target[present].float())
        torch.testing.assert_close(loss, expected)


def test_specialization_targets_follow_the_official_sum_of_positive_and_negative_means():
    vectors = torch.arange(8, dtype=torch.float64).reshape(4, 2)  # 2 tasks: positives rows 0-1, negatives 2-3
    labels = np.array([[1.0, 0.0], [1.0, 1.0], [np.nan, 0.0]])
    targets = _multitask_targets(vectors, labels)
    expected = torch.stack([vectors[0] + vectors[3], (vectors[0] + vectors[1]) / 2, vectors[3]])
    torch.testing.assert_close(targets, expected, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------- edge features
def test_csr_edge_ids_line_edge_features_up_with_both_directions():
    from skicml.graph._git._task_trees import csr_adjacency

    edge_index = torch.tensor([[0, 1, 2, 0], [1, 2, 3, 1]])  # (0, 1) twice: the first column wins
    indptr, neighbors, edge_ids = csr_adjacency(edge_index, 4, return_edge_ids=True)
    for node in range(4):
        for position in range(int(indptr[node]), int(indptr[node + 1])):
            column = int(edge_ids[position])
            assert {node, int(neighbors[position])} == set(edge_index[:, column].tolist())
            assert column != 3


def test_a_sage_layer_with_edge_features_averages_relu_messages():
    from skicml.graph._git._model import SAGELayer

    torch.manual_seed(0)
    layer = SAGELayer(3, 4, edge_dim=3)
    z, edge_attr = torch.randn(3, 3), torch.randn(3, 3)
    edge_index = torch.tensor([[1, 2, 0], [0, 0, 1]])  # node 0 hears from 1 and 2, node 1 from 0, node 2 nothing
    out = layer(z, edge_index, edge_attr)
    heard = (torch.relu(z[1] + edge_attr[0]) + torch.relu(z[2] + edge_attr[1])) / 2
    torch.testing.assert_close(out[0], layer.lin_l(heard) + layer.lin_r(z[0]))
    torch.testing.assert_close(out[2], layer.lin_l.bias + layer.lin_r(z[2]))
    assert isinstance(SAGELayer(3, 4, edge_dim=2).edge_lin, torch.nn.Linear)


@pytest.fixture(scope="module")
def edge_typed_graphs():
    # The label is the share of type-1 edges (80% or 20%); node features are noise.
    import networkx as nx

    rng = np.random.default_rng(0)
    graphs, y = [], np.arange(120) % 2
    for label in y:
        n = int(rng.integers(10, 16))
        edge_index = np.array(nx.gnm_random_graph(n, 2 * n, seed=int(rng.integers(1 << 30))).edges()).T
        kind = (rng.random(edge_index.shape[1]) < (0.8 if label else 0.2)).astype(int)
        graphs.append({"x": rng.normal(size=(n, 8)), "edge_index": edge_index, "edge_attr": np.eye(2)[kind]})
    return graphs, y


def test_edge_features_carry_a_label_that_node_features_do_not(edge_typed_graphs):
    graphs, y = edge_typed_graphs
    scores = {}
    for edge_attr in (None, "edge_attr"):
        model = GITClassifier(task="graph", mode="in_context", edge_attr=edge_attr, **SMALL).fit(graphs[:60], y[:60])
        scores[edge_attr] = roc_auc_score(y[60:], model.decision_function(graphs[60:]))
    assert scores["edge_attr"] > 0.9 and scores[None] < 0.7
    assert model.edge_dim_ == 2 and model.model_.edge_dim == 2
    bare = [{"x": g["x"], "edge_index": g["edge_index"]} for g in graphs[:3]]
    with pytest.raises(ValueError, match="0-d edge features"):
        model.predict(bare)


def test_a_backbone_with_edge_features_saves_and_loads(tmp_path, edge_typed_graphs):
    graphs, y = edge_typed_graphs
    model = GITClassifier(task="graph", mode="in_context", edge_attr="edge_attr", **SMALL).fit(graphs[:20], y[:20])
    model.save(tmp_path / "edges.pt")
    again = GITClassifier(task="graph", mode="in_context", edge_attr="edge_attr", pretrained=tmp_path / "edges.pt",
                          **SMALL).fit(graphs[:20], y[:20])
    np.testing.assert_allclose(again.transform(graphs[20:30]), model.transform(graphs[20:30]), atol=1e-5)
