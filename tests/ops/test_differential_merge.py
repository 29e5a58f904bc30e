"""``skicml::differential_merge``: ViLAMP's differential feature merging.

Ground truth is :func:`differential_merge_reference`, the unchunked formula,
and the ViLAMP spec's hand-computed case (section 6). The chunked CPU kernel,
its recomputing backward and the Triton kernel (in the interpreter here) are
compared with it; hypothesis checks the properties the spec lists.
"""

import doctest

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import _differential_merge, differential_merge, differential_merge_reference
from skicml.ops.testing import check_custom_op, gpu_kernel_device

OP = _differential_merge._merge_op


def _triton():
    from skicml.ops._differential_merge_triton import differential_merge_triton

    return differential_merge_triton


def _data(n_frames, n_patches, dim, n, n_queries=2, seed=0, dtype=torch.float64, shift=0.0):
    """Random patches and queries, and rows that mix every layout the kernel
    special-cases: runs of consecutive frames sharing one query and one
    reference (or none), a frame that is its own reference, random rows."""
    g = torch.Generator().manual_seed(seed)
    patches = (torch.randn(n_frames, n_patches, dim, generator=g, dtype=torch.float64)
               + shift).to(dtype)
    queries = torch.randn(n_queries, dim, generator=g, dtype=torch.float64).to(dtype)
    frame = torch.randint(0, n_frames, (n,), generator=g)
    reference = torch.randint(-1, n_frames, (n,), generator=g)
    third = n // 3
    frame[:2 * third] = torch.arange(2 * third) % n_frames
    reference[:third] = 0
    reference[third:2 * third] = -1
    if n > 2 * third:
        reference[2 * third] = frame[2 * third]
    query = torch.randint(0, n_queries, (n,), generator=g)
    query[:2 * third] = 0
    return patches, queries, frame, reference, query


def _spec_case(dtype=torch.float64):
    # Spec section 6: frame 0 is the keyframe, frame 1 the merged frame.
    patches = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.6, 0.8]]], dtype=dtype)
    query = torch.tensor([[1.0, 0.0]], dtype=dtype)
    one, zero = torch.tensor([1]), torch.tensor([0])
    return patches, query, one, zero, zero


# --------------------------------------------------------------------------
# The registered op and the Triton kernel


