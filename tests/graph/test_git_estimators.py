"""GITEncoder and GITClassifier: the three tasks, the three modes, text features, persistence and bad input.

scikit-learn's checks run on the 2-D path in tests/test_common.py.
"""

import pickle

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from skicml.datasets import make_graph_domains
from skicml.graph import GITClassifier, GITEncoder, TaskSet
from skicml.graph._git._data import read_task_graph
from skicml.graph._git._model import GITModel

SMALL = dict(hidden_dim=16, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def domain():
    return make_graph_domains(1, n_nodes=300, n_features=16, noise=1.5, random_state=0)[0]


def _graph(domain):
    return {"x": domain.x, "edge_index": domain.edge_index}


def _support(target, shots, seed=0):
    rng = np.random.RandomState(seed)
    return np.concatenate([rng.choice(np.flatnonzero(target == c), shots, replace=False)
                           for c in np.unique(target)])


# ----------------------------------------------------------------- encoder
def test_pretraining_on_task_sets_of_two_graphs_embeds_every_task():
    domains = make_graph_domains(2, n_nodes=80, n_features=8, random_state=1)
    tasks = [TaskSet(_graph(domains[0])), TaskSet(_graph(domains[1]), task="edge")]
    encoder = GITEncoder(**SMALL, max_epochs=3).fit(tasks)
    assert len(encoder.history_["train_loss"]) == 3
    assert encoder.transform(tasks[0]).shape == (80, 16)
    assert encoder.transform(tasks[1]).shape == (domains[1].edge_index.shape[1], 16)
    both = encoder.transform(tasks)
    np.testing.assert_allclose(both[:80], encoder.transform(tasks[0]), atol=1e-5)


def test_edge_embeddings_are_symmetric_in_their_end_nodes(domain):
    encoder = GITEncoder(**SMALL, max_epochs=1).fit(TaskSet(_graph(domain)))
    pairs = domain.edge_index.T[:20]
    forward = encoder.transform(TaskSet(_graph(domain), "edge", pairs))
    backward = encoder.transform(TaskSet(_graph(domain), "edge", pairs[:, ::-1]))
    np.testing.assert_allclose(forward, backward, atol=1e-5)


def test_encoder_reads_graph_collections_and_feeds_a_pipeline():
    domain = make_graph_domains(1, task="graph", n_graphs=30, n_features=8, random_state=0)[0]
    encoder = GITEncoder(**SMALL, max_epochs=2).fit(TaskSet(domain.graphs, task="graph"))
    assert encoder.transform(TaskSet(domain.graphs[:5], task="graph")).shape == (5, 16)
    X = np.random.RandomState(0).randn(40, 4)
    y = (X[:, 0] > 0).astype(int)
    pipe = make_pipeline(GITEncoder(**SMALL, max_epochs=1), LogisticRegression()).fit(X, y)
    assert pipe.predict(X).shape == (40,)


def test_a_graph_outside_a_task_set_says_how_to_wrap_it():
    with pytest.raises(TypeError, match="TaskSet"):
        GITEncoder(**SMALL).fit(nx.karate_club_graph())


# -------------------------------------------------------------- classifier
def test_finetuning_on_node_ids_beats_chance_by_far(domain):
    train, test = np.arange(150), np.arange(150, 300)
    model = GITClassifier(graph=_graph(domain), **SMALL, max_epochs=60, lr=5e-3).fit(train, domain.target[train])
    assert model.score(test, domain.target[test]) > 0.6
    assert model.predict_proba(test).shape == (150, 5)
    assert model.transform(test).shape == (150, 16)


def test_in_context_prediction_ignores_the_order_and_repetition_of_the_support_set(domain):
    support = _support(domain.target, 3)
    model = GITClassifier(graph=_graph(domain), mode="in_context", **SMALL)
    queries = np.arange(100)
    base = model.fit(support, domain.target[support]).predict_proba(queries)
    order = np.random.RandomState(1).permutation(len(support))
    permuted = model.fit(support[order], domain.target[support][order]).predict_proba(queries)
    np.testing.assert_allclose(base, permuted, atol=1e-6)
    doubled = np.concatenate([support, support])
    np.testing.assert_allclose(model.fit(doubled, domain.target[doubled]).predict_proba(queries), base, atol=1e-6)


def test_zero_shot_with_an_identity_encoder_is_the_nearest_class_vector(domain):
    model = GITClassifier(graph=_graph(domain), mode="zero_shot", class_embeddings=domain.class_embeddings,
                          hidden_dim=None, num_layers=0, random_state=0, device="cpu")
    model.fit(np.arange(10), domain.target[:10])
    with torch.no_grad():
        model.model_.pooling.weight.copy_(torch.eye(16))
        model.model_.pooling.bias.zero_()
    unit = domain.x / np.linalg.norm(domain.x, axis=1, keepdims=True)
    nearest = np.argmax(unit @ domain.class_embeddings.T, axis=1)
    np.testing.assert_array_equal(model.predict(np.arange(300)), model.classes_[nearest])


def test_zero_shot_without_labels_takes_its_classes_from_a_dict(domain):
    vectors = {f"class {c}": v for c, v in enumerate(domain.class_embeddings)}
    model = GITClassifier(graph=_graph(domain), mode="zero_shot", class_embeddings=vectors, hidden_dim=None,
                          random_state=0, device="cpu").fit(np.arange(10))
    assert list(model.classes_) == sorted(vectors)
    assert set(model.predict(np.arange(50))) <= set(vectors)


def _induced(domain, nodes):
    """The subgraph of ``domain`` on ``nodes`` (relabelled 0..), with its features and labels."""
    keep = np.zeros(len(domain.x), dtype=bool)
    keep[nodes] = True
    new_id = np.cumsum(keep) - 1
    edges = domain.edge_index[:, keep[domain.edge_index].all(0)]
    return {"x": domain.x[nodes], "edge_index": new_id[edges]}, domain.target[nodes]


def test_specialization_pulls_embeddings_onto_their_class_vectors_and_helps_zero_shot_on_another_graph():
    domain = make_graph_domains(1, n_nodes=600, n_features=16, noise=1.5, random_state=3)[0]
    (first, y_first), (second, y_second) = _induced(domain, np.arange(300)), _induced(domain, np.arange(300, 600))
    nodes = np.arange(300)
    common = dict(mode="zero_shot", class_embeddings=domain.class_embeddings, hidden_dim=None, random_state=0,
                  device="cpu")
    specialised = GITClassifier(graph=first, specialize=True, sft_epochs=60, sft_lr=1e-2, **common)
    specialised.fit(nodes, y_first)
    sft = specialised.history_["sft_loss"]
    assert sft[-1] < 0.5 * sft[0]
    plain = GITClassifier(graph=second, **common).fit(nodes[:5], y_second[:5])
    transferred = GITClassifier(graph=second, pretrained=specialised, **common).fit(nodes[:5], y_second[:5])
    assert transferred.score(nodes, y_second) > plain.score(nodes, y_second) + 0.2


def test_edge_tasks_classify_node_pairs():
    domain = make_graph_domains(1, task="edge", n_nodes=200, n_classes=3, n_features=16, random_state=0)[0]
    pairs, target = domain.pairs, domain.target
    model = GITClassifier(task="edge", graph=_graph(domain), mode="in_context", **SMALL)
    support = _support(target, 3)
    model.fit(pairs[support], target[support])
    assert model.predict(pairs[:30]).shape == (30,)
    np.testing.assert_allclose(model.decision_function(pairs[:10]), model.decision_function(pairs[:10, ::-1]),
                               atol=1e-5)
    non_edge = np.array([[0, 0]])
    assert model.predict(non_edge).shape == (1,)  # any pair has a task-tree, edge or not


def test_graph_tasks_classify_whole_graphs():
    domain = make_graph_domains(1, task="graph", n_graphs=60, n_classes=3, n_features=16, random_state=0)[0]
    model = GITClassifier(task="graph", **SMALL, max_epochs=40, lr=5e-3)
    model.fit(domain.graphs[:40], domain.target[:40])
    assert model.score(domain.graphs[40:], domain.target[40:]) > 0.5
    smiles = GITClassifier(task="graph", mode="in_context", **SMALL)
    with pytest.raises(TypeError, match="sequence of graphs"):
        smiles.fit(np.ones((3, 2)), [0, 1, 0])


def test_networkx_node_texts_go_through_the_text_encoder():
    graph = nx.karate_club_graph()
    for node, data in graph.nodes(data=True):
        data["text"] = "member of the instructor club" if data["club"] == "Mr. Hi" else "member of the officer club"
    y = np.array([graph.nodes[n]["club"] for n in graph])
    model = GITClassifier(graph=graph, mode="zero_shot", text_encoder="tfidf-svd", text_dim=8, hidden_dim=None,
                          num_layers=0, class_texts={"Mr. Hi": "instructor", "Officer": "officer"},
                          random_state=0, device="cpu")
    model.fit(np.arange(34), y)
    with torch.no_grad():
        model.model_.pooling.weight.copy_(torch.eye(8))
        model.model_.pooling.bias.zero_()
    assert model.score(np.arange(34), y) == 1.0


def test_a_callable_text_encoder_is_checked():
    graph = nx.path_graph(4)
    nx.set_node_attributes(graph, {n: f"node {n}" for n in graph}, "text")
    good = GITClassifier(graph=graph, mode="in_context", text_encoder=lambda texts: np.ones((len(texts), 3)),
                         **SMALL).fit([0, 1], ["a", "b"])
    assert good.predict([2, 3]).shape == (2,)
    bad = GITClassifier(graph=graph, mode="in_context", text_encoder=lambda texts: np.ones((1, 3)), **SMALL)
    with pytest.raises(ValueError, match="returned shape"):
        bad.fit([0, 1], ["a", "b"])


def test_an_isolated_node_gets_a_finite_prediction():
    graph = {"x": np.eye(4, dtype=np.float32), "edge_index": np.array([[0, 1], [1, 2]])}
    model = GITClassifier(graph=graph, mode="in_context", **SMALL).fit([0, 1], [0, 1])
    assert np.isfinite(model.predict_proba([3])).all()


# ------------------------------------------------------------- persistence
def test_a_saved_backbone_loads_with_its_weights_and_reads_features_of_another_width(tmp_path, domain):
    encoder = GITEncoder(**SMALL, max_epochs=1).fit(TaskSet(_graph(domain)))
    path = tmp_path / "git.pt"
    encoder.save(path)
    again = GITEncoder(pretrained=str(path), max_epochs=0, random_state=0, device="cpu").fit(TaskSet(_graph(domain)))
    np.testing.assert_allclose(again.transform(TaskSet(_graph(domain))), encoder.transform(TaskSet(_graph(domain))),
                               atol=1e-5)
    wider = {"x": np.hstack([domain.x, domain.x]), "edge_index": domain.edge_index}
    model = GITClassifier(graph=wider, pretrained=str(path), mode="in_context", random_state=0, device="cpu")
    support = _support(domain.target, 3)
    model.fit(support, domain.target[support])
    assert model.model_.feature_dim == 32 and model.model_.input_dim == 16
    assert model.predict(np.arange(20)).shape == (20,)


def test_a_fitted_classifier_pickles(domain):
    support = _support(domain.target, 2)
    model = GITClassifier(graph=_graph(domain), mode="in_context", **SMALL).fit(support, domain.target[support])
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(again.predict_proba(np.arange(30)), model.predict_proba(np.arange(30)))


def test_an_unfitted_pretrained_estimator_is_refused():
    with pytest.raises(ValueError, match="unfitted GITEncoder"):
        GITClassifier(pretrained=GITEncoder(), mode="in_context").fit(np.ones((4, 2)), [0, 1, 0, 1])


# --------------------------------------------------------------- bad input
@pytest.mark.parametrize("params, X, y, error, match", [
    (dict(), np.arange(5), [0, 1, 0, 1, 0], ValueError, "graph="),
    (dict(task="edge"), np.ones((4, 2), dtype=int), [0, 1, 0, 1], ValueError, "task='edge' needs graph"),
    (dict(graph="karate"), np.array([0, 40]), [0, 1], ValueError, "outside the graph"),
    (dict(graph="karate"), np.array([0.5, 1.0]), [0, 1], ValueError, "integer node ids"),
    (dict(graph="karate", task="edge"), np.array([0, 1]), [0, 1], ValueError, r"shape \(n, 2\)"),
    (dict(graph="karate"), np.array([0, 1, 2]), [0, 1], ValueError, "3 examples but y has 2"),
    (dict(graph="bare"), np.array([0, 1]), [0, 1], ValueError, "no node features"),
    (dict(graph="texts"), np.array([0, 1]), [0, 1], ValueError, "text_encoder=None"),
    (dict(graph="karate", mode="zero_shot"), np.array([0, 1]), [0, 1], ValueError, "class_embeddings"),
    (dict(graph="karate", mode="zero_shot", class_embeddings=np.eye(2)), np.array([0, 1]), [0, 1], ValueError,
     "hidden_dim=None"),
    (dict(graph="karate", specialize=True), np.array([0, 1]), [0, 1], ValueError, "class_embeddings"),
    (dict(task="graph"), np.ones((3, 2)), [0, 1, 0], TypeError, "sequence of graphs"),
    (dict(), [nx.path_graph(3), nx.path_graph(4)], [0, 1], TypeError, "task='graph'"),
])
def test_bad_input_names_the_problem(params, X, y, error, match):
    graphs = {"karate": {"x": np.eye(34, dtype=np.float32), "edge_index": np.array(nx.karate_club_graph().edges).T},
              "bare": nx.path_graph(4), "texts": _texts_graph()}
    if isinstance(params.get("graph"), str):
        params = {**params, "graph": graphs[params["graph"]]}
    with pytest.raises(error, match=match):
        GITClassifier(**params, **SMALL).fit(X, y)


def _texts_graph():
    graph = nx.path_graph(4)
    nx.set_node_attributes(graph, {n: "a node" for n in graph}, "text")
    return graph


# ------------------------------------------- task-trees against a direct build
@st.composite
def small_graphs(draw):
    n = draw(st.integers(1, 12))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))
    edges = sorted({(min(u, v), max(u, v)) for u, v in pairs if u != v})
    return n, np.array(edges, dtype=np.int64).reshape(-1, 2).T


