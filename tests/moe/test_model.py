import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from skicml.base import seeded
from skicml.moe import RaceDiT


def _digits(n=256):
    digits = load_digits()
    images = torch.as_tensor(digits.images[:n] / 8.0 - 1.0, dtype=torch.float32)[:, None]
    return images, torch.as_tensor(digits.target[:n])


def _model(seed=0, **kwargs):
    config = dict(n_classes=10, hidden_dim=32, depth=2, n_heads=4, n_experts=4, top_k=2) | kwargs
    with seeded(seed):
        return RaceDiT(**config)


def test_training_lowers_the_loss_and_sets_every_threshold():
    images, labels = _digits()
    model = _model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    fixed_t = torch.randint(0, 200, (256,), generator=torch.Generator().manual_seed(1))
    fixed_noise = torch.randn(images.shape, generator=torch.Generator().manual_seed(2))

    def held_loss():
        model.eval()
        with torch.no_grad():
            return model.loss(images, labels, t=fixed_t, noise=fixed_noise)[1]["denoise"]

    with seeded(0):
        model.train()
        model.loss(images[:64], labels[:64])  # sets the thresholds before the first evaluation
        before = held_loss()
        model.train()
        for step in range(60):
            batch = torch.randint(0, 256, (64,))
            loss, parts = model.loss(images[batch], labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert held_loss() < 0.7 * before
    assert all(torch.isfinite(layer.tau_) for layer in model.moe_layers)
    assert set(parts) == {"denoise", "sim", "balance", "plr"} and parts["sim"] > 0 and parts["plr"] > 0


def test_eval_is_batch_independent_and_guidance_one_is_plain_conditioning():
    images, labels = _digits(8)
    model = _model()
    with torch.no_grad():
        for block in model.blocks:
            block.adaLN_modulation[-1].weight.normal_(std=0.1)
        model.final_layer.linear.weight.normal_(std=0.1)
    model.loss(images, labels)
    model.eval()
    t = torch.full((8,), 50)
    fresh = torch.randn(images.shape, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        together, _ = model(fresh, t, labels)
        alone, _ = model(fresh[3:4], t[3:4], labels[3:4])
    torch.testing.assert_close(alone, together[3:4])
    plain = model.sample(3, [1, 2, 3], n_steps=5, generator=torch.Generator().manual_seed(0))
    guided_one = model.sample(3, [1, 2, 3], guidance_scale=1.0, n_steps=5, generator=torch.Generator().manual_seed(0))
    guided = model.sample(3, [1, 2, 3], guidance_scale=3.0, n_steps=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(plain, guided_one) and not torch.equal(plain, guided)
    assert plain.shape == (3, 1, 8, 8) and plain.abs().max() <= 1.0


def test_dense_baseline_and_unconditional_model():
    images, _ = _digits(16)
    dense = _model(n_experts=0, n_classes=0)
    assert dense.moe_layers == []
    loss, parts = dense.loss(images)
    assert parts["sim"] == 0 and parts["plr"] == 0 and torch.isfinite(loss)
    assert dense.eval().sample(2, n_steps=3).shape == (2, 1, 8, 8)


def test_without_the_weight_the_heads_get_no_gradient():
    images, labels = _digits(16)
    model = _model()
    loss, _ = model.loss(images, labels, plr_weight=0.0)
    loss.backward()
    for layer in model.moe_layers:
        assert layer.target_head.weight.grad is None or torch.all(layer.target_head.weight.grad == 0)
    model.zero_grad()
    model.loss(images, labels)[0].backward()
    assert all(layer.target_head.weight.grad.abs().sum() > 0 for layer in model.moe_layers)


def test_image_size_must_split_into_patches():
    with pytest.raises(ValueError, match="multiple of patch_size"):
        RaceDiT(image_size=(7, 8))
    assert np.prod(_model(image_size=(4, 6)).pos_embed.shape) == 6 * 32