def test_gpu_kernel_is_testable_here():
    # No GPU in CI: conftest turns on Triton's interpreter, so the kernel is
    # still compared with the reference. This must not silently degrade.
    assert gpu_kernel_device() in ("cpu", "cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_and_kernel(dtype):
    patches, queries, frame, reference, query = _data(9, 5, 6, 10, dtype=dtype)
    grad_patches, grad_queries = (t.detach().clone().requires_grad_() for t in (patches, queries))
    samples = [
        (grad_patches, grad_queries, frame, reference, query, 1.0, 0.1),
        (patches, queries, frame[:4], reference[:4], query[:4], -0.5, 2.0),
        (patches, queries, frame[:0], reference[:0], query[:0], 1.0, 0.01),
    ]
    # The kernel accumulates in float32: float64 never reaches it.
    use_kernel = dtype == torch.float32
    tol = {"atol": 1e-5, "rtol": 1e-5} if use_kernel else {"atol": 1e-12, "rtol": 1e-12}
    report = check_custom_op(OP, samples, reference=differential_merge_reference, **tol)
    assert report["opcheck"] == 3
    if use_kernel:
        # check_custom_op compares kernels of one output; this one has two.
        device = gpu_kernel_device()
        for args in samples:
            moved = [a.detach().to(device) if isinstance(a, torch.Tensor) else a for a in args]
            got = _triton()(*moved)
            expected = differential_merge_reference(*moved)
            torch.testing.assert_close([t.cpu() for t in got], [t.cpu() for t in expected], **tol)


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(0, 6), n_patches=st.integers(1, 11), dim=st.integers(1, 40),
    tile=st.sampled_from([16, 64, 8192]), merge_lambda=st.floats(-2, 2),
    temperature=st.floats(0.01, 5), seed=st.integers(0, 2**16),
)
def test_triton_kernel_matches_reference(n, n_patches, dim, tile, merge_lambda, temperature,
                                         seed):
    # Small tiles make the online softmax rescale over several patch tiles.
    from skicml.ops import _differential_merge_triton as module

    args = _data(7, n_patches, dim, n, seed=seed, dtype=torch.float32)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_TILE_ELEMENTS", tile)
        tokens, weights = module.differential_merge_triton(*args, merge_lambda, temperature)
    expected = differential_merge_reference(*args, merge_lambda, temperature)
    torch.testing.assert_close(tokens, expected[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, expected[1], atol=1e-5, rtol=1e-4)


def test_triton_kernel_half_precision():
    args = _data(6, 9, 24, 8, seed=3, dtype=torch.float16)
    tokens, weights = _triton()(*args, 1.0, 0.1)
    assert tokens.dtype == torch.float16 and weights.dtype == torch.float32
    expected = differential_merge_reference(*args, 1.0, 0.1)
    torch.testing.assert_close(tokens, expected[0], atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(weights, expected[1], atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("temperature, weights, token", [
    (1.0, (0.549834, 0.450166), (0.819934, 0.360133)),
    (0.1, (0.880797, 0.119203), (0.952319, 0.095362)),
])
def test_spec_reference_value(temperature, weights, token):
    args = _spec_case()
    expected_weights = torch.tensor([weights], dtype=torch.float64)
    expected_token = torch.tensor([token], dtype=torch.float64)
    routes = [differential_merge, differential_merge_reference]
    if gpu_kernel_device() == "cpu":
        routes.append(lambda *a, **k: _triton()(*[x.float() if x.is_floating_point() else x
                                                   for x in a], **k))
    for route in routes:
        got_token, got_weights = route(*args, merge_lambda=1.0, temperature=temperature)
        torch.testing.assert_close(got_weights.double(), expected_weights, atol=2e-6, rtol=0)
        torch.testing.assert_close(got_token.double(), expected_token, atol=2e-6, rtol=0)


@pytest.mark.parametrize("budget", [1, 30, 5 * 6 * 4, 2**20])
def test_chunking_changes_nothing(monkeypatch, budget):
    args = _data(13, 5, 6, 40, seed=1)
    expected = differential_merge_reference(*args, 0.8, 0.2)
    monkeypatch.setattr(_differential_merge, "_CHUNK_ELEMENTS", budget)
    got = differential_merge(*args, 0.8, 0.2)
    torch.testing.assert_close(got, expected, atol=1e-13, rtol=1e-13)


def test_chunks_follow_runs_and_stay_within_budget(monkeypatch):
    # A chunk holds at most 8 rows of 3 x 5 values; runs under 2 rows are pooled.
    monkeypatch.setattr(_differential_merge, "_CHUNK_ELEMENTS", 8 * 3 * 5)
    patches, queries, _, _, _ = _data(20, 3, 5, 29, seed=2)
    query = torch.zeros(29, dtype=torch.int64)
    # Two runs of consecutive frames between keyframes 0, 10 and 20 (the
    # keyframes themselves are not merged), then 10 rows in random order.
    frame = torch.cat([torch.arange(1, 10), torch.arange(11, 20), torch.randperm(
        20, generator=torch.Generator().manual_seed(0))[:11]])
    reference = torch.cat([torch.zeros(9, dtype=torch.int64), torch.full((9,), 10),
                           torch.arange(11) % 3 - 1])
    chunks = list(_differential_merge._chunks(patches, queries, frame, reference, query,
                                              torch.float64))
    assert [chunk.rows for chunk in chunks] == [slice(a, b) for a, b in (
        (0, 8), (8, 9), (9, 17), (17, 18), (18, 26), (26, 29))]
    storage = patches.untyped_storage().data_ptr()
    for chunk in chunks[:4]:
        # A run's frames are a view of the input, its keyframe broadcast.
        assert chunk.frames.untyped_storage().data_ptr() == storage
        assert chunk.references.shape == (3, 5)
    assert [chunk.shared_reference for chunk in chunks] == [0, 0, 10, 10, None, None]
    assert [chunk.shared_query for chunk in chunks] == [0, 0, 0, 0, None, None]
    for chunk in chunks[4:]:
        assert chunk.frames.untyped_storage().data_ptr() != storage
        assert chunk.references.shape == (chunk.frames.shape[0], 3, 5)
    expected = differential_merge_reference(patches, queries, frame, reference, query, 1.0, 0.1)
    torch.testing.assert_close(differential_merge(patches, queries, frame, reference, query,
                                                  1.0, 0.1), expected, atol=1e-13, rtol=1e-13)


@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.float16, 3e-3),
                                         (torch.bfloat16, 2e-2)])
