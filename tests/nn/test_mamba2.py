"""The Mamba-2 layers: causality, direction and chunk-size invariance."""

import pytest
import torch

from skicml.nn import BidirectionalMamba2Layer, Mamba2Mixer


def _perturb_after(x, t):
    x = x.clone()
    x[:, t + 1:] += torch.randn_like(x[:, t + 1:])
    return x


@pytest.mark.parametrize("length, t", [(1, 0), (9, 4), (40, 17)])
def test_mixer_is_causal(length, t):
    torch.manual_seed(0)
    mixer = Mamba2Mixer(8, d_state=4, head_dim=4, chunk_size=8).double()
    x = torch.randn(2, length, 8, dtype=torch.float64)
    y, y_perturbed = mixer(x), mixer(_perturb_after(x, t))
    torch.testing.assert_close(y[:, : t + 1], y_perturbed[:, : t + 1], rtol=0, atol=1e-12)
    if t + 1 < length:
        assert not torch.allclose(y[:, t + 1:], y_perturbed[:, t + 1:])


def test_unidirectional_layer_is_causal_and_bidirectional_is_not():
    torch.manual_seed(0)
    x = torch.randn(2, 30, 8, dtype=torch.float64)
    causal = BidirectionalMamba2Layer(8, bidirectional=False, dropout=0.0, d_state=4, head_dim=4).double()
    both = BidirectionalMamba2Layer(8, bidirectional=True, dropout=0.0, d_state=4, head_dim=4).double()
    x2 = _perturb_after(x, 10)
    torch.testing.assert_close(causal(x)[:, :11], causal(x2)[:, :11], rtol=0, atol=1e-12)
    assert not torch.allclose(both(x)[:, :11], both(x2)[:, :11])


def test_chunk_size_does_not_change_the_output():
    torch.manual_seed(0)
    mixer = Mamba2Mixer(8, d_state=4, head_dim=4, chunk_size=5).double()
    x = torch.randn(3, 23, 8, dtype=torch.float64)
    y5 = mixer(x)
    mixer.chunk_size = 64
    torch.testing.assert_close(mixer(x), y5, rtol=1e-10, atol=1e-10)


def test_mixer_trains():
    torch.manual_seed(0)
    mixer = Mamba2Mixer(8, d_state=4, head_dim=4)
    mixer(torch.randn(2, 12, 8)).square().mean().backward()
    for name, parameter in mixer.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
    assert mixer.A_log.grad.abs().sum() > 0 and mixer.dt_bias.grad.abs().sum() > 0


def test_inner_width_must_split_into_heads():
    with pytest.raises(ValueError, match="head_dim"):
        Mamba2Mixer(10, head_dim=16, expand=1)
