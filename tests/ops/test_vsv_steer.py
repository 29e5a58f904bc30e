"""``skicml::vsv_steer``: VISTA's visual steering injection.

Ground truth is :func:`vsv_steer_reference` and, independently of it, the two
formulas of the VISTA spec (section 2.3): the official code's ``VSVLayer`` on
the MLP output and the paper's Eq. 5-6 on the residual stream, written out
below as the spec gives them. The Triton kernel runs in the interpreter here;
hypothesis checks the properties of the spec's section 6 (items 2-5).
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import _vsv_steer, vsv_steer, vsv_steer_reference
from skicml.ops.testing import check_custom_op, gpu_kernel_device

OP = _vsv_steer._vsv_steer_op
SITES = ("mlp_output", "residual")


def _triton():
    from skicml.ops._vsv_steer_triton import vsv_steer_triton

    return vsv_steer_triton


def _data(shape, seed=0, dtype=torch.float32, v_dtype=None):
    """Hidden states of ``shape`` ((B, T, d) or (B, d)) and one steering vector per sample."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(shape[0], shape[-1], generator=g, dtype=torch.float64).to(v_dtype or dtype)
    return x, v


def _official_mlp_site(x, v, lam, adaptive=True):
    """``VSVLayer.forward`` as the spec describes it (fp32 throughout, one vector per sample)."""
    x = x.float()
    original_norm = torch.norm(x, p=2, dim=-1, keepdim=True)
    vsv = v.float()[:, None, :] if x.dim() == 3 else v.float()
    if adaptive:
        lambda_sim = 1.0 + torch.clamp(F.cosine_similarity(x, -vsv, dim=-1), min=0.0).unsqueeze(-1)
    else:  # simple_mode
        lambda_sim = 1.0
    y = lam * lambda_sim * F.normalize(vsv, dim=-1)
    return F.normalize(F.normalize(x, p=2, dim=-1) + y, p=2, dim=-1) * original_norm


def _paper_residual_site(h, v, lam):
    """Paper Eq. 5-6: ``h~ = h + lam v``, then ``h~ |h| / |h~|``."""
    vsv = v[:, None, :] if h.dim() == 3 else v
    steered = h + lam * vsv
    return steered * h.norm(dim=-1, keepdim=True) / steered.norm(dim=-1, keepdim=True)


def _cos(a, v):
    vsv = v[:, None, :] if a.dim() == 3 else v
    return F.cosine_similarity(a.double(), vsv.double().expand_as(a), dim=-1, eps=1e-12)


# --------------------------------------------------------------------------
# The registered op and the Triton kernel


def test_gpu_kernel_is_testable_here():
    # No GPU in CI: conftest turns on Triton's interpreter, so the kernel is
    # still compared with the reference. This must not silently degrade.
    assert gpu_kernel_device() in ("cpu", "cuda")


def test_opcheck_and_kernel():
    samples = [
        (*_data((2, 3, 8)), 0.17, "mlp_output", True),
        (*_data((3, 37), seed=1), 0.5, "residual", False),
        (*_data((2, 4, 5), seed=2), 1.0, "residual", True),
        (*_data((1, 1, 1), seed=3), 0.1, "mlp_output", False),
        (*_data((0, 3, 4)), 0.1, "mlp_output", True),
        (*_data((2, 3, 6), seed=4, v_dtype=torch.float64), 0.3, "mlp_output", True),
    ]
    report = check_custom_op(OP, samples, reference=vsv_steer_reference, kernel=_triton(),
                             atol=1e-5, rtol=1e-5)
    assert report["opcheck"] == len(samples) and report["kernel_device"] is not None


def test_opcheck_float64_and_half():
    # float64 never reaches the kernel (it computes in float32): opcheck only.
    samples = [(*_data((2, 3, 8), dtype=torch.float64), 0.2, "residual", True),
               (*_data((2, 3, 8), dtype=torch.float16), 0.2, "mlp_output", True)]
    report = check_custom_op(OP, samples, reference=vsv_steer_reference, atol=1e-12, rtol=1e-12)
    assert report["opcheck"] == 2


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(0, 3), seq_len=st.integers(0, 4), dim=st.integers(1, 70),
       three_d=st.booleans(), strength=st.floats(0, 2), site=st.sampled_from(SITES),
       adaptive=st.booleans(), seed=st.integers(0, 2**16))