@settings(max_examples=40, deadline=None)
@given(small_graphs(), st.sampled_from(["node", "edge"]), st.integers(0, 2), st.data())
def test_batched_task_trees_embed_as_the_whole_graph_does(drawn, task, num_layers, data):
    """Exact trees of any batch of tasks give the embeddings of message passing over the whole graph."""
    n, edge_index = drawn
    x = np.random.RandomState(n).randn(n, 3).astype(np.float32)
    if task == "node":
        index = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)))
    else:
        index = np.array(data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1,
                                            max_size=8)))
    task_graph = read_task_graph([TaskSet({"x": x, "edge_index": edge_index}, task, index)], None)
    torch.manual_seed(0)
    model = GITModel(3, 3 if num_layers == 0 else 4, num_layers).eval()
    from skicml.graph._git._backbone import TaskTreeNet

    with torch.no_grad():
        batched = TaskTreeNet(model, task_graph, 2).eval()(torch.arange(task_graph.n_tasks))
        both = torch.as_tensor(np.concatenate([edge_index, edge_index[::-1]], axis=1))
        z = model.encode(torch.as_tensor(x), both)
        roots = torch.as_tensor(index.reshape(len(index), -1))
        direct = model.pooling(z[roots].mean(1))
    np.testing.assert_allclose(batched.numpy(), direct.numpy(), atol=1e-5)


