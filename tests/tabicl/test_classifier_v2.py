"""TabICLClassifier with TabICL v2 weights: the network is picked from the checkpoint file."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.datasets import load_iris

from skicml import TabICLClassifier, TabICLRegressor
from skicml.tabicl import TabICLEmbedder, TabICLModel, TabICLv2Model

SMALL_V2 = dict(max_classes=4, embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1,
                row_nhead=2, row_num_cls=2, icl_num_blocks=2, icl_nhead=2)


def _checkpoint(tmp_path, network, config, name):
    torch.manual_seed(0)
    model = network(**config)
    with torch.no_grad():  # away from the zero initialisation, so every path matters
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    path = tmp_path / name
    # The network's full config, as every saved file holds it (v2 keys tell v2 apart).
    torch.save({"config": model.config, "state_dict": model.state_dict()}, path)
    return path, model.eval()


@pytest.fixture(scope="module")
def v2_file(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("v2"), TabICLv2Model, SMALL_V2, "v2.ckpt")


def _options(**extra):
    return dict(n_estimators=1, norm_methods="none", feat_shuffle_method="none", class_shift=False,
                pca_components=None, softmax_temperature=0.9, random_state=0, device="cpu", **extra)


def test_a_v2_file_builds_the_v2_network_and_predicts_what_it_computes(v2_file):
    path, network = v2_file
    X, y = load_iris(return_X_y=True)
    X, y = X[::3], y[::3]
    clf = TabICLClassifier(pretrained=path, **_options()).fit(X[:40], y[:40])
    assert isinstance(clf.model_, TabICLv2Model)
    # One member on the unshuffled, unnormalised view: the network's own softmax of its logits.
    X_view = clf.ensemble_.transform(X[40:])["none"]
    table = torch.from_numpy(np.vstack([clf.ensemble_.X_train_["none"], X_view])).unsqueeze(0)
    with torch.inference_mode():
        logits = network.predict_logits(table, torch.from_numpy(clf.ensemble_.y_train_).float().unsqueeze(0))[0]
    np.testing.assert_allclose(clf.predict_proba(X[40:]), torch.softmax(logits.double() / 0.9, -1).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_cache_batch_size_and_pickle_do_not_change_v2_probabilities(v2_file):
    path, _ = v2_file
    X, y = load_iris(return_X_y=True)
    options = dict(pretrained=path, n_estimators=4, random_state=0, device="cpu", inference_precision="float64")
    reference = TabICLClassifier(cache=True, batch_size=None, **options).fit(X[::2], y[::2])
    other = TabICLClassifier(cache=False, batch_size=1, **options).fit(X[::2], y[::2])
    assert reference.context_.cached and not other.context_.cached
    np.testing.assert_allclose(other.predict_proba(X[1::2]), reference.predict_proba(X[1::2]), rtol=1e-9, atol=1e-12)
    clone = pickle.loads(pickle.dumps(reference))
    np.testing.assert_allclose(clone.predict_proba(X[1::2]), reference.predict_proba(X[1::2]), rtol=1e-12)


def test_more_classes_than_the_v2_network_holds_go_through_the_tree(v2_file):
    path, _ = v2_file
    rng = np.random.RandomState(0)
    X = rng.normal(size=(70, 3))
    y = np.arange(70) % 7  # 7 classes > max_classes=4
    clf = TabICLClassifier(pretrained=path, n_estimators=2, random_state=0, device="cpu").fit(X, y)
    proba = clf.predict_proba(X[:5])
    assert proba.shape == (5, 7)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="use_hierarchical=True"):
        TabICLClassifier(pretrained=path, use_hierarchical=False, n_estimators=1, device="cpu").fit(X, y)


def test_networks_of_the_wrong_task_are_refused_with_a_reason(tmp_path, v2_file):
    path, _ = v2_file
    regression, _ = _checkpoint(tmp_path, TabICLv2Model, {**SMALL_V2, "max_classes": 0, "num_quantiles": 16},
                                "reg.ckpt")
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError, match="is a regression network"):
        TabICLClassifier(pretrained=regression, n_estimators=1, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="is a classification network"):
        TabICLRegressor(pretrained=path, n_estimators=1, device="cpu").fit(X, X[:, 0])
    with pytest.raises(ValueError, match="no label-free row representation"):
        TabICLEmbedder(pretrained=path, device="cpu").fit(X)


def test_a_v1_file_still_builds_the_v1_network(tmp_path):
    config = dict(max_classes=4, embed_dim=8, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1,
                  row_nhead=2, row_num_cls=2, icl_num_blocks=1, icl_nhead=2)
    path, _ = _checkpoint(tmp_path, TabICLModel, config, "v1.ckpt")
    X, y = load_iris(return_X_y=True)
    clf = TabICLClassifier(pretrained=path, n_estimators=1, device="cpu").fit(X, y)
    assert type(clf.model_) is TabICLModel
