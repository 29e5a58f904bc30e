"""TabICL's published official checkpoints, by name, from a hub cache laid out on disk.

The cache holds random weights in the official format (``torch.save`` of
``{"config", "state_dict"}``) under the official repo and file names. With
``HF_HUB_OFFLINE=1`` our estimators load them by name, and with skicml's
default settings they predict what the official ``tabicl`` 2.2.0 estimators
predict when they resolve the same name in the same cache (AMP off): with an
official checkpoint, the defaults tuned for the shipped models (the fitted
temperature, the principal-component view) give way to the official ones.
``n_estimators`` keeps skicml's default (32, the paper's) and is passed to
the official estimator, whose default is 8; ``random_state`` is the official
default, 42.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from _official_v2 import official_or_skip

from skicml import TabICLClassifier, TabICLRegressor, _weights, config_context
from skicml.tabicl import TabICLEmbedder, TabICLModel, TabICLv2Model

OFFICIAL = official_or_skip()

CLASSIFIER = "tabicl-classifier-v2-20260212.ckpt"
REGRESSOR = "tabicl-regressor-v2-20260212.ckpt"
SMALL = dict(embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1, row_nhead=2,
             row_num_cls=2, icl_num_blocks=2, icl_nhead=2)


def _writer(network):
    torch.manual_seed(0)
    with torch.no_grad():  # away from the zero initialisation: every block matters
        for parameter in network.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))

    def write(path):
        torch.save({"config": network.config, "state_dict": network.state_dict()}, path)

    return write


@pytest.fixture
def official_cache(hub_cache):
    hub_cache.put(CLASSIFIER, _writer(TabICLv2Model(**SMALL, max_classes=10)))
    hub_cache.put(REGRESSOR, _writer(TabICLv2Model(**SMALL, max_classes=0, num_quantiles=999)))
    return hub_cache


def _table(n_classes=None):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(90, 4))
    X[:, 3] = np.round(X[:, 3])
    y = X @ rng.normal(size=4) + 0.3 * rng.normal(size=90)
    X[rng.rand(90) < 0.1, 1] = np.nan
    frame = pd.DataFrame(X, columns=list("abcd"))
    frame.insert(1, "kind", pd.Categorical(rng.choice(["x", "y", "z"], 90)))
    if n_classes is not None:
        y = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return frame.iloc[:70], frame.iloc[70:], y[:70]


def _official(name, checkpoint, **options):
    """The official estimator resolving ``checkpoint`` by name in the same (offline) cache."""
    with OFFICIAL.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(OFFICIAL, name)(checkpoint_version=checkpoint, allow_auto_download=False, device="cpu",
                                       use_amp=False, use_fa3=False, **options)


def test_classifier_by_published_name_equals_official(official_cache):
    X_train, X_test, y = _table(3)
    ours = TabICLClassifier(pretrained=CLASSIFIER, random_state=42).fit(X_train, y)
    got = ours.predict_proba(X_test)
    theirs = _official("TabICLClassifier", CLASSIFIER, n_estimators=ours.n_estimators)
    with OFFICIAL.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = theirs.fit(X_train, y).predict_proba(X_test)
    assert str(theirs.model_path_) == ours.model_provenance_["path"]  # the same cached file
    assert ours.official_checkpoint_ and ours.pca_components_ is None and ours.softmax_temperature_ == 0.9
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    assert np.abs(got - 1 / 3).max() > 0.05  # not uniform: the comparison says something
    # the user's own settings still win over the official defaults
    mine = TabICLClassifier(pretrained=CLASSIFIER, random_state=42, n_estimators=4, pca_components=2,
                            softmax_temperature="auto").fit(X_train, y)
    assert mine.pca_components_ == 2 and mine.softmax_temperature_ == 0.9


def test_regressor_by_published_name_equals_official(official_cache):
    X_train, X_test, y = _table()
    y = 40 * y + 300
    ours = TabICLRegressor(model_path=REGRESSOR, random_state=42).fit(X_train, y)  # the official alias
    theirs = _official("TabICLRegressor", REGRESSOR)
    with OFFICIAL.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = theirs.fit(X_train, y).predict(X_test)
    got = ours.predict(X_test)
    assert ours.n_estimators_ == theirs.n_estimators == 8
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * y.std())
    assert np.ptp(got) > 1e-3 * y.std()  # the rows differ: the comparison says something


def test_empty_cache_names_the_download_command(hub_cache):
    X_train, _, y = _table(3)
    for estimator in (TabICLClassifier(pretrained=CLASSIFIER), TabICLRegressor(pretrained=REGRESSOR)):
        with pytest.raises(FileNotFoundError, match=r"not in the local cache.*HF_HUB_OFFLINE=1.*skicml download"):
            estimator.fit(X_train, y)


def test_downloads_switched_off_by_the_setting(hub_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    fetched = []
    monkeypatch.setattr(_weights.PublishedWeights, "_download", lambda self: fetched.append(self.name))
    with config_context(allow_download=False), pytest.raises(
            _weights.NotCachedError, match=r"allow_download=False.*skicml download tabicl-classifier-v2"):
        TabICLClassifier(pretrained=CLASSIFIER).fit(*_table(3)[::2])
    assert fetched == []


def test_v1_published_name_loads_the_v1_network(hub_cache):
    name = "tabicl-classifier-v1-20250208.ckpt"
    config = dict(embed_dim=8, col_num_blocks=1, col_nhead=2, col_num_inds=4, row_num_blocks=1, row_nhead=2,
                  row_num_cls=2, icl_num_blocks=1, icl_nhead=2)
    network = TabICLModel(**config)
    hub_cache.put(name, lambda path: torch.save({"config": config, "state_dict": network.state_dict()}, path))
    X = np.random.RandomState(0).normal(size=(30, 3))
    embedder = TabICLEmbedder(pretrained=name, n_estimators=1, random_state=0).fit(X)
    assert isinstance(embedder.model_, TabICLModel) and embedder.transform(X).shape == (30, 16)


def test_shipped_default_keeps_its_own_defaults():
    X = np.random.RandomState(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = TabICLClassifier(n_estimators=2, random_state=0).fit(X, y)
    assert not clf.official_checkpoint_ and clf.pca_components_ == 16
