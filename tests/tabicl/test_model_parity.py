"""Our TabICLModel against the official ``tabicl==0.1.4`` module.

The official package builds its network without downloading weights, so a
randomly initialised official model at a small config is loaded into ours
and the logits must agree.
"""

import numpy as np
import pytest
import torch

from skicml.tabicl._model import TabICLModel, class_group_sizes

official = pytest.importorskip("tabicl.model.tabicl", reason="parity needs tabicl==0.1.4 (test extra)")

SMALL = dict(max_classes=10, embed_dim=32, col_num_blocks=2, col_nhead=4, col_num_inds=8,
             row_num_blocks=2, row_nhead=4, row_num_cls=2, row_rope_base=100000, icl_num_blocks=2,
             icl_nhead=4, ff_factor=2)


def _randomised_official(config, seed=0):
    torch.manual_seed(seed)
    model = official.TabICL(**config)
    # Official blocks start as the identity; perturb every weight so the test
    # exercises every path.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("rope.freqs"):
                continue
            param.add_(0.2 * torch.randn_like(param))
    return model.eval()


def _pair(config=SMALL, seed=0):
    theirs = _randomised_official(config, seed)
    ours = TabICLModel(**config).eval()
    missing, unexpected = ours.load_state_dict(theirs.state_dict(), strict=True)
    assert not missing and not unexpected
    return theirs, ours


def _table(n_train, n_test, n_features, n_classes, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, n_train + n_test, n_features, generator=g)
    y = torch.stack([torch.randperm(n_train, generator=g) % n_classes for _ in range(batch)]).float()
    return X, y


def test_state_dict_names_and_shapes_match_official_default():
    theirs = official.TabICL()
    ours = TabICLModel()
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }
    assert sum(p.numel() for p in ours.parameters()) == pytest.approx(27.05e6, rel=0.01)


@pytest.mark.parametrize("n_train, n_test, n_features, n_classes", [(40, 13, 5, 3), (25, 1, 1, 2), (60, 30, 9, 10)])
def test_logits_match_official_inference(n_train, n_test, n_features, n_classes):
    theirs, ours = _pair()
    X, y = _table(n_train, n_test, n_features, n_classes)
    with torch.no_grad():
        expected = theirs(X, y, return_logits=True)
        got = ours.predict_logits(X, y)
        cached = ours.predict_with_context(ours.build_context(X[:, :n_train], y), X[:, n_train:])
    assert got.shape == expected.shape == (2, n_test, n_classes)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(cached, expected, atol=1e-4, rtol=1e-4)


def test_training_forward_matches_official_with_padded_tables():
    theirs, ours = _pair()
    theirs.train()
    ours.train()
    X, y = _table(30, 10, 7, 4, batch=3)
    n_features = torch.tensor([7, 4, 2])
    X = X * (torch.arange(7) < n_features.view(3, 1, 1))
    expected = theirs(X, y, d=n_features)
    got = ours(X, y.long(), n_features=n_features)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    got.sum().backward()  # gradients flow through every stage
    assert ours.col_embedder.tf_col.blocks[0].ind_vectors.grad is not None


@pytest.mark.parametrize("n_classes", [11, 25])
def test_hierarchical_path_matches_official(n_classes):
    theirs, ours = _pair()
    X, y = _table(4 * n_classes, 7, 4, n_classes, batch=1, seed=n_classes)
    with torch.no_grad():
        expected = theirs(X, y, return_logits=True, softmax_temperature=0.9)
        got = ours.predict_logits(X, y, softmax_temperature=0.9)
    assert got.shape == (1, 7, n_classes)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_group_sizes_match_official():
    icl = official.TabICL(**SMALL).icl_predictor
    for k in (11, 25, 99, 101, 150, 1000):
        assignments, groups = icl._grouping(k)
        assert class_group_sizes(k) == np.bincount(assignments.numpy(), minlength=groups).tolist()
    assert class_group_sizes(25) == [9, 8, 8]


