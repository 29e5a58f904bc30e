import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.base import seeded
from skicml.nn import DDPMSchedule, DiTBlock, DiTFinalLayer, ExpertRaceMoE, LabelEmbedder, RectifiedFlow
from skicml.nn.dit import patchify, sincos_position_embedding_2d, timestep_embedding, unpatchify


@settings(max_examples=20, deadline=None)
@given(channels=st.integers(1, 3), rows=st.integers(1, 4), cols=st.integers(1, 4), patch=st.integers(1, 3))
def test_patchify_round_trips_and_reads_rows_first(channels, rows, cols, patch):
    images = torch.randn(2, channels, rows * patch, cols * patch)
    tokens = patchify(images, patch)
    assert tokens.shape == (2, rows * cols, patch * patch * channels)
    assert torch.equal(unpatchify(tokens, patch, channels, (rows * patch, cols * patch)), images)
    # Token 1 is the patch right of token 0.
    first = images[0, :, :patch, patch:2 * patch] if cols > 1 else None
    if first is not None:
        assert torch.equal(tokens[0, 1], first.permute(1, 2, 0).reshape(-1))


def test_patchify_refuses_sizes_that_do_not_split():
    with pytest.raises(ValueError, match="do not split"):
        patchify(torch.zeros(1, 1, 5, 4), 2)


def test_embeddings_follow_the_official_formulas():
    t = torch.tensor([3.0])
    embedding = timestep_embedding(t, 8)
    frequencies = np.exp(-math.log(10000) * np.arange(4) / 4)
    np.testing.assert_allclose(embedding[0].numpy(), np.r_[np.cos(3 * frequencies), np.sin(3 * frequencies)],
                               rtol=1e-6)
    position = sincos_position_embedding_2d(8, 2, 3)
    assert position.shape == (6, 8)
    omega = 1 / 10000 ** (np.arange(2) / 2)
    row, col = 1, 2  # token 5
    expected = np.r_[np.sin(col * omega), np.cos(col * omega), np.sin(row * omega), np.cos(row * omega)]
    np.testing.assert_allclose(position[5].numpy(), expected, rtol=1e-6)


def test_a_new_block_is_the_identity_and_conditions_once_trained():
    with seeded(0):
        block = DiTBlock(16, n_heads=4)
    x, c = torch.randn(2, 6, 16), torch.randn(2, 16)
    y, aux = block(x, c)
    assert torch.equal(y, x) and aux == {}
    with torch.no_grad():
        block.adaLN_modulation[-1].weight.normal_()
    y, _ = block(x, c)
    y_other, _ = block(x, torch.randn(2, 16))
    assert not torch.allclose(y, x) and not torch.allclose(y, y_other)


def test_a_moe_block_passes_its_aux_and_a_sample_does_not_depend_on_its_batch_in_eval():
    with seeded(0):
        block = DiTBlock(16, n_heads=4, mlp=ExpertRaceMoE(16, n_experts=4, top_k=2))
        final = DiTFinalLayer(16, 2, 3)
    with torch.no_grad():
        block.adaLN_modulation[-1].weight.normal_()
    x, c = torch.randn(4, 6, 16), torch.randn(4, 16)
    _, aux = block(x, c)
    assert aux["mask"].shape == (4, 6, 4)
    block.eval()
    # Fresh tokens: on the training batch itself one score equals the threshold, and rounding decides it.
    # Seeded, so that the test does not depend on what the global generator drew before it.
    generator = torch.Generator().manual_seed(1)
    x, c = torch.randn(4, 6, 16, generator=generator), torch.randn(4, 16, generator=generator)
    with torch.no_grad():
        together, _ = block(x, c)
        alone, _ = block(x[2:3], c[2:3])
    # Float32 matmuls of another batch size round differently (about 1e-5 here); a routing
    # decision that depended on the batch would move outputs by their own size instead.
    torch.testing.assert_close(alone, together[2:3], rtol=1e-5, atol=1e-4)
    assert final(together, c).shape == (4, 6, 12)
    assert torch.all(final(together, c) == 0)  # zero-initialised output layer


def test_label_embedder_drops_to_the_null_label():
    with seeded(0):
        embed = LabelEmbedder(3, 8, dropout=0.5)
    labels = torch.tensor([0, 1, 2, 1])
    null = embed.embedding.weight[3]
    dropped = embed(labels, drop=torch.tensor([True, False, True, False]))
    torch.testing.assert_close(dropped[0], null)
    torch.testing.assert_close(dropped[1], embed.embedding.weight[1])
    embed.eval()
    torch.testing.assert_close(embed(labels), embed.embedding.weight[labels])


