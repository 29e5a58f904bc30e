"""``skicml::rbf_context_matmul`` and ``skicml::rbf_context_row_sums``.

Ground truth is the dense kernel built in numpy; the compositions are the
ones the RBF contexts use (row-normalised, masked, transposed by swapping
rows and anchors, wrapped in a scipy LinearOperator for randomized SVD).
"""

import doctest

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.linalg import LinearOperator, svds

from skicml.ops import (
    _rbf_context,
    rbf_context_matmul,
    rbf_context_matmul_reference,
    rbf_context_row_sums,
    rbf_context_row_sums_reference,
)
from skicml.ops.testing import check_custom_op, gpu_kernel_device


def _triton(name):
    from skicml.ops import _rbf_context_triton

    return getattr(_rbf_context_triton, f"rbf_context_{name}_triton")


def _dense_kernels(x, anchors, gamma, masks=None):
    """(n_masks, n, m) numpy kernels, straight from the definition."""
    x, anchors = np.asarray(x, dtype=np.float64), np.asarray(anchors, dtype=np.float64)
    masks = np.ones((1, x.shape[1])) if masks is None else np.asarray(masks, dtype=np.float64)
    sq = (x[:, None, :] - anchors[None, :, :]) ** 2
    return np.exp(-gamma * np.einsum("ikf,jf->jik", sq, masks))


def _data(n, m, p, d, n_masks, seed, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(size=(n, p)), dtype=dtype)
    anchors = torch.tensor(rng.normal(size=(m, p)), dtype=dtype)
    v = torch.tensor(rng.normal(size=(m, d)), dtype=dtype)
    masks = torch.tensor(rng.random((n_masks, p)) > 0.3)
    row_scale = torch.tensor(rng.random((n_masks, n)) + 0.5, dtype=dtype)
    col_scale = torch.tensor(rng.random((n_masks, m)) + 0.5, dtype=dtype)
    return x, anchors, v, masks, row_scale, col_scale


def _t(array):
    return torch.from_numpy(np.ascontiguousarray(array))


# --------------------------------------------------------------------------
# The registered ops and the Triton kernel


def test_gpu_kernel_is_testable_here():
    # No GPU in CI: conftest turns on Triton's interpreter, so the kernel is
    # still compared with the reference. This must not silently degrade.
    assert gpu_kernel_device() in ("cpu", "cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_and_kernel(dtype):
    x, anchors, v, masks, rs, cs = _data(37, 21, 5, 3, 3, seed=0, dtype=dtype)
    gamma = 0.3
    matmul_samples = [
        (x, anchors, v, gamma, None, None, None),
        (x, anchors, v, gamma, masks, rs, cs),
        (x, anchors, v, gamma, masks.to(dtype), None, cs),
        (anchors, x, v[:, :2].new_ones(37, 2), gamma, None, cs[:1], rs[:1]),
    ]
    row_sum_samples = [(x, anchors, gamma, None), (x, anchors, gamma, masks)]
    # The kernel accumulates in float32; float64 never reaches it (the op
    # runs its reference on CUDA for float64).
    use_kernel = dtype == torch.float32
    tol = {"atol": 1e-5, "rtol": 1e-5} if use_kernel else {"atol": 1e-12, "rtol": 1e-12}
    for name, op, reference, samples in (
        ("matmul", rbf_context_matmul, rbf_context_matmul_reference, matmul_samples),
        ("row_sums", rbf_context_row_sums, rbf_context_row_sums_reference, row_sum_samples),
    ):
        report = check_custom_op(
            op, samples, reference=reference, kernel=_triton(name) if use_kernel else None, **tol,
        )
        assert report["opcheck"] == len(samples)
        assert report["kernel_device"] == (gpu_kernel_device() if use_kernel else None)


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(0, 80), m=st.integers(0, 80), p=st.integers(0, 40), d=st.integers(1, 70),
    n_masks=st.integers(1, 3), scaled=st.booleans(), seed=st.integers(0, 2**16),
)
def test_triton_kernel_matches_reference_on_any_shape(n, m, p, d, n_masks, scaled, seed):
    # Covers padding of every block, several anchor blocks (m > 64), feature
    # blocks (p > 32) and output blocks (d > 64), and empty inputs.
    x, anchors, v, masks, rs, cs = _data(n, m, p, d, n_masks, seed, dtype=torch.float32)
    gamma = 0.5 / max(p, 1)
    scales = (rs, cs) if scaled else (None, None)
    got = _triton("matmul")(x, anchors, v, gamma, masks, *scales)
    expected = rbf_context_matmul_reference(x, anchors, v, gamma, masks, *scales)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    got = _triton("row_sums")(x, anchors, gamma, masks)
    torch.testing.assert_close(got, rbf_context_row_sums_reference(x, anchors, gamma, masks),
                               atol=1e-4, rtol=1e-4)