def test_classifier_matches_official_estimator(tmp_path):
    """End to end, preprocessing and ensembling included: the same checkpoint
    file gives the same probabilities in the official estimator and ours.

    Column shuffles are off here: with them, tabicl 0.1.4 reuses the first
    member's column embeddings through the inverse of the intended mapping,
    so its members see other column orders than the ones it drew (see
    ``test_official_shuffle_reuse_deviates``). Ours see the drawn orders.
    """
    from sklearn.datasets import load_wine

    from skicml import TabICLClassifier

    official_sklearn = pytest.importorskip("tabicl.sklearn.classifier")
    theirs = _randomised_official(SMALL, seed=3)
    path = tmp_path / "official.ckpt"
    torch.save({"config": SMALL, "state_dict": theirs.state_dict()}, path)
    X, y = load_wine(return_X_y=True)
    X_train, y_train, X_test = X[::2], y[::2], X[1::2]
    kwargs = dict(n_estimators=6, norm_methods=["none", "power"], feat_shuffle_method="none", random_state=42,
                  batch_size=8, softmax_temperature=0.9)
    expected = official_sklearn.TabICLClassifier(
        model_path=path, device="cpu", allow_auto_download=False, **kwargs
    ).fit(X_train, y_train).predict_proba(X_test)
    got = TabICLClassifier(model_path=path, device="cpu", pca_components=None, **kwargs).fit(
        X_train, y_train).predict_proba(X_test)
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_official_shuffle_reuse_deviates():
    """Documents the upstream discrepancy the estimator does not copy."""
    theirs = _randomised_official(SMALL, seed=3)
    X = torch.randn(1, 50, 5, generator=torch.Generator().manual_seed(0))
    y = (torch.arange(40) % 3).float().unsqueeze(0)
    first, second = [0, 1, 2, 3, 4], [1, 2, 3, 4, 0]
    tables = torch.cat([X[:, :, first], X[:, :, second]])
    with torch.no_grad():
        reused = theirs(tables, y.repeat(2, 1), feature_shuffles=[first, second])
        recomputed = theirs(tables, y.repeat(2, 1))
        inverse_order = theirs(X[:, :, [4, 0, 1, 2, 3]], y)
    torch.testing.assert_close(reused[0], recomputed[0])
    assert not torch.allclose(reused[1], recomputed[1], atol=1e-3)
    torch.testing.assert_close(reused[1], inverse_order[0], atol=1e-5, rtol=1e-5)


def test_members_see_their_drawn_column_order(tmp_path):
    """Our shared column embeddings, permuted per member, equal a fresh run of
    the network on that member's permuted table (spec section 6, item 4)."""
    from sklearn.datasets import load_wine

    from skicml import TabICLClassifier

    theirs = _randomised_official(SMALL, seed=3)
    path = tmp_path / "official.ckpt"
    torch.save({"config": SMALL, "state_dict": theirs.state_dict()}, path)
    X, y = load_wine(return_X_y=True)
    clf = TabICLClassifier(model_path=path, n_estimators=4, norm_methods=["none"], class_shift=False,
                           softmax_temperature=0.9, random_state=0, device="cpu").fit(X[::2], y[::2])
    X_test = clf.ensemble_.transform(clf.encoder_.transform(X[1::2]))
    assert [method for method, _, _ in clf.ensemble_.configs_] == ["none", "pca:none"] * 2
    total = 0
    for method, permutation, offset in clf.ensemble_.configs_:
        # each member reads its own view: the raw columns or the principal components
        table = torch.from_numpy(np.vstack([clf.ensemble_.X_train_[method], X_test[method]])[:, permutation])
        table = table.unsqueeze(0)
        with torch.no_grad():
            total = total + theirs(table, torch.from_numpy(clf.ensemble_.y_train_).float().unsqueeze(0))[0]
    expected = torch.softmax(total / len(clf.ensemble_.configs_) / 0.9, -1).double().numpy()
    np.testing.assert_allclose(clf.predict_proba(X[1::2]), expected, atol=1e-4)
