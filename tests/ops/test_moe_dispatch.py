import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.ops import moe_dispatch, moe_dispatch_reference
from skicml.ops.testing import check_custom_op


def _triton_kernel():
    from skicml.ops._moe_dispatch_triton import moe_dispatch_triton

    return moe_dispatch_triton


def _sample(n_tokens=13, dim=6, n_experts=4, hidden=10, dtype=torch.float32, density=0.4, seed=0,
            requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_tokens, dim, generator=g, dtype=dtype)
    mask = torch.rand(n_tokens, n_experts, generator=g) < density
    gates = torch.randn(n_tokens, n_experts, generator=g, dtype=dtype)
    weights = [torch.randn(*shape, generator=g, dtype=dtype) / np.sqrt(shape[-2] if len(shape) == 3 else 1)
               for shape in ((n_experts, dim, hidden), (n_experts, hidden), (n_experts, hidden, dim),
                             (n_experts, dim))]
    tensors = [x, mask, gates, *weights]
    return tuple(t.requires_grad_(requires_grad) if t.is_floating_point() else t for t in tensors)


def _numpy_moe(x, mask, gates, w1, b1, w2, b2):
    x, mask, gates, w1, b1, w2, b2 = (t.detach().double().numpy() for t in (x, mask, gates, w1, b1, w2, b2))
    out = np.zeros_like(x)
    for n in range(len(x)):
        for e in range(mask.shape[1]):
            if mask[n, e]:
                pre = x[n] @ w1[e] + b1[e]
                hidden = 0.5 * pre * (1 + np.tanh(np.sqrt(2 / np.pi) * (pre + 0.044715 * pre ** 3)))
                out[n] += gates[n, e] * (hidden @ w2[e] + b2[e])
    return out


@pytest.mark.parametrize("density", [0.0, 0.4, 1.0], ids=["no pair", "some", "every pair"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_opcheck_and_kernel(density, dtype, requires_grad):
    sample = _sample(dtype=dtype, density=density, requires_grad=requires_grad)
    report = check_custom_op(moe_dispatch, [sample], reference=moe_dispatch_reference, kernel=_triton_kernel(),
                             atol=1e-5 if dtype == torch.float32 else 1e-10, rtol=1e-5)
    assert report["kernel_device"] is not None


@settings(max_examples=25, deadline=None)
@given(n_tokens=st.integers(1, 40), n_experts=st.integers(1, 6), density=st.floats(0, 1), seed=st.integers(0, 99))
def test_matches_a_loop_over_tokens_and_experts(n_tokens, n_experts, density, seed):
    sample = _sample(n_tokens=n_tokens, n_experts=n_experts, density=density, dtype=torch.float64, seed=seed)
    np.testing.assert_allclose(moe_dispatch(*sample).numpy(), _numpy_moe(*sample), atol=1e-10)


def test_one_expert_taking_every_token_and_the_rest_none():
    x, mask, *rest = _sample(dtype=torch.float64)
    mask = torch.zeros_like(mask)
    mask[:, 2] = True
    np.testing.assert_allclose(moe_dispatch(x, mask, *rest).numpy(), _numpy_moe(x, mask, *rest), atol=1e-10)
    np.testing.assert_allclose(_triton_kernel()(x, mask, *rest).numpy(), _numpy_moe(x, mask, *rest), atol=1e-10)


def test_gradients_match_autograd_of_the_reference_and_gradcheck():
    sample = _sample(n_tokens=7, dim=3, n_experts=3, hidden=4, dtype=torch.float64, requires_grad=True)
    float_inputs = [t for t in sample if t.is_floating_point()]

    def op(x, gates, w1, b1, w2, b2):
        return moe_dispatch(x, sample[1], gates, w1, b1, w2, b2)

    torch.autograd.gradcheck(op, tuple(float_inputs))
    grad = torch.randn(7, 3, dtype=torch.float64)
    got = torch.autograd.grad(moe_dispatch(*sample), float_inputs, grad)
    expected = torch.autograd.grad(moe_dispatch_reference(*sample), float_inputs, grad)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


def test_unselected_gates_get_no_gradient():
    x, mask, gates, *weights = _sample(dtype=torch.float64, requires_grad=True)
    grad = torch.autograd.grad(moe_dispatch(x, mask, gates, *weights).sum(), gates)[0]
    assert torch.all(grad[~mask] == 0)
    assert torch.any(grad[mask] != 0)


@pytest.mark.parametrize("change, match", [
    (lambda s: (s[0][None],) + s[1:], "x must be"),
    (lambda s: (s[0], s[1].float()) + s[2:], "bool"),
    (lambda s: s[:2] + (s[2][:, :2],) + s[3:], "gates must have shape"),
    (lambda s: s[:3] + (s[3][:, :2],) + s[4:], "w1 must be"),
    (lambda s: s[:6] + (s[6].double(),), "one dtype"),
])
def test_bad_arguments_name_the_problem(change, match):
    with pytest.raises(ValueError, match=match):
        moe_dispatch(*change(_sample()))