def test_triton_kernel_far_from_the_origin():
    # |x|^2 + |a|^2 - 2 x.a cancels badly at 1e3 in float32 without the
    # shift by the anchors' mean.
    x, anchors, v, masks, _, _ = _data(30, 20, 4, 2, 2, seed=1, dtype=torch.float32)
    x, anchors = x + 1e3, anchors + 1e3
    got = _triton("matmul")(x, anchors, v, 0.5, masks)
    expected = rbf_context_matmul_reference(x.double(), anchors.double(), v.double(), 0.5, masks)
    torch.testing.assert_close(got.double(), expected, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------------
# Against the dense kernel


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(50, 300), m=st.integers(1, 300), p=st.integers(1, 8), d=st.integers(1, 20),
    n_masks=st.integers(1, 5), use_masks=st.booleans(),
    scales=st.sampled_from(["none", "row", "col", "both"]),
    gamma=st.floats(0.05, 2.0), seed=st.integers(0, 2**16),
)
def test_matmul_and_its_transpose_match_the_dense_kernel(n, m, p, d, n_masks, use_masks, scales,
                                                          gamma, seed):
    x, anchors, v, masks, rs, cs = _data(n, m, p, d, n_masks, seed)
    gamma = gamma / p
    if not use_masks:
        masks, rs, cs = None, rs[:1], cs[:1]
    rs = rs if scales in ("row", "both") else None
    cs = cs if scales in ("col", "both") else None
    kernels = _dense_kernels(x, anchors, gamma, masks)
    if rs is not None:
        kernels = kernels * rs.numpy()[:, :, None]
    if cs is not None:
        kernels = kernels * cs.numpy()[:, None, :]
    total = kernels.sum(axis=0)  # (n, m)

    got = rbf_context_matmul(x, anchors, v, gamma, masks, rs, cs)
    np.testing.assert_allclose(got.numpy(), total @ v.numpy(), rtol=1e-10, atol=1e-10)
    # K(x, a)^T = K(a, x): the transpose swaps rows with anchors and the scales.
    u = torch.from_numpy(np.random.default_rng(seed + 1).normal(size=(n, d)))
    got_t = rbf_context_matmul(anchors, x, u, gamma, masks, cs, rs)
    np.testing.assert_allclose(got_t.numpy(), total.T @ u.numpy(), rtol=1e-10, atol=1e-10)

    expected_sums = _dense_kernels(x, anchors, gamma, masks).sum(axis=2)
    np.testing.assert_allclose(rbf_context_row_sums(x, anchors, gamma, masks).numpy(),
                               expected_sums, rtol=1e-10)


def _rbf_context_operator(x, anchors, gamma, masks=None):
    """Q = D_X^-1/2 joint D_A^-1/2 of the (masked) RBF context, built on the ops.

    The construction the contexts use: W = mean_j diag(1 / r_j) K_j, p = W^T 1 / N,
    Q = W diag(1 / sqrt(N p)); Q^T by swapping rows and anchors.
    """
    n, m = x.shape[0], anchors.shape[0]
    r = rbf_context_row_sums(x, anchors, gamma, masks)  # (J, n)
    n_masks = r.shape[0]
    inv_r = 1.0 / (n_masks * r)
    p = rbf_context_matmul(anchors, x, torch.ones(n, 1, dtype=x.dtype), gamma, masks,
                           col_scale=inv_r)[:, 0] / n
    row = inv_r / np.sqrt(n)
    col = (1.0 / torch.sqrt(p)).expand(n_masks, m)

    def matmat(v):
        v = torch.from_numpy(np.asarray(v, dtype=np.float64).reshape(m, -1))
        return rbf_context_matmul(x, anchors, v, gamma, masks, row, col).numpy()

    def rmatmat(u):
        u = torch.from_numpy(np.asarray(u, dtype=np.float64).reshape(n, -1))
        return rbf_context_matmul(anchors, x, u, gamma, masks, col, row).numpy()

    return LinearOperator((n, m), matvec=matmat, rmatvec=rmatmat, matmat=matmat,
                          rmatmat=rmatmat, dtype=np.float64), p