def test_lower_precision_matches_float64(dtype, atol):
    args = _data(8, 7, 16, 12, seed=4)
    low = [a.to(dtype) if a.is_floating_point() else a for a in args]
    tokens, weights = differential_merge(*low, 1.0, 0.5)
    assert tokens.dtype == dtype and weights.dtype == torch.float32
    # Against float64 on the same rounded inputs: accumulation is float32.
    exact = differential_merge_reference(*[a.double() if a.is_floating_point() else a
                                           for a in low], 1.0, 0.5)
    torch.testing.assert_close(tokens.double(), exact[0], atol=atol, rtol=atol)
    torch.testing.assert_close(weights.double(), exact[1], atol=1e-5, rtol=1e-5)
    ref_tokens, ref_weights = differential_merge_reference(*low, 1.0, 0.5)
    torch.testing.assert_close(tokens, ref_tokens, atol=atol, rtol=atol)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=1e-6)


def test_rows_without_reference_use_relevance_only():
    patches, queries, frame, _, query = _data(6, 4, 5, 9, seed=5)
    none = torch.full_like(frame, -1)
    some = torch.randint(0, 6, frame.shape, generator=torch.Generator().manual_seed(0))
    expected = differential_merge(patches, queries, frame, some, query, 0.0, 0.3)
    got = differential_merge(patches, queries, frame, none, query, 1.7, 0.3)
    torch.testing.assert_close(got, expected, atol=1e-14, rtol=1e-14)
    mixed = torch.where(torch.arange(9) % 2 == 0, none, some)
    got_tokens, _ = differential_merge(patches, queries, frame, mixed, query, 1.7, 0.3)
    torch.testing.assert_close(got_tokens[::2], expected[0][::2], atol=1e-14, rtol=1e-14)


def test_empty_rows_and_frames():
    patches, queries, _, _, _ = _data(3, 4, 5, 0)
    empty = torch.zeros(0, dtype=torch.int64)
    tokens, weights = differential_merge(patches, queries, empty, empty, empty)
    assert tokens.shape == (0, 5) and weights.shape == (0, 4)
    tokens, weights = differential_merge(patches[:0], queries, empty, empty, empty)
    assert tokens.shape == (0, 5) and weights.dtype == torch.float64


# --------------------------------------------------------------------------
# Properties (spec section 6)


_shapes = {"n_frames": st.integers(1, 8), "n_patches": st.integers(1, 9),
           "dim": st.integers(1, 12), "n": st.integers(1, 12), "seed": st.integers(0, 2**16)}


@settings(max_examples=30, deadline=None)
@given(**_shapes, merge_lambda=st.floats(-3, 3), temperature=st.floats(1e-3, 1e3),
       shift=st.floats(-2, 2))
def test_weights_are_a_distribution_and_tokens_in_the_hull(n_frames, n_patches, dim, n, seed,
                                                           merge_lambda, temperature, shift):
    args = _data(n_frames, n_patches, dim, n, seed=seed, shift=shift)
    tokens, weights = differential_merge(*args, merge_lambda, temperature)
    assert torch.all(weights >= 0)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(n, dtype=torch.float64))
    frames = args[0][args[2]]
    slack = 1e-12
    assert torch.all(tokens >= frames.amin(dim=1) - slack)
    assert torch.all(tokens <= frames.amax(dim=1) + slack)


@settings(max_examples=30, deadline=None)
@given(**_shapes, merge_lambda=st.floats(-3, 3), temperature=st.floats(0.05, 10))
def test_frame_equal_to_its_reference_gives_the_lambda_zero_output(n_frames, n_patches, dim, n,
                                                                    seed, merge_lambda,
                                                                    temperature):
    # The redundancy term is then cos(p, p) = 1 for every patch: a constant
    # added to the scores, which the softmax does not see.
    patches, queries, frame, _, query = _data(n_frames, n_patches, dim, n, seed=seed, shift=0.1)
    got = differential_merge(patches, queries, frame, frame, query, merge_lambda, temperature)
    expected = differential_merge(patches, queries, frame, frame, query, 0.0, temperature)
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


