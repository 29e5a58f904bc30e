"""The network's inference API (build a context, predict with it) and the
ensemble's contexts built on it (skicml.tabicl._inference)."""

import pickle

import numpy as np
import pytest
import torch

from skicml import TabICLClassifier
from skicml.tabicl import TabICLModel


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = TabICLModel(max_classes=5, embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=4,
                        row_num_blocks=2, row_nhead=2, row_num_cls=2, icl_num_blocks=2, icl_nhead=2).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("n_classes", [3, 8])  # 8 > max_classes: the class tree
@pytest.mark.parametrize("cache", [True, False])
def test_context_predicts_as_the_whole_table(model, n_classes, cache):
    g = torch.Generator().manual_seed(n_classes)
    X = torch.randn(1, 48, 5, generator=g)
    y = (torch.arange(40) % n_classes).unsqueeze(0)
    permutation = np.array([3, 0, 4, 1, 2])
    with torch.no_grad():
        expected = model.predict_logits(X[:, :, permutation], y, softmax_temperature=0.8)
        context = model.build_context(X[:, :40], y, permutation=permutation, cache=cache)
        got = model.predict_with_context(context, X[:, 40:], softmax_temperature=0.8)
        shared = model.build_context(model.column_context(X[:, :40]), y, permutation=permutation, cache=cache)
        rows = model.encode_with_context(shared.columns, X[:, 40:], [None, permutation])
        from_rows = model.predict_with_context(shared, rows=rows[1], softmax_temperature=0.8)
    assert (context.icl is not None) == (cache and n_classes <= model.max_classes)
    assert got.shape == (1, 8, n_classes)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(from_rows, got, atol=1e-6, rtol=1e-6)
    assert not torch.allclose(model.predict_with_context(shared, rows=rows[0]), got)


def test_selected_context_is_the_subtable(model):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(1, 36, 4, generator=g)
    y = (torch.arange(30) % 3).unsqueeze(0)
    keep = torch.arange(0, 30, 2)
    with torch.no_grad():
        context = model.build_context(X[:, :30], y).select(keep)
        got = model.predict_with_context(context, X[:, 30:])
        # The column stage still summarises all 30 training rows; only the
        # in-context stage sees the 15 kept ones.
        rows = model.encode_rows(X, 30)
        expected = model.logits_from_rows(torch.cat([rows[:, keep], rows[:, 30:]], dim=1), y[:, keep])
    assert context.icl is None and context.rows.shape[1] == 15
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)


def test_pickled_ensemble_context_keeps_members_sharing_their_view():
    rng = np.random.RandomState(0)
    X, y = rng.randn(40, 3), rng.randint(0, 2, 40)
    clf = TabICLClassifier(n_estimators=8, pca_components=None, random_state=0, device="cpu").fit(X, y)
    context = pickle.loads(pickle.dumps(clf)).context_
    views = [view for view, _, _ in clf.ensemble_.configs_]
    assert len(set(views)) < len(views)
    for view, member in zip(views, context.members):
        assert member.columns.cells is context.columns[view].cells
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X), clf.predict_proba(X))