def test_triton_kernel_matches_reference(batch, seq_len, dim, three_d, strength, site, adaptive,
                                         seed):
    shape = (batch, seq_len, dim) if three_d else (batch, dim)
    x, v = _data(shape, seed=seed)
    got = _triton()(x, v, strength, site, adaptive)
    assert got.shape == x.shape and got.dtype == x.dtype
    torch.testing.assert_close(got, vsv_steer_reference(x, v, strength, site, adaptive),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("site", SITES)
def test_triton_kernel_half_precision(dtype, site):
    # fp16 hidden states with the float32 steering vector VISTA builds.
    x, v = _data((2, 3, 40), seed=5, dtype=dtype, v_dtype=torch.float32)
    got = _triton()(x, v, 0.17, site, True)
    assert got.dtype == dtype
    tol = 1e-3 if dtype == torch.float16 else 1e-2
    torch.testing.assert_close(got, vsv_steer_reference(x, v, 0.17, site, True), atol=tol, rtol=tol)


def test_triton_kernel_non_contiguous_input():
    x, v = _data((4, 3, 10), seed=6)
    x_t = x.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    v_t = v.t().contiguous().t()
    assert not x_t.is_contiguous() and not v_t.is_contiguous()
    torch.testing.assert_close(_triton()(x_t, v_t, 0.3), vsv_steer_reference(x, v, 0.3),
                               atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------
# The formulas of the spec


@pytest.mark.parametrize("adaptive", [True, False])
@pytest.mark.parametrize("shape", [(2, 5, 16), (3, 16)])
def test_mlp_site_matches_official_vsv_layer(shape, adaptive):
    x, v = _data(shape, seed=7)
    torch.testing.assert_close(vsv_steer(x, v, 0.17, "mlp_output", adaptive),
                               _official_mlp_site(x, v, 0.17, adaptive))


@pytest.mark.parametrize("shape", [(2, 5, 16), (3, 16)])
def test_residual_site_matches_paper_equations(shape):
    x, v = _data(shape, seed=8)
    torch.testing.assert_close(vsv_steer(x, v, 0.4, "residual", adaptive=False),
                               _paper_residual_site(x, v, 0.4))


def test_half_precision_is_computed_in_float32():
    x, v = _data((2, 4, 32), seed=9, dtype=torch.float16)
    out = vsv_steer(x, v, 0.17)
    assert out.dtype == torch.float16
    # The fp16 result is the float32 computation on the same inputs, rounded once.
    expected = _official_mlp_site(x.float(), v.float(), 0.17).half()
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    bf16 = vsv_steer(x.bfloat16(), v, 0.17, "residual")
    assert bf16.dtype == torch.bfloat16


# --------------------------------------------------------------------------
# Properties (spec section 6, items 2-5)

_shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(2, 24))
_common = dict(shape=_shapes, three_d=st.booleans(), site=st.sampled_from(SITES),
               adaptive=st.booleans(), seed=st.integers(0, 2**16))


def _hypothesis_data(shape, three_d, seed):
    batch, seq_len, dim = shape
    return _data((batch, seq_len, dim) if three_d else (batch, dim), seed=seed)


@settings(max_examples=25, deadline=None)
@given(strength=st.floats(0, 1), **_common)
def test_norm_is_preserved(shape, three_d, site, adaptive, seed, strength):
    x, v = _hypothesis_data(shape, three_d, seed)
    out = vsv_steer(x, v, strength, site, adaptive)
    norm_x, norm_out = x.double().norm(dim=-1), out.double().norm(dim=-1)
    assert torch.all((norm_out - norm_x).abs() <= 1e-5 * norm_x)


@settings(max_examples=15, deadline=None)
@given(**_common)
def test_zero_strength_and_zero_vector_return_x(shape, three_d, site, adaptive, seed):
    x, v = _hypothesis_data(shape, three_d, seed)
    torch.testing.assert_close(vsv_steer(x, v, 0.0, site, adaptive), x)
    torch.testing.assert_close(vsv_steer(x, torch.zeros_like(v), 0.7, site, adaptive), x)


@settings(max_examples=25, deadline=None)
@given(strengths=st.tuples(st.floats(0, 1), st.floats(0, 1)), **_common)
def test_steering_turns_towards_v_monotonically(shape, three_d, site, adaptive, seed, strengths):
    x, v = _hypothesis_data(shape, three_d, seed)
    low, high = sorted(strengths)
    cos_x = _cos(x, v)
    cos_low = _cos(vsv_steer(x, v, low, site, adaptive), v)
    cos_high = _cos(vsv_steer(x, v, high, site, adaptive), v)
    assert torch.all(cos_low >= cos_x - 1e-5)
    assert torch.all(cos_high >= cos_low - 1e-5)
    if high > 0.05:
        # Strictly closer, except for tokens already (almost) along v.
        assert torch.all((cos_high > cos_x) | (cos_x > 1 - 1e-4))


@settings(max_examples=20, deadline=None)
@given(strength=st.floats(0.01, 1), **_common)
def test_adaptive_gain(shape, three_d, site, adaptive, seed, strength):
    del adaptive
    x, v = _hypothesis_data(shape, three_d, seed)
    cos = _cos(x, v).float()
    gain = _vsv_steer._adaptive_gain(x, v)
    expected = torch.where(cos >= 0, torch.ones_like(cos), 1 - cos)
    torch.testing.assert_close(gain, expected)
    assert torch.all((gain >= 1) & (gain <= 2))
    # Adaptive steering of each token is plain steering with strength * s.
    adaptive_out = vsv_steer(x, v, strength, site, adaptive=True)
    tokens_x, tokens_out = x.reshape(-1, x.shape[-1]), adaptive_out.reshape(-1, x.shape[-1])
    samples = torch.arange(x.shape[0]).repeat_interleave(tokens_x.shape[0] // x.shape[0])
    for token, sample in enumerate(samples.tolist()):
        plain = vsv_steer(tokens_x[token:token + 1], v[sample:sample + 1],
                          strength * gain.reshape(-1)[token].item(), site, adaptive=False)
        torch.testing.assert_close(tokens_out[token:token + 1], plain)


@settings(max_examples=15, deadline=None)
@given(strength=st.floats(0, 1), **_common)
def test_zero_rows_stay_zero_and_samples_are_independent(shape, three_d, site, adaptive, seed,
                                                        strength):
    x, v = _hypothesis_data(shape, three_d, seed)
    x[0] = 0.0
    out = vsv_steer(x, v, strength, site, adaptive)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.isfinite(out).all()
    for b in range(x.shape[0]):
        torch.testing.assert_close(out[b:b + 1], vsv_steer(x[b:b + 1], v[b:b + 1], strength, site,
                                                           adaptive))
    perm = torch.arange(x.shape[0]).flip(0)
    torch.testing.assert_close(vsv_steer(x[perm], v[perm], strength, site, adaptive), out[perm])


# --------------------------------------------------------------------------
# Errors, autograd and tracing


@pytest.mark.parametrize("args, error, match", [
    (((2, 3, 4), (3, 4)), ValueError, r"v must have shape \(2, 4\).*got \(3, 4\)"),
    (((2, 3, 4), (2, 5)), ValueError, r"v must have shape \(2, 4\).*got \(2, 5\)"),
    (((2, 3, 4), (2, 1, 4)), ValueError, r"v must have shape \(2, 4\).*got \(2, 1, 4\)"),
    (((4,), (1, 4)), ValueError, r"x must have shape \(batch, seq_len, dim\) or \(batch, dim\), "
                                 r"got \(4,\)"),
    (((1, 2, 3, 4), (1, 4)), ValueError, r"x must have shape .* got \(1, 2, 3, 4\)"),
])
def test_rejects_bad_shapes(args, error, match):
    x, v = torch.randn(*args[0]), torch.randn(*args[1])
    with pytest.raises(error, match=match):
        vsv_steer(x, v, 0.1)


def test_rejects_bad_arguments():
    x, v = _data((2, 3, 4))
    with pytest.raises(ValueError, match=r"strength must be a finite float >= 0, got -0.1"):
        vsv_steer(x, v, -0.1)
    with pytest.raises(ValueError, match=r"strength must be a finite float >= 0, got nan"):
        vsv_steer(x, v, float("nan"))
    with pytest.raises(TypeError, match=r"strength must be a float >= 0, got Tensor"):
        vsv_steer(x, v, torch.tensor(0.1))
    with pytest.raises(ValueError, match=r"site must be one of \('mlp_output', 'residual'\), "
                                         r"got 'attention'"):
        vsv_steer(x, v, 0.1, site="attention")
    with pytest.raises(TypeError, match=r"adaptive must be a bool, got str"):
        vsv_steer(x, v, 0.1, adaptive="yes")
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor .* got torch.int64"):
        vsv_steer(torch.ones(2, 3, 4, dtype=torch.int64), v, 0.1)
    with pytest.raises(TypeError, match=r"v must be a floating-point tensor .* got torch.int32"):
        vsv_steer(x, torch.ones(2, 4, dtype=torch.int32), 0.1)
    with pytest.raises(TypeError, match=r"v must be a torch.Tensor, got list"):
        vsv_steer(x, [[0.0] * 4] * 2, 0.1)
    # An int strength is a valid real number.
    torch.testing.assert_close(vsv_steer(x, v, 0), x)


def test_validation_happens_before_dispatch(monkeypatch):
    called = []
    monkeypatch.setattr(_vsv_steer, "_vsv_steer_op", lambda *args: called.append(args))
    x, v = _data((2, 3, 4))
    with pytest.raises(ValueError, match="v must have shape"):
        vsv_steer(x, v[:1], 0.1)
    assert not called


def test_backward_raises_a_clear_error():
    x, v = _data((2, 3, 4), dtype=torch.float64)
    x.requires_grad_()
    out = vsv_steer(x, v, 0.1)
    with pytest.raises(RuntimeError, match="vsv_steer has no backward pass.*vsv_steer_reference"):
        out.sum().backward()
    # The reference is differentiable.
    torch.autograd.gradcheck(lambda a: vsv_steer_reference(a, v, 0.1), (x,))


def test_export_keeps_the_op():
    class Steer(torch.nn.Module):
        def forward(self, x, v):
            return vsv_steer(x, v, 0.17)

    x, v = _data((2, 3, 8))
    exported = torch.export.export(Steer(), (x, v))
    assert any("skicml.vsv_steer" in str(node.target) for node in exported.graph.nodes)
    torch.testing.assert_close(exported.module()(x, v), vsv_steer_reference(x, v, 0.17))