# ----------------------------------------------------------------- issue 64
def test_the_encoder_names_node_features_of_another_width():
    domains = make_graph_domains(2, n_nodes=40, n_features=8, random_state=0)
    encoder = GITEncoder(**SMALL, max_epochs=1).fit(TaskSet(_graph(domains[0])))
    wider = {"x": np.hstack([domains[1].x, domains[1].x]), "edge_index": domains[1].edge_index}
    with pytest.raises(ValueError, match="16-d node features.*fitted on 8-d"):
        encoder.transform(TaskSet(wider))


@pytest.mark.parametrize("graph, match", [
    ("karate", r"graph=.*invalid SMILES 'karate'"),
    ({"x": np.eye(3), "edge_index": np.array([[0, 5], [1, 2]])}, r"graph=: edge_index refers to node"),
    ({"x": np.eye(3), "edges": np.array([[0], [1]])}, r"graph=: unknown keys"),
    ({"x": np.ones((2, 2)), "edge_index": np.array([[0], [1]]), "num_nodes": 3}, r"graph=: x must have one row"),
    (nx.path_graph(3), r"graph= has no node features"),
])
def test_a_malformed_graph_parameter_is_reported_as_graph_not_X(graph, match):
    pytest.importorskip("rdkit") if isinstance(graph, str) else None
    with pytest.raises(ValueError, match=match) as info:
        GITClassifier(graph=graph, mode="in_context", **SMALL).fit([0, 1], [0, 1])
    assert "of X" not in str(info.value)


