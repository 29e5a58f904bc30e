"""GraphGPTEncoder, GraphGPTRegressor and GraphGPTClassifier: learnability,
pretrained backbones, persistence, scikit-learn composition and errors
(scikit-learn's own checks run in tests/test_common.py)."""

import pickle

import joblib
import networkx as nx
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import Ridge
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skicml.datasets import make_triangle_graphs
from skicml.graph import GraphGPTClassifier, GraphGPTEncoder, GraphGPTRegressor

TINY = dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, random_state=0, device="cpu")


def _shapes(n_graphs, seed=0):
    """Cycles, paths and stars of 3-10 nodes with degree and edge-kind
    attributes, labelled by shape."""
    rng = np.random.RandomState(seed)
    makers = {"cycle": nx.cycle_graph, "path": nx.path_graph, "star": lambda n: nx.star_graph(n - 1)}
    kinds = rng.choice(sorted(makers), n_graphs)
    graphs = []
    for kind in kinds:
        graph = makers[kind](int(rng.randint(3, 11)))
        nx.set_node_attributes(graph, dict(graph.degree), "x")
        nx.set_edge_attributes(graph, {e: 1 + (min(e) == 0) for e in graph.edges}, "edge_attr")
        graphs.append(graph)
    return graphs, kinds


@pytest.fixture(scope="module")
def shapes():
    return _shapes(36)


@pytest.fixture(scope="module")
def encoder(shapes):
    return GraphGPTEncoder(max_epochs=3, batch_size=16, **TINY).fit(shapes[0])


@pytest.fixture(scope="module")
def regressor(shapes):
    graphs, _ = shapes
    y = np.array([g.number_of_edges() for g in graphs], dtype=float)
    return GraphGPTRegressor(max_epochs=3, **TINY).fit(graphs, y)


# ------------------------------------------------------------ learnability
def test_regressor_learns_triangle_counts():
    graphs, y = make_triangle_graphs(400, min_nodes=4, max_nodes=10, edge_probability=(0.1, 0.6),
                                     random_state=0)
    model = GraphGPTRegressor(max_epochs=20, lr=3e-3, **TINY).fit(graphs[:300], y[:300])
    mae = np.abs(model.predict(graphs[300:]) - y[300:]).mean()
    constant = np.abs(np.median(y[:300]) - y[300:]).mean()
    assert mae < 0.7 * constant, (mae, constant)
    assert len(model.history_["train_loss"]) == 20 and model.n_iter_ == 20


def test_classifier_separates_cycles_from_paths_with_string_labels():
    def cycles_and_paths(n_graphs, rng):
        sizes, is_cycle = rng.randint(4, 16, n_graphs), rng.rand(n_graphs) < 0.5
        graphs = [nx.cycle_graph(n) if c else nx.path_graph(n) for n, c in zip(sizes, is_cycle)]
        return graphs, np.where(is_cycle, "cycle", "path")

    rng = np.random.RandomState(0)
    (X, y), (X_test, y_test) = cycles_and_paths(120, rng), cycles_and_paths(60, rng)
    model = GraphGPTClassifier(max_epochs=15, lr=3e-3, **TINY).fit(X, y)
    assert list(model.classes_) == ["cycle", "path"]
    predicted = model.predict(X_test)
    assert predicted.dtype == y.dtype and set(predicted) <= {"cycle", "path"}
    assert (predicted == y_test).mean() >= 0.8
    proba = model.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(1), 1)
    np.testing.assert_array_equal(model.classes_[proba.argmax(1)], predicted)
    np.testing.assert_array_equal(model.decision_function(X_test) > 0, predicted == "path")


def test_encoder_pretraining_loss_decreases():
    graphs, _ = _shapes(48, seed=1)
    encoder = GraphGPTEncoder(max_epochs=12, batch_size=8, lr=3e-3, **TINY).fit(graphs)
    history = encoder.history_
    assert len(history) == 12 and np.isfinite(history).all()
    assert np.mean(history[-3:]) < 0.85 * np.mean(history[:3])
    Z = encoder.transform(graphs)
    assert Z.shape == (48, 16) and np.isfinite(Z).all()
    assert list(encoder.get_feature_names_out())[:2] == ["graphgptencoder0", "graphgptencoder1"]


