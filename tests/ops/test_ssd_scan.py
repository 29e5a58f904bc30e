import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import ssd_scan, ssd_scan_backward, ssd_scan_reference, ssd_scan_sequential
from skicml.ops._ssd_scan import ssd_scan_backward_reference
from skicml.ops.testing import check_custom_op, gpu_kernel_device


def _triton_kernel():
    from skicml.ops._ssd_scan_triton import ssd_scan_triton

    return ssd_scan_triton


def _sample(batch, T, H, P, N, dtype=torch.float32, requires_grad=False, seed=0, dt_scale=1.0):
    """Inputs as a Mamba-2 mixer makes them: dt > 0 (softplus), A < 0."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, T, H, P, generator=g, dtype=dtype)
    dt = torch.nn.functional.softplus(torch.randn(batch, T, H, generator=g, dtype=dtype)) * dt_scale
    A = -torch.rand(H, generator=g, dtype=dtype) - 0.1
    B = torch.randn(batch, T, N, generator=g, dtype=dtype)
    C = torch.randn(batch, T, N, generator=g, dtype=dtype)
    D = torch.randn(H, generator=g, dtype=dtype)
    return tuple(t.requires_grad_(requires_grad) for t in (x, dt, A, B, C, D))


def _grads(fn, args, grad_y):
    args = [a.detach().requires_grad_(True) for a in args]
    y = fn(*args)
    return (y, *torch.autograd.grad(y, args, grad_y))


def test_gpu_kernel_is_testable_here():
    assert gpu_kernel_device() in ("cpu", "cuda")


# (batch, T, H, P, N), chunk_size: T a multiple of the chunk, not one, a
# single step, and a chunk longer than the sequence.
SHAPES = [
    ((2, 12, 2, 3, 4), 4),
    ((2, 13, 3, 5, 4), 4),
    ((1, 1, 2, 3, 2), 64),
    ((1, 9, 1, 17, 3), 16),
]


@pytest.mark.parametrize("shape, chunk_size", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck_and_kernel(shape, chunk_size, dtype, requires_grad):
    args = _sample(*shape, dtype=dtype, requires_grad=requires_grad)
    # The kernel computes in float32, so it is compared in float32 only (on
    # CUDA the op sends float64 to the reference).
    kernel = _triton_kernel() if dtype == torch.float32 else None
    report = check_custom_op(
        ssd_scan, [(*args, chunk_size)], reference=ssd_scan_reference, kernel=kernel,
        atol=1e-4 if dtype == torch.float32 else 1e-10, rtol=1e-4,
    )
    assert report["opcheck"] == 1


@pytest.mark.parametrize("shape, chunk_size", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck_backward(shape, chunk_size, dtype):
    args = _sample(*shape, dtype=dtype)
    grad_y = torch.randn(shape[:4], dtype=dtype)
    check_custom_op(
        ssd_scan_backward, [(grad_y, *args, chunk_size)], reference=ssd_scan_backward_reference,
        atol=1e-5 if dtype == torch.float32 else 1e-10,
    )


def test_gradcheck():
    args = _sample(2, 7, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda *a: ssd_scan(*a, chunk_size=3), args)


def test_keyword_chunk_size_and_exports():
    args = _sample(1, 10, 2, 3, 4)
    torch.testing.assert_close(ssd_scan(*args, chunk_size=4), ssd_scan_reference(*args, 4))
    assert ssd_scan(*args).dtype == torch.float32


def test_half_precision_is_accumulated_in_float32():
    args = _sample(1, 20, 2, 3, 4)
    half = [a.bfloat16() for a in args]
    y = ssd_scan(*half, chunk_size=8)
    assert y.dtype == torch.bfloat16
    expected = ssd_scan_reference(*[a.float() for a in half], 8).bfloat16()
    torch.testing.assert_close(y, expected)
    grads = ssd_scan_backward(torch.ones_like(y), *half, 8)
    assert [g.dtype for g in grads] == [torch.bfloat16] * 6


def test_non_contiguous_inputs():
    # As a mixer passes them: x a view into a wider projection.
    x, dt, A, B, C, D = _sample(2, 10, 2, 3, 4)
    wide = torch.cat([x.reshape(2, 10, 6), torch.randn(2, 10, 5)], dim=-1)
    x_view = wide[..., :6].reshape(2, 10, 2, 3)
    assert not x_view.is_contiguous()
    y = ssd_scan(x_view, dt, A, B, C, D, chunk_size=4)
    assert y.is_contiguous()
    torch.testing.assert_close(y, ssd_scan_sequential(x, dt, A, B, C, D), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(_triton_kernel()(x_view, dt, A, B, C, D, 4), y, atol=1e-4, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(
    T=st.integers(1, 200), chunk_size=st.integers(1, 70), batch=st.integers(1, 2),
    H=st.integers(1, 3), P=st.integers(1, 4), N=st.integers(1, 4), seed=st.integers(0, 2**16),
)
def test_chunked_matches_sequential_float64(T, chunk_size, batch, H, P, N, seed):
    args = _sample(batch, T, H, P, N, dtype=torch.float64, seed=seed)
    grad_y = torch.randn(batch, T, H, P, dtype=torch.float64)
    expected = _grads(ssd_scan_sequential, args, grad_y)
    got = _grads(lambda *a: ssd_scan(*a, chunk_size=chunk_size), args, grad_y)
    # y, then the gradients of x, dt, A, B, C, D: the op's backward is its own
    # hand-written op, the sequential one is autograd through the loop.
    for name, g, e in zip(("y", "x", "dt", "A", "B", "C", "D"), got, expected):
        torch.testing.assert_close(g, e, atol=1e-9, rtol=1e-9, msg=lambda m, n=name: f"{n}: {m}")


@settings(max_examples=15, deadline=None)
@given(
    T=st.integers(1, 200), chunk_size=st.sampled_from([1, 7, 16, 64]),
    H=st.integers(1, 3), P=st.integers(1, 4), N=st.integers(1, 4), seed=st.integers(0, 2**16),
)
def test_chunked_matches_sequential_float32(T, chunk_size, H, P, N, seed):
    args = _sample(2, T, H, P, N, seed=seed)
    grad_y = torch.randn(2, T, H, P)
    # The ground truth in float64: a float32 sequential scan rounds as much
    # as the op does.
    expected = _grads(ssd_scan_sequential, [a.double() for a in args], grad_y.double())
    got = _grads(lambda *a: ssd_scan(*a, chunk_size=chunk_size), args, grad_y)
    for name, g, e in zip(("y", "x", "dt", "A", "B", "C", "D"), got, expected):
        # Gradients such as dA sum over every step: 1e-4 relative to their size.
        atol = 1e-4 * max(1.0, e.abs().max().item())
        torch.testing.assert_close(
            g, e.float(), atol=atol, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}"
        )


def test_reference_autograd_matches_backward_op():
    args = _sample(2, 11, 2, 3, 4, dtype=torch.float64)
    grad_y = torch.randn(2, 11, 2, 3, dtype=torch.float64)
    autograd = _grads(lambda *a: ssd_scan_reference(*a, 4), args, grad_y)[1:]
    by_hand = ssd_scan_backward(grad_y, *args, 4)
    for g, e in zip(by_hand, autograd):
        torch.testing.assert_close(g, e, atol=1e-10, rtol=1e-10)


@settings(max_examples=12, deadline=None)
@given(
    T=st.integers(1, 80), chunk_size=st.sampled_from([1, 5, 16, 33, 64, 100]),
    batch=st.integers(1, 2), H=st.integers(1, 2), P=st.integers(1, 20), N=st.integers(1, 20),
    seed=st.integers(0, 2**16),
)
def test_kernel_matches_reference_on_any_shape(T, chunk_size, batch, H, P, N, seed):
    # Covers padding of time (T not a multiple of the tile), of P and of N
    # (tl.dot needs 16 at least).
    args = _sample(batch, T, H, P, N, seed=seed)
    got = _triton_kernel()(*args, chunk_size)
    torch.testing.assert_close(got, ssd_scan_reference(*args, chunk_size), atol=1e-4, rtol=1e-4)


def test_kernel_splits_wide_heads_into_blocks():
    args = _sample(1, 20, 2, 70, 5)  # P = 70: two program blocks of 64 per head
    torch.testing.assert_close(
        _triton_kernel()(*args, 16), ssd_scan_reference(*args, 16), atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("impl", ["op", "kernel"])
def test_causal(impl):
    fn = (lambda *a: ssd_scan(*a, chunk_size=4)) if impl == "op" else (
        lambda *a: _triton_kernel()(*a, 4)
    )
    args = _sample(2, 19, 2, 3, 4)
    y = fn(*args)
    t = 9
    x, dt, A, B, C, D = (a.clone() for a in args)
    for tensor in (x, dt, B, C):
        tensor[:, t + 1:] = torch.rand_like(tensor[:, t + 1:]) + 5.0
    y_perturbed = fn(x, dt, A, B, C, D)
    torch.testing.assert_close(y_perturbed[:, : t + 1], y[:, : t + 1], atol=0, rtol=0)
    assert not torch.allclose(y_perturbed[:, t + 1:], y[:, t + 1:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fast_decay_stays_finite(dtype):
    # dt * A down to about -1e5: the state forgets everything at each step.
    args = list(_sample(2, 40, 2, 3, 4, dtype=dtype, dt_scale=100.0))
    args[2] = torch.tensor([-1000.0, -1.0], dtype=dtype)
    grad_y = torch.randn(2, 40, 2, 3, dtype=dtype)
    y, *grads = _grads(lambda *a: ssd_scan(*a, chunk_size=16), args, grad_y)
    assert torch.isfinite(y).all()
    assert all(torch.isfinite(g).all() for g in grads)
    torch.testing.assert_close(y, ssd_scan_sequential(*args), atol=1e-4, rtol=1e-4)
    if dtype == torch.float32:
        kernel_y = _triton_kernel()(*args, 16)
        assert torch.isfinite(kernel_y).all()
        torch.testing.assert_close(kernel_y, y, atol=1e-4, rtol=1e-4)


def test_empty_sequence():
    args = _sample(2, 0, 2, 3, 4, requires_grad=True)
    y = ssd_scan(*args, chunk_size=8)
    assert y.shape == (2, 0, 2, 3)
    y.sum().backward()
    assert args[2].grad.shape == (2,) and not args[2].grad.any()


def test_export_keeps_the_op():
    class Mixer(torch.nn.Module):
        def forward(self, x, dt, A, B, C, D):
            return ssd_scan(x, dt, A, B, C, D, chunk_size=4)

    exported = torch.export.export(Mixer(), _sample(1, 6, 2, 3, 4))
    assert any("skicml.ssd_scan" in str(node.target) for node in exported.graph.nodes)


def _bad(index, shape):
    args = list(_sample(2, 5, 3, 4, 6))
    args[index] = torch.randn(shape)
    return args


@pytest.mark.parametrize("args, message", [
    (_bad(0, (5, 3, 4)), r"x must have shape \(batch, T, H, P\), got \(5, 3, 4\)"),
    (_bad(1, (2, 4, 3)), r"dt must have shape \(batch, T, H\) = \(2, 5, 3\).*got \(2, 4, 3\)"),
    (_bad(2, (2,)), r"A must have shape \(H,\) = \(3,\).*got \(2,\)"),
    (_bad(3, (2, 5)), r"B must have shape \(batch, T, N\).*got \(2, 5\)"),
    (_bad(4, (2, 5, 7)), r"C must have shape \(batch, T, N\) = \(2, 5, 6\).*got \(2, 5, 7\)"),
    (_bad(5, (3, 1)), r"D must have shape \(H,\) = \(3,\).*got \(3, 1\)"),
])
def test_rejects_bad_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        ssd_scan(*args, chunk_size=4)


def test_rejects_bad_chunk_size_and_dtype():
    args = _sample(1, 5, 2, 3, 4)
    with pytest.raises(ValueError, match="chunk_size must be >= 1, got 0"):
        ssd_scan(*args, chunk_size=0)
    with pytest.raises(ValueError, match="B must be a floating-point tensor"):
        ssd_scan(args[0], args[1], args[2], args[3].long(), args[4], args[5])
    with pytest.raises(ValueError, match="grad_y must have the shape of x"):
        ssd_scan_backward(torch.zeros(1, 4, 2, 3), *args, 4)