@pytest.mark.parametrize("n_masks", [None, 1, 4])
def test_context_operator_matches_the_dense_construction(n_masks):
    x, anchors, _, masks, _, _ = _data(120, 90, 6, 1, n_masks or 1, seed=3)
    masks = None if n_masks is None else masks
    gamma = 0.2
    kernels = _dense_kernels(x, anchors, gamma, masks)
    W = (kernels / kernels.sum(axis=2, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-12)
    p = W.sum(axis=0) / 120
    Q = W / np.sqrt(120 * p)

    op, p_op = _rbf_context_operator(x, anchors, gamma, masks)
    np.testing.assert_allclose(p_op.numpy(), p, rtol=1e-10)
    rng = np.random.default_rng(0)
    v, u = rng.normal(size=(90, 3)), rng.normal(size=(120, 3))
    np.testing.assert_allclose(op @ v, Q @ v, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(op.T @ u, Q.T @ u, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(op.matvec(v[:, 0]).ravel(), Q @ v[:, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(op.rmatvec(u[:, 0]).ravel(), Q.T @ u[:, 0], rtol=1e-10, atol=1e-12)

    # What the estimator does with it: the leading singular values, s_0 = 1.
    # (sklearn's randomized_svd takes arrays only; ARPACK takes the operator.)
    s = np.sort(svds(op, k=5, solver="arpack", random_state=0, return_singular_vectors=False))[::-1]
    s_dense = np.linalg.svd(Q, compute_uv=False)[:5]
    assert s[0] == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(s, s_dense, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------
# Tiling, dtypes and numerics


@pytest.mark.parametrize("tile", [1, 7, 100, 5000])
def test_tiling_changes_nothing(monkeypatch, tile):
    x, anchors, v, masks, rs, cs = _data(53, 31, 4, 3, 5, seed=4)
    expected = rbf_context_matmul(x, anchors, v, 0.4, masks, rs, cs)
    expected_sums = rbf_context_row_sums(x, anchors, 0.4, masks)
    monkeypatch.setattr(_rbf_context, "_TILE_ELEMENTS", tile)
    torch.testing.assert_close(rbf_context_matmul(x, anchors, v, 0.4, masks, rs, cs), expected,
                               atol=1e-13, rtol=1e-13)
    torch.testing.assert_close(rbf_context_row_sums(x, anchors, 0.4, masks), expected_sums,
                               atol=1e-13, rtol=1e-13)


def test_tiles_stay_within_the_budget(monkeypatch):
    monkeypatch.setattr(_rbf_context, "_TILE_ELEMENTS", 4096)
    x, anchors, _, masks, _, _ = _data(300, 200, 8, 1, 5, seed=5)
    sizes = [tile.numel() for *_, tile in _rbf_context._kernel_tiles(x, anchors, 0.1, masks)]
    assert max(sizes) <= 4096 and sum(sizes) == 5 * 300 * 200


def test_float32_matches_float64():
    x, anchors, v, masks, rs, cs = _data(60, 40, 5, 4, 2, seed=6)
    expected = rbf_context_matmul(x, anchors, v, 0.3, masks, rs, cs)
    got = rbf_context_matmul(x.float(), anchors.float(), v.float(), 0.3, masks, rs.float(),
                             cs.float())
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, atol=1e-5, rtol=1e-5)
    assert rbf_context_row_sums(x.float(), anchors.float(), 0.3).dtype == torch.float32


def test_self_similarity_is_one_far_from_the_origin():
    # Rounding of the expansion must not push exp above 1 or the diagonal
    # away from 1 (distances are clamped at 0, data shifted by the mean).
    x = _data(40, 1, 3, 1, 1, seed=7)[0] + 1e6
    K = rbf_context_matmul(x, x, torch.eye(40, dtype=torch.float64), 2.0)
    np.testing.assert_allclose(torch.diagonal(K).numpy(), 1.0, atol=1e-9)
    assert K.max() <= 1.0


def test_masks_select_features():
    x, anchors, v, _, _, _ = _data(20, 15, 4, 2, 1, seed=8)
    keep = torch.tensor([[True, False, True, False]])
    # A kept-features mask is the kernel on those features alone.
    torch.testing.assert_close(rbf_context_matmul(x, anchors, v, 0.5, keep),
                               rbf_context_matmul(x[:, [0, 2]], anchors[:, [0, 2]], v, 0.5))
    torch.testing.assert_close(rbf_context_matmul(x, anchors, v, 0.5, keep.double()),
                               rbf_context_matmul(x, anchors, v, 0.5, keep))
    torch.testing.assert_close(rbf_context_matmul(x, anchors, v, 0.5, torch.ones(1, 4)),
                               rbf_context_matmul(x, anchors, v, 0.5))
    # Nothing kept: every kernel value is exp(0) = 1.
    sums = rbf_context_row_sums(x, anchors, 0.5, torch.zeros(2, 4))
    torch.testing.assert_close(sums, torch.full((2, 20), 15.0, dtype=torch.float64))


def test_empty_inputs():
    x, anchors, v, _, _, _ = _data(0, 4, 3, 2, 1, seed=9)
    assert rbf_context_matmul(x, anchors, v, 1.0).shape == (0, 2)
    assert rbf_context_row_sums(x, anchors, 1.0).shape == (1, 0)
    x, anchors, v, _, _, _ = _data(5, 0, 3, 2, 1, seed=9)
    zeros = torch.zeros(5, 2, dtype=torch.float64)
    torch.testing.assert_close(rbf_context_matmul(x, anchors, v, 1.0), zeros)
    torch.testing.assert_close(rbf_context_row_sums(x, anchors, 1.0), zeros[:, :1].T)


# --------------------------------------------------------------------------
# Errors and documented limits


@pytest.mark.parametrize(
    "change, match",
    [
        ({"gamma": 0.0}, "gamma must be a finite float > 0"),
        ({"gamma": -1.0}, "gamma must be a finite float > 0"),
        ({"gamma": float("nan")}, "gamma must be a finite float > 0"),
        ({"gamma": float("inf")}, "gamma must be a finite float > 0"),
        ({"x": torch.zeros(6, dtype=torch.float64)}, "x must be a 2-D tensor"),
        ({"anchors": torch.zeros(4, 2, dtype=torch.float64)}, r"anchors must have shape \(m, 3\)"),
        ({"v": torch.zeros(5, 2, dtype=torch.float64)}, r"v must have shape \(4, d\)"),
        ({"v": torch.zeros(4, 2)}, "v must have the dtype of x"),
        ({"x": torch.zeros(6, 3, dtype=torch.int64)}, "x must be a floating-point tensor"),
        ({"masks": torch.ones(2, 4)}, r"masks must have shape \(n_masks, 3\)"),
        ({"masks": torch.ones(0, 3)}, r"masks must have shape \(n_masks, 3\)"),
        ({"row_scale": torch.ones(1, 5, dtype=torch.float64)}, r"row_scale must be .* \(1, 6\)"),
        ({"masks": torch.ones(2, 3), "row_scale": torch.ones(1, 6, dtype=torch.float64)},
         r"row_scale must be .* \(2, 6\)"),
        ({"col_scale": torch.ones(4, dtype=torch.float64)}, r"col_scale must be .* \(1, 4\)"),
    ],
)
def test_bad_arguments_raise_clear_errors(change, match):
    args = {"x": torch.zeros(6, 3, dtype=torch.float64),
            "anchors": torch.zeros(4, 3, dtype=torch.float64),
            "v": torch.zeros(4, 2, dtype=torch.float64), "gamma": 1.0, "masks": None,
            "row_scale": None, "col_scale": None}
    args.update(change)
    with pytest.raises(ValueError, match=match):
        rbf_context_matmul(**args)
    if not {"v", "row_scale", "col_scale"} & set(change):
        with pytest.raises(ValueError, match=match):
            rbf_context_row_sums(args["x"], args["anchors"], args["gamma"], args["masks"])


def test_not_differentiable():
    x, anchors, v, _, _, _ = _data(5, 4, 2, 1, 1, seed=10)
    out = rbf_context_matmul(x.requires_grad_(), anchors, v, 1.0)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        out.sum().backward()


def test_export_keeps_the_op():
    class Apply(torch.nn.Module):
        def forward(self, x, anchors, v):
            return rbf_context_matmul(x, anchors, v, 0.5)

    args = _data(6, 4, 2, 3, 1, seed=11)[:3]
    exported = torch.export.export(Apply(), args)
    assert any("skicml.rbf_context_matmul" in str(node.target) for node in exported.graph.nodes)
    torch.testing.assert_close(exported.module()(*args), rbf_context_matmul(*args, 0.5))


def test_op_examples_are_doctested():
    # tests/test_docstrings.py finds the ops' Examples through __test__ only.
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = finder.find(_rbf_context, "m", globs={})
    names = {t.name.rsplit(".", 1)[-1] for t in tests if t.examples}
    assert {"rbf_context_matmul", "rbf_context_row_sums"} <= names