def test_score_samples_flags_graphs_unlike_the_training_set():
    cycles = [nx.cycle_graph(n) for n in range(5, 15)] * 4
    encoder = GraphGPTEncoder(reindex="sequential", node_scope=16, max_epochs=30, batch_size=8, lr=3e-3,
                              **TINY).fit(cycles)
    new_cycles = [nx.cycle_graph(n) for n in range(6, 14)]
    dense = [nx.gnp_random_graph(n, 0.6, seed=n) for n in range(6, 14)]
    scores = encoder.score_samples(new_cycles + dense)
    assert scores.shape == (16,) and np.isfinite(scores).all() and (scores < 0).all()
    assert roc_auc_score([1] * 8 + [0] * 8, scores) > 0.85
    assert scores[:8].mean() > scores[8:].mean() + 0.1
    # Deterministic, and a graph's score does not depend on the others in X.
    np.testing.assert_allclose(encoder.score_samples(dense[::-1] + new_cycles[:1])[-1], scores[0], atol=1e-6)


# ---------------------------------------------------- pretrained backbones
def test_pretrained_encoder_and_saved_file_give_the_same_model(shapes, encoder, tmp_path):
    graphs, kinds = shapes
    path = tmp_path / "backbone.pt"
    digest = encoder.save(path)
    assert isinstance(digest, str) and len(digest) == 64
    expected = encoder.transform(graphs)
    before = {k: v.clone() for k, v in encoder.backbone_.state_dict().items()}
    settings = dict(TINY, hidden_size=8)  # overridden by the backbone's
    for source in (encoder, str(path), FrozenEstimator(encoder)):
        again = GraphGPTEncoder(pretrained=source, max_epochs=0, **settings).fit(graphs)
        assert again.backbone_config_ == encoder.backbone_config_
        np.testing.assert_array_equal(again.transform(graphs), expected)
    y = (kinds == "cycle").astype(float)
    predictions = [GraphGPTRegressor(pretrained=source, max_epochs=2, **settings).fit(graphs, y).predict(graphs)
                   for source in (encoder, str(path))]
    np.testing.assert_array_equal(predictions[0], predictions[1])
    # Fine-tuning copies the backbone: the source encoder is untouched.
    for name, value in encoder.backbone_.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    again = GraphGPTEncoder(pretrained=str(path), max_epochs=1, **settings).fit(graphs)
    assert again.provenance_["sha256"] == digest and len(again.history_) == 1


@pytest.mark.parametrize("freeze", [True, False])
def test_freeze_backbone(shapes, encoder, freeze):
    graphs, kinds = shapes
    model = GraphGPTRegressor(pretrained=encoder, freeze_backbone=freeze, max_epochs=2, lr=1e-2, **TINY)
    model.fit(graphs, (kinds == "star").astype(float))
    source = encoder.backbone_.state_dict()
    changed = {name for name, value in model.backbone_.state_dict().items() if not torch.equal(value, source[name])}
    # The pretraining heads (token_proj, lm_head) are not used by fine-tuning.
    assert changed == set() if freeze else {"embed.weight", "layers.0.qkv.weight", "norm.weight"} <= changed
    assert model.backbone_ is model.module_.backbone


def test_cloned_estimator_with_a_fitted_encoder(shapes, encoder):
    graphs, kinds = shapes
    y = (kinds == "path").astype(float)
    model = GraphGPTRegressor(pretrained=encoder, max_epochs=1, **TINY)
    # clone() copies an estimator parameter unfitted: say so, and how to avoid it.
    with pytest.raises(ValueError, match="FrozenEstimator"):
        clone(model).fit(graphs, y)
    frozen = clone(model.set_params(pretrained=FrozenEstimator(encoder)))
    assert frozen.fit(graphs, y).predict(graphs).shape == (36,)


def test_shipped_backbone_reads_smiles():
    pytest.importorskip("rdkit")
    from skicml.datasets import load_qm9

    molecules = load_qm9(50, random_state=0)
    smiles, y = molecules["smiles"].tolist(), molecules["homo_lumo_gap"].to_numpy()
    model = GraphGPTRegressor(pretrained="graphgpt-qm9-small", max_epochs=1, n_views=1, random_state=0,
                              device="cpu").fit(smiles, y)
    predicted = model.predict(smiles[:10])
    assert predicted.shape == (10,) and np.isfinite(predicted).all()
    assert model.tokenizer_.n_node_attributes_ == 9 and model.tokenizer_.n_edge_attributes_ == 3
    assert model.backbone_config_["causal"] is False
    assert len(model.provenance_["sha256"]) == 64