def test_more_neighbours_than_rows_warns_and_clips_naming_n_neighbors():
    X = np.random.RandomState(0).normal(size=(10, 3))
    for estimator in (GITEncoder(**SMALL, max_epochs=1, n_neighbors=100),
                      GITClassifier(**SMALL, max_epochs=1, n_neighbors=100)):
        with pytest.warns(UserWarning, match=r"n_neighbors=100.*10 rows.*9"):
            estimator.fit(X, [0, 1] * 5) if isinstance(estimator, GITClassifier) else estimator.fit(X)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GITEncoder(**SMALL, max_epochs=1, n_neighbors=9).fit(X)


@pytest.mark.parametrize("X", [[], (), np.array([])])
def test_an_encoder_fitted_on_nothing_says_no_graphs(X):
    with pytest.raises(ValueError, match="no task sets.*no graphs"):
        GITEncoder(**SMALL).fit(X)


def test_save_refuses_a_missing_directory(tmp_path, domain):
    encoder = GITEncoder(**SMALL, max_epochs=1).fit(np.random.RandomState(0).normal(size=(12, 3)))
    with pytest.raises(FileNotFoundError, match="directory .*typo.* does not exist"):
        encoder.save(tmp_path / "typo" / "deeper" / "git.pt")
    assert not (tmp_path / "typo").exists()
    encoder.save(tmp_path / "git.pt")
    assert (tmp_path / "git.pt").exists()