@settings(max_examples=20, deadline=None)
@given(**_shapes, merge_lambda=st.floats(-3, 3))
def test_temperature_limits(n_frames, n_patches, dim, n, seed, merge_lambda):
    patches, queries, frame, reference, query = _data(n_frames, n_patches, dim, n, seed=seed)
    frames = patches[frame]
    tokens, weights = differential_merge(patches, queries, frame, reference, query,
                                         merge_lambda, 1e7)
    torch.testing.assert_close(tokens, frames.mean(dim=1), atol=1e-6, rtol=1e-6)
    # A cold softmax picks the patch of highest score.
    _, base = differential_merge(patches, queries, frame, reference, query, merge_lambda, 1.0)
    top2 = base.topk(min(2, n_patches), dim=1).values
    clear = (top2[:, 0] - top2[:, -1] > 1e-3) | (n_patches == 1)
    tokens, _ = differential_merge(patches, queries, frame, reference, query, merge_lambda, 1e-6)
    best = frames[torch.arange(n), base.argmax(dim=1)]
    torch.testing.assert_close(tokens[clear], best[clear], atol=1e-9, rtol=1e-9)


def test_zero_vectors_give_finite_outputs():
    patches, queries, frame, reference, query = _data(5, 4, 3, 10, seed=6)
    patches[1] = 0.0
    patches[2, 1] = 0.0
    queries[0] = 0.0
    frame[:4] = 1
    reference[4:8] = 1
    for route in (differential_merge, differential_merge_reference):
        tokens, weights = route(patches, queries, frame, reference, query, 1.0, 0.01)
        assert torch.isfinite(tokens).all() and torch.isfinite(weights).all()
    # cos = 0 for a zero patch: an all-zero frame with a zero query has
    # uniform weights.
    tokens, weights = differential_merge(patches, queries, torch.tensor([1]), torch.tensor([1]),
                                         torch.tensor([0]))
    torch.testing.assert_close(weights, torch.full((1, 4), 0.25, dtype=torch.float64))
    if gpu_kernel_device() == "cpu":
        f32 = [a.float() if a.is_floating_point() else a for a in (patches, queries, frame,
                                                                     reference, query)]
        tokens, weights = _triton()(*f32, 1.0, 0.01)
        assert torch.isfinite(tokens).all() and torch.isfinite(weights).all()


# --------------------------------------------------------------------------
# Gradients


def test_gradcheck():
    patches, queries, frame, reference, query = _data(5, 3, 4, 8, seed=7)
    frame[5] = frame[6] = 2  # a frame merged twice
    patches.requires_grad_()
    queries.requires_grad_()

    def both(p, q):
        return differential_merge(p, q, frame, reference, query, 0.7, 0.5)

    assert torch.autograd.gradcheck(both, (patches, queries))
    assert torch.autograd.gradcheck(lambda p, q: both(p, q)[0], (patches, queries))


@pytest.mark.parametrize("budget", [1, 2**20])
def test_gradients_match_autograd_of_reference(monkeypatch, budget):
    monkeypatch.setattr(_differential_merge, "_CHUNK_ELEMENTS", budget)
    patches, queries, frame, reference, query = _data(9, 5, 6, 24, seed=8)
    patches[3, 2] = 0.0  # a clamped norm
    patches.requires_grad_()
    queries.requires_grad_()
    g = torch.Generator().manual_seed(1)
    grad_tokens = torch.randn(24, 6, generator=g, dtype=torch.float64)
    grad_weights = torch.randn(24, 5, generator=g, dtype=torch.float64)
    got = differential_merge(patches, queries, frame, reference, query, 1.3, 0.2)
    want = differential_merge_reference(patches, queries, frame, reference, query, 1.3, 0.2)
    grads = torch.autograd.grad(got, (patches, queries), (grad_tokens, grad_weights))
    expected = torch.autograd.grad(want, (patches, queries), (grad_tokens, grad_weights))
    for a, b in zip(grads, expected):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=1e-11)