# ---------------------------------------------------- persistence, sklearn
def test_pickle_and_joblib_keep_predictions(shapes, regressor, encoder, tmp_path):
    graphs, _ = shapes
    expected = regressor.predict(graphs)
    restored = pickle.loads(pickle.dumps(regressor))
    np.testing.assert_array_equal(restored.predict(graphs), expected)
    joblib.dump(regressor, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").predict(graphs), expected)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(encoder)).transform(graphs), encoder.transform(graphs))


def test_clone_and_get_params(regressor):
    params = regressor.get_params()
    assert params["hidden_size"] == 16 and params["pretrained"] is None
    copy = clone(regressor)
    assert copy.get_params() == params
    assert not hasattr(copy, "module_")
    with pytest.raises(NotFittedError):
        copy.predict([nx.path_graph(3)])
    assert copy.set_params(hidden_size=8).hidden_size == 8 and regressor.hidden_size == 16


def test_fit_leaves_the_global_torch_rng_alone(shapes):
    graphs, kinds = shapes
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    GraphGPTClassifier(max_epochs=1, **TINY).fit(graphs[:8], kinds[:8])
    GraphGPTEncoder(max_epochs=1, **TINY).fit(graphs[:8])
    torch.testing.assert_close(torch.rand(3), expected)


def test_grid_search_over_graphs(shapes):
    graphs, _ = shapes
    y = np.array([g.number_of_nodes() for g in graphs], dtype=float)
    search = GridSearchCV(GraphGPTRegressor(max_epochs=2, **TINY), {"hidden_size": [8, 16]}, cv=2,
                          scoring="neg_mean_absolute_error").fit(graphs, y)
    assert search.best_params_["hidden_size"] in (8, 16)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.backbone_config_["hidden_size"] == search.best_params_["hidden_size"]
    assert search.predict(graphs[:5]).shape == (5,)


def test_pipelines_on_a_feature_matrix():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(40, 4))
    y = X[:, 0] + rng.normal(scale=0.1, size=40)
    regressor = make_pipeline(StandardScaler(), GraphGPTRegressor(max_epochs=2, **TINY)).fit(X, y)
    assert regressor.predict(X).shape == (40,)
    assert regressor[-1].n_features_in_ == 4
    embed = make_pipeline(GraphGPTEncoder(max_epochs=1, **TINY), Ridge()).fit(X, y)
    assert embed[0].transform(X).shape == (40, 16) and embed.predict(X).shape == (40,)
    with pytest.raises(ValueError, match="4 features"):
        embed.predict(X[:, :3])


def test_multi_output_regression(shapes):
    graphs, _ = shapes
    y = np.column_stack([[g.number_of_nodes() for g in graphs], [g.number_of_edges() * 100 for g in graphs]])
    model = GraphGPTRegressor(max_epochs=2, **TINY).fit(graphs, y)
    predicted = model.predict(graphs)
    assert predicted.shape == (36, 2) and model.y_mean_.shape == (2,)
    # Targets are standardised per column and mapped back.
    assert 30 < predicted[:, 1].mean() / predicted[:, 0].mean() < 300
    assert model.predict(graphs[:1]).shape == (1, 2)
    single = GraphGPTRegressor(max_epochs=1, **TINY).fit(graphs, y[:, :1])
    assert single.predict(graphs).shape == (36, 1)


# ----------------------------------------------------------------- errors
def test_target_errors(shapes):
    graphs, kinds = shapes
    y = np.arange(36, dtype=float)
    for model, target in ((GraphGPTRegressor(max_epochs=1, **TINY), y), (GraphGPTClassifier(max_epochs=1, **TINY), kinds)):
        with pytest.raises(ValueError, match="requires y to be passed"):
            model.fit(graphs, None)
        with pytest.raises(ValueError, match="X has 36 graphs but y has 35 targets"):
            model.fit(graphs, target[:35])
    with pytest.raises(ValueError, match="y contains NaN"):
        GraphGPTRegressor(max_epochs=1, **TINY).fit(graphs, np.where(y == 3, np.nan, y))
    with pytest.raises(ValueError, match="y contains NaN"):
        GraphGPTRegressor(max_epochs=1, **TINY).fit(graphs, np.column_stack([y, np.where(y == 3, np.nan, y)]))
    with pytest.raises(ValueError, match="numeric"):
        GraphGPTRegressor(max_epochs=1, **TINY).fit(graphs, kinds)


