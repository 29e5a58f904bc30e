import pytest
import torch
import torch.nn.functional as F

from skicml.nn.attention import _SHORT_KEYS, PackedMultiheadAttention


def _reference(attn, q, k, v, mask):
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores + mask
    return attn.out_proj(attn._merge(scores.softmax(-1) @ v))


@pytest.mark.parametrize("n_keys", [5, _SHORT_KEYS, _SHORT_KEYS + 37])
@pytest.mark.parametrize("masked", [False, True])
def test_attend_matches_plain_softmax_attention_on_5d_inputs(n_keys, masked):
    # Both paths (two matmuls for few keys, SDPA on flattened 4-D inputs
    # otherwise) must give plain softmax attention, padding mask included.
    torch.manual_seed(0)
    attn = PackedMultiheadAttention(16, 4)
    q = torch.randn(2, 3, 4, 7, 4)
    k, v = torch.randn(2, 3, 4, n_keys, 4), torch.randn(2, 3, 4, n_keys, 4)
    mask = None
    if masked:
        ignore = torch.rand(2, 3, n_keys) < 0.3
        ignore[..., 0] = False  # every query keeps a key
        mask = torch.zeros(2, 3, n_keys).masked_fill(ignore, float("-inf"))[..., None, None, :]
    torch.testing.assert_close(attn.attend(q, k, v, mask), _reference(attn, q, k, v, mask), atol=1e-5, rtol=1e-5)


def test_attend_gradients_match():
    torch.manual_seed(1)
    attn = PackedMultiheadAttention(8, 2)
    for n_keys in (12, 120):
        q, k, v = (torch.randn(3, 2, n, 4, requires_grad=True) for n in (9, n_keys, n_keys))
        grads = torch.autograd.grad(attn.attend(q, k, v).square().sum(), (q, k, v))
        expected = torch.autograd.grad(
            attn.out_proj(attn._merge(F.scaled_dot_product_attention(q, k, v))).square().sum(), (q, k, v))
        for got, want in zip(grads, expected):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