def test_half_precision_gradients():
    args = _data(4, 3, 8, 6, seed=9)
    low = [a.half() if a.is_floating_point() else a for a in args]
    low[0].requires_grad_()
    tokens, _ = differential_merge(*low, 1.0, 0.5)
    (grad,) = torch.autograd.grad(tokens.float().sum(), low[0])
    assert grad.dtype == torch.float16
    exact = [a.double() if a.is_floating_point() else a for a in low]
    exact[0] = exact[0].detach().requires_grad_()
    (expected,) = torch.autograd.grad(differential_merge_reference(*exact, 1.0, 0.5)[0].sum(),
                                      exact[0])
    torch.testing.assert_close(grad.double(), expected, atol=5e-3, rtol=5e-3)


# --------------------------------------------------------------------------
# Errors, tracing, docs


def _good():
    patches, queries, frame, reference, query = _data(4, 3, 5, 6)
    return {"patches": patches, "queries": queries, "frame_index": frame,
            "reference_index": reference, "query_index": query}


@pytest.mark.parametrize("change, match", [
    ({"patches": torch.zeros(4, 15, dtype=torch.float64)}, r"patches must have shape \(n_frames"),
    ({"patches": torch.zeros(4, 3, 5, dtype=torch.int64)}, "patches must be a floating-point"),
    ({"patches": torch.zeros(4, 0, 5, dtype=torch.float64)}, "at least one patch"),
    ({"queries": torch.zeros(2, 4, dtype=torch.float64)},
     r"queries must have shape \(n_queries, 5\)"),
    ({"queries": torch.zeros(5, dtype=torch.float64)},
     r"queries must have shape \(n_queries, dim\)"),
    ({"queries": torch.zeros(2, 5)}, "queries must have the dtype of patches"),
    ({"frame_index": torch.zeros(6, 1, dtype=torch.int64)}, "frame_index must be a 1-D"),
    ({"frame_index": torch.zeros(6, dtype=torch.int32)}, "frame_index must be an int64"),
    ({"query_index": torch.zeros(6)}, "query_index must be an int64"),
    ({"reference_index": torch.zeros(5, dtype=torch.int64)},
     r"reference_index must have shape \(6,\)"),
    ({"frame_index": torch.tensor([0, 1, 2, 3, 4, 0])}, r"frame_index must lie in \[0, 3\]"),
    ({"frame_index": torch.tensor([0, 1, 2, 3, -1, 0])}, r"frame_index must lie in \[0, 3\]"),
    ({"reference_index": torch.tensor([0, 1, 2, 3, -2, 0])},
     r"reference_index must lie in \[-1, 3\] \(-1: no reference\)"),
    ({"query_index": torch.tensor([0, 1, 2, 0, 0, 0])}, r"query_index must lie in \[0, 1\]"),
    ({"temperature": 0.0}, "temperature must be a finite float > 0"),
    ({"temperature": -1.0}, "temperature must be a finite float > 0"),
    ({"temperature": float("nan")}, "temperature must be a finite float > 0"),
    ({"merge_lambda": float("inf")}, "merge_lambda must be a finite float"),
    ({"merge_lambda": "1"}, "merge_lambda must be a finite float"),
])
def test_bad_arguments_raise_clear_errors(change, match):
    args = _good()
    args.update(change)
    with pytest.raises(ValueError, match=match):
        differential_merge(**args)


def test_export_keeps_the_op():
    class Merge(torch.nn.Module):
        def forward(self, patches, queries, frame, reference, query):
            return differential_merge(patches, queries, frame, reference, query, 1.0, 0.1)

    args = tuple(_good().values())
    exported = torch.export.export(Merge(), args)
    assert any("skicml.differential_merge" in str(node.target) for node in exported.graph.nodes)
    torch.testing.assert_close(exported.module()(*args), differential_merge(*args, 1.0, 0.1))


def test_examples_are_doctested():
    # tests/test_docstrings.py runs them; make sure both have one.
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = finder.find(_differential_merge, "m", globs={})
    names = {t.name.rsplit(".", 1)[-1] for t in tests if t.examples}
    assert {"differential_merge", "differential_merge_reference"} <= names