def test_pretrained_errors(shapes, encoder, tmp_path):
    graphs, kinds = shapes
    y = (kinds == "cycle").astype(float)
    with pytest.raises(FileNotFoundError, match="no-such-backbone"):
        GraphGPTRegressor(pretrained="no-such-backbone", **TINY).fit(graphs, y)
    causal = GraphGPTEncoder(objective="ntp", max_epochs=1, **TINY).fit(graphs)
    assert causal.backbone_.causal
    causal.save(tmp_path / "ntp.pt")
    for source in (causal, str(tmp_path / "ntp.pt")):
        for model in (GraphGPTRegressor(pretrained=source, max_epochs=1, **TINY),
                      GraphGPTClassifier(pretrained=source, max_epochs=1, **TINY)):
            with pytest.raises(ValueError, match="causal"):
                model.fit(graphs, kinds if isinstance(model, GraphGPTClassifier) else y)
        with pytest.raises(ValueError, match="objective='smtp'"):
            GraphGPTEncoder(pretrained=source, max_epochs=1, **TINY).fit(graphs)
    # NTP pretraining continues from the causal backbone.
    assert GraphGPTEncoder(objective="ntp", pretrained=causal, max_epochs=1, **TINY).fit(graphs).backbone_.causal
    with pytest.raises(ValueError, match="objective='ntp'"):
        GraphGPTEncoder(objective="ntp", pretrained=encoder, max_epochs=1, **TINY).fit(graphs)
    # The backbone reads one attribute per node and per edge.
    bare = [nx.cycle_graph(n) for n in range(3, 39)]
    with pytest.raises(ValueError, match="0 node and 0 edge attributes; the tokenizer was fitted on 1 and 1"):
        GraphGPTRegressor(pretrained=encoder, max_epochs=1, **TINY).fit(bare, y)
    with pytest.raises(ValueError, match="fitted on 1 and 1"):
        encoder.transform(bare)


def test_input_errors(shapes, regressor, encoder):
    graphs, _ = shapes
    for model in (regressor, encoder):
        with pytest.raises(ValueError, match="fitted on graphs; pass graphs"):
            (model.predict if model is regressor else model.transform)(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="no graphs"):
        GraphGPTEncoder(**TINY).fit([])
    with pytest.raises(ValueError, match="more than node_scope=8"):
        GraphGPTEncoder(node_scope=8, **TINY).fit([nx.path_graph(9)])
    with pytest.raises(ValueError, match=r"'pooling' parameter of GraphGPTRegressor must be .* Got 'max' instead"):
        GraphGPTRegressor(pooling="max", **TINY).fit(graphs, np.ones(36))
    with pytest.raises(ValueError, match=r"'objective' parameter of GraphGPTEncoder must be .* Got 'mlm' instead"):
        GraphGPTEncoder(objective="mlm", **TINY).fit(graphs)
    with pytest.raises(ValueError, match="n_views"):
        GraphGPTEncoder(**dict(TINY, n_views=0)).fit(graphs)


def test_inference_shows_progress_only_when_verbose(shapes, regressor, encoder, capfd):
    # Issue 28, item 9: predict, predict_proba and transform were silent at verbose=1.
    import copy

    graphs, kinds = shapes
    classifier = GraphGPTClassifier(max_epochs=1, **TINY).fit(graphs[:12], kinds[:12])
    calls = [(regressor, "predict"), (classifier, "predict_proba"), (classifier, "predict"),
             (encoder, "transform"), (encoder, "score_samples")]
    capfd.readouterr()
    quiet = [getattr(model, method)(graphs) for model, method in calls]
    assert capfd.readouterr() == ("", "")
    for (model, method), expected in zip(calls, quiet):
        loud = copy.deepcopy(model).set_params(verbose=1)
        np.testing.assert_array_equal(getattr(loud, method)(graphs), expected)
        err = capfd.readouterr().err
        label = "predict" if method.startswith("predict") else method
        assert f"{type(model).__name__} {label}" in err and f"/{len(graphs)} [" in err, (method, err)
        assert "graph/s" in err