# --------------------------------------------------------------------------
# diffusion
# --------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedules_decay_from_clean_to_noise(schedule):
    ddpm = DDPMSchedule(200, schedule, beta_start=1e-4, beta_end=0.05)
    alpha_bar = ddpm.alphas_cumprod
    assert torch.all(alpha_bar[1:] < alpha_bar[:-1])
    assert alpha_bar[0] > 0.99 and alpha_bar[-1] < 0.01
    np.testing.assert_allclose(alpha_bar.numpy(), np.cumprod(1 - ddpm.betas.double().numpy()), rtol=1e-4, atol=1e-9)


def test_noising_and_the_clean_estimate_invert_each_other():
    ddpm = DDPMSchedule(100)
    x0, noise = torch.randn(5, 3), torch.randn(5, 3)
    t = torch.tensor([0, 10, 50, 90, 99])
    x_t = ddpm.add_noise(x0, noise, t)
    torch.testing.assert_close(ddpm.predict_x0(x_t, noise, t), x0, atol=1e-4, rtol=1e-4)
    t, x_t, target = ddpm.training_pair(x0, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ddpm.add_noise(x0, target, t), x_t)


@pytest.mark.parametrize("eta, n_steps", [(1.0, None), (0.0, 20), (0.5, 50)])
def test_sampling_with_the_exact_noise_prediction_recovers_a_point_mass(eta, n_steps):
    # For data that are one point, eps(x_t) = (x_t - sqrt(a) x0) / sqrt(1 - a) is exact.
    ddpm = DDPMSchedule(100, beta_end=0.05)
    target = torch.tensor([0.3, -0.7])

    def eps_fn(x, t):
        a = ddpm.alphas_cumprod[t][:, None]
        return (x - a.sqrt() * target) / (1 - a).sqrt()

    out = ddpm.sample(eps_fn, (6, 2), n_steps=n_steps, eta=eta, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, target.expand(6, 2), atol=1e-4, rtol=0)


def test_ddpm_sampling_matches_the_gaussian_it_should():
    # Data N(0, s^2) in 1-D: the exact eps(x_t) is linear; ancestral samples must have std s.
    ddpm = DDPMSchedule(100, beta_end=0.05)
    s = 0.5

    def eps_fn(x, t):
        a = ddpm.alphas_cumprod[t][:, None]
        return (1 - a).sqrt() * x / (a * s ** 2 + 1 - a)

    samples = ddpm.sample(eps_fn, (4000, 1), generator=torch.Generator().manual_seed(0))
    assert abs(float(samples.std()) - s) < 0.03 and abs(float(samples.mean())) < 0.03


def test_timesteps_are_descending_and_end_at_zero():
    ddpm = DDPMSchedule(200)
    steps = ddpm.timesteps(7)
    assert steps[0] == 199 and steps[-1] == 0 and torch.all(steps[1:] < steps[:-1]) and len(steps) == 7
    with pytest.raises(ValueError, match="n_steps"):
        ddpm.timesteps(201)
    with pytest.raises(ValueError, match="beta_schedule"):
        DDPMSchedule(10, "quadratic")


@pytest.mark.parametrize("sampler", ["euler", "heun"])
def test_rectified_flow_integrates_a_known_field(sampler):
    flow = RectifiedFlow()
    # Data N(m, s^2): the velocity field of the straight paths is linear and known in closed form.
    m, s = 2.0, 0.5

    def velocity(x, t):
        t = t[:, None]
        variance = (1 - t) ** 2 + (t * s) ** 2
        x1_mean = m + t * s ** 2 * (x - t * m) / variance
        x0_mean = (1 - t) * (x - t * m) / variance
        return x1_mean - x0_mean

    samples = flow.sample(velocity, (4000, 1), n_steps=40, sampler=sampler, generator=torch.Generator().manual_seed(0))
    assert abs(float(samples.mean()) - m) < 0.03 and abs(float(samples.std()) - s) < 0.03
    t, x_t, target = flow.training_pair(torch.full((5, 2), m), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(flow.interpolate(torch.full((5, 2), m) - target, torch.full((5, 2), m), t), x_t)
    with pytest.raises(ValueError, match="sampler"):
        flow.sample(velocity, (2, 1), sampler="rk4")
