"""The wearable network: augmentations, losses and backbones."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.wearable import WearableModel
from skicml.wearable._model import (
    DEFAULT_AUGMENT, HourlyTokenizer, _shift_hours, augment_week, hour_blocks, info_nce_loss, koleo_loss,
)


def _weeks(batch=4, length=48, channels=3, missing=0.3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    weeks = torch.rand(batch, length, channels, generator=generator) * 100
    weeks[torch.rand(weeks.shape, generator=generator) < missing] = float("nan")
    return weeks


@settings(max_examples=20, deadline=None)
@given(length=st.integers(1, 60), channels=st.integers(1, 5), seed=st.integers(0, 1000))
def test_augmentation_only_removes_observations(length, channels, seed):
    torch.manual_seed(seed)
    weeks = _weeks(3, length, channels, seed=seed)
    view = augment_week(weeks, DEFAULT_AUGMENT, torch.ones(channels), torch.ones(channels, dtype=torch.bool))
    assert view.shape == weeks.shape
    # Every cell missing before is still missing: nothing is invented.
    assert torch.isnan(view)[torch.isnan(weeks)].all()


def test_cutout_removes_at_most_a_quarter_of_the_week():
    torch.manual_seed(0)
    weeks = torch.ones(256, 168, 1)
    view = augment_week(weeks, dict(DEFAULT_AUGMENT, jitter=0.0), torch.ones(1), torch.zeros(1, dtype=torch.bool))
    removed = torch.isnan(view[..., 0]).float().mean(1)
    assert removed.max() <= 0.25 and removed.mean() > 0.05


def test_info_nce_bounds():
    torch.manual_seed(0)
    z = torch.nn.functional.normalize(torch.randn(256, 32), dim=-1)
    assert info_nce_loss(z, z, temperature=1e-3) < 1e-3
    random_loss = info_nce_loss(z, torch.nn.functional.normalize(torch.randn(256, 32), dim=-1), 1.0)
    assert abs(random_loss.item() - math.log(256)) < 0.1 * math.log(256)
    assert info_nce_loss(z[:1], z[:1]) >= 0


def test_koleo_prefers_spread_embeddings():
    torch.manual_seed(0)
    spread = torch.nn.functional.normalize(torch.randn(64, 8), dim=-1)
    clumped = torch.nn.functional.normalize(torch.randn(64, 8) * 0.01 + 1, dim=-1)
    assert koleo_loss(spread) < koleo_loss(clumped)
    assert koleo_loss(spread[:1]) == 0


@pytest.mark.parametrize("backbone", ["mamba2", "transformer"])
def test_backbones_are_interchangeable(backbone):
    torch.manual_seed(0)
    model = WearableModel(3, 48, backbone=backbone, d_model=16, n_layers=1, head_dim=8, proj_dim=8)
    weeks = _weeks()
    assert model.embed(weeks).shape == (4, 16)
    loss = model(weeks)
    loss.backward()
    assert torch.isfinite(loss) and loss >= 0


def test_missing_cells_reach_the_tokenizer_as_zeros():
    torch.manual_seed(0)
    model = WearableModel(3, 48, d_model=8, n_layers=1, head_dim=8).eval()
    seen = {}
    model.tokenizer.register_forward_hook(lambda module, args, out: seen.update(values=args[0], missing=args[1]))
    weeks = _weeks()
    embedding = model.embed(weeks)
    assert torch.isfinite(embedding).all()
    assert (seen["values"][seen["missing"]] == 0).all()
    assert seen["missing"].equal(torch.isnan(weeks))


@pytest.mark.parametrize("pooling", ["mean", "masked_mean", "layer_mean"])
def test_all_missing_week_has_a_finite_embedding(pooling):
    model = WearableModel(3, 48, d_model=8, n_layers=1, head_dim=8, pooling=pooling).eval()
    weeks = torch.full((2, 48, 3), float("nan"))
    assert torch.isfinite(model.embed(weeks)).all()


def test_masked_mean_ignores_empty_hours():
    torch.manual_seed(0)
    model = WearableModel(2, 10, backbone="transformer", d_model=8, n_layers=0, pooling="masked_mean").eval()
    weeks = torch.randn(1, 10, 2)
    weeks[:, 5:] = float("nan")
    tokens = model.backbone(model.tokenizer(*_normalised(model, weeks)))
    torch.testing.assert_close(model.embed(weeks), tokens[:, :5].mean(1))


@pytest.mark.parametrize("backbone", ["mamba2", "transformer"])
def test_layer_mean_puts_every_layer_mean_side_by_side(backbone):
    torch.manual_seed(0)
    model = WearableModel(3, 48, backbone=backbone, d_model=8, n_layers=2, head_dim=8,
                          pooling="layer_mean").eval()
    weeks = _weeks()
    tokens = model.tokenizer(*model.normalize(weeks))
    first = model.backbone.layers[0](tokens + model.backbone.position if backbone == "transformer" else tokens)
    second = model.backbone.layers[1](first)
    embedding = model.embed(weeks)
    assert model.embedding_dim == 24 and embedding.shape == (4, 24)
    torch.testing.assert_close(embedding, torch.cat([tokens.mean(1), first.mean(1), second.mean(1)], -1))
    # The last block is what pooling="mean" returns from the same weights.
    model.pooling = "mean"
    torch.testing.assert_close(model.embed(weeks), embedding[:, 16:])


def test_contrastive_head_reads_the_layer_mean_embedding():
    torch.manual_seed(0)
    model = WearableModel(3, 48, d_model=8, n_layers=1, head_dim=8, proj_dim=4, pooling="layer_mean")
    loss = model(_weeks())
    loss.backward()
    assert model.head.mlp[0].in_features == 16 and torch.isfinite(loss)


def _normalised(model, weeks):
    missing = torch.isnan(weeks)
    z = torch.where(missing, 0.0, (weeks - model.channel_mean) / model.channel_std)
    return z, missing


def test_transformer_rejects_longer_weeks():
    model = WearableModel(2, 10, backbone="transformer", d_model=8, n_layers=1)
    with pytest.raises(ValueError, match="at most 10"):
        model.embed(torch.zeros(1, 11, 2))


def test_unknown_options_are_rejected():
    with pytest.raises(ValueError, match="backbone"):
        WearableModel(2, backbone="lstm")
    with pytest.raises(ValueError, match="pooling"):
        WearableModel(2, pooling="max")


def test_masked_objective_hides_hours_from_the_tokenizer():
    model = WearableModel(3, 48, d_model=16, n_layers=1, head_dim=8, objective="masked")
    weeks = _weeks(batch=8, length=48, channels=3, missing=0.2)
    seen = {}

    def record(module, inputs):
        seen["values"], seen["unseen"] = inputs

    model.tokenizer.register_forward_pre_hook(record)
    torch.manual_seed(0)
    loss = model(weeks)
    loss.backward()
    missing = torch.isnan(weeks)
    # Every missing cell stays unseen, more hours are hidden, and hidden or
    # missing cells reach the tokenizer as zeros.
    assert seen["unseen"][missing].all()
    assert seen["unseen"].sum() > 1.2 * missing.sum()
    assert (seen["values"][seen["unseen"]] == 0).all()
    assert torch.isfinite(loss) and loss > 0
    assert model.reconstruction.weight.grad.abs().sum() > 0
    assert not hasattr(model, "head")


@settings(max_examples=20, deadline=None)
@given(length=st.integers(1, 60), channels=st.integers(1, 4), missing=st.sampled_from([0.0, 0.5, 1.0]))
def test_masked_objective_is_finite_for_any_week(length, channels, missing):
    model = WearableModel(channels, 60, d_model=8, n_layers=1, head_dim=4, tokenizer_hidden=8,
                          objective="masked")
    loss = model(_weeks(batch=3, length=length, channels=channels, missing=missing))
    loss.backward()
    assert torch.isfinite(loss) and loss >= 0
    if missing == 1.0:
        assert loss == 0  # nothing observed, nothing to reconstruct


def test_masked_objective_weighs_each_variable_equally():
    # A variable observed once per day moves the loss as much as an hourly one.
    model = WearableModel(2, 168, d_model=8, n_layers=1, head_dim=4, objective="masked", mask_fraction=0.5)
    weeks = torch.zeros(16, 168, 2)
    weeks[:, :, 1] = float("nan")
    weeks[:, 6::24, 1] = 0.0
    with torch.no_grad():
        model.reconstruction.weight.zero_()
        model.reconstruction.bias.copy_(torch.tensor([1.0, 3.0]))
        torch.manual_seed(0)
        loss = model(weeks)
    # Squared errors 1 and 9, averaged per variable: (1 + 9) / 2.
    assert loss.item() == pytest.approx(5.0)


def test_visible_weight_adds_the_shown_hours_to_the_loss():
    # Redraw the objective's mask with its seed, then make every hidden hour
    # read -1 and every shown hour 3: a head that always says 0 misses by 1
    # and 3, so the loss is 1 + visible_weight * 9.
    torch.manual_seed(0)
    hide = torch.rand(8, 168, 1) < 0.3
    hide |= hour_blocks(8, 168, 2, 6, 24)
    weeks = torch.where(hide, -1.0, 3.0)
    for weight in (0.0, 0.5):
        model = WearableModel(1, 168, d_model=8, n_layers=1, head_dim=4, objective="masked",
                              mask_fraction=0.3, visible_weight=weight)
        seen = {}
        model.tokenizer.register_forward_pre_hook(lambda module, inputs: seen.update(unseen=inputs[1]))
        with torch.no_grad():
            model.reconstruction.weight.zero_()
            model.reconstruction.bias.zero_()
            torch.manual_seed(0)
            loss = model(weeks).item()
        assert torch.equal(seen["unseen"], hide)
        assert loss == pytest.approx(1.0 + weight * 9.0)


def test_objective_options_are_checked():
    with pytest.raises(ValueError, match="objective"):
        WearableModel(2, objective="byol")
    with pytest.raises(ValueError, match="mask_fraction"):
        WearableModel(2, objective="masked", mask_fraction=1.0)
    with pytest.raises(ValueError, match="visible_weight"):
        WearableModel(2, objective="masked", visible_weight=-1.0)
    with pytest.raises(ValueError, match="visible_weight"):
        WearableModel(2, objective="masked", visible_weight=float("nan"))


@pytest.mark.parametrize("day_context, touched", [(False, [30]), (True, [6, 30, 54])])
def test_day_context_tokens_read_the_same_hour_a_day_away(day_context, touched):
    torch.manual_seed(0)
    tokenizer = HourlyTokenizer(2, 8, hidden=16, dropout=0.0, day_context=day_context)
    values, missing = torch.randn(1, 72, 2), torch.zeros(1, 72, 2, dtype=torch.bool)
    moved = values.clone()
    moved[0, 30] += 1.0
    changed = (tokenizer(moved, missing) - tokenizer(values, missing)).abs().amax(-1)[0] > 0
    assert changed.nonzero().flatten().tolist() == touched


@settings(max_examples=30, deadline=None)
@given(length=st.integers(1, 80), lag=st.sampled_from([24, -24]))
def test_shifted_hours_outside_the_week_are_filled(length, lag):
    x = torch.arange(length, dtype=torch.float32).reshape(1, length, 1)
    out = _shift_hours(x, lag, -1.0)[0, :, 0]
    hours = torch.arange(length)
    source = hours - lag
    inside = (source >= 0) & (source < length)
    torch.testing.assert_close(out[inside], source[inside].float())
    assert (out[~inside] == -1.0).all()


def test_day_context_never_shows_a_hidden_reading():
    torch.manual_seed(0)
    model = WearableModel(3, 72, d_model=8, n_layers=1, head_dim=8, objective="masked", day_context=True)
    seen = {}
    model.tokenizer.context.register_forward_hook(lambda module, args, out: seen.update(inputs=args[0]))
    model(_weeks(length=72))
    # The context MLP's columns: values, mask, then values and mask a day earlier, then a day later.
    inputs = seen["inputs"].reshape(4, 72, 6, 3)
    for values, mask in ((0, 1), (2, 3), (4, 5)):
        hidden = inputs[:, :, mask] == 1
        assert hidden.any() and (inputs[:, :, values][hidden] == 0).all()


def test_day_context_keeps_the_one_hour_tokenizer_of_the_plain_model():
    # Same seed, same first module: the day-context tokenizer is the plain one plus a context term,
    # and weights of a model without day context load into its one-hour part.
    torch.manual_seed(0)
    plain = HourlyTokenizer(3, 8, hidden=16, dropout=0.0)
    torch.manual_seed(0)
    with_context = HourlyTokenizer(3, 8, hidden=16, dropout=0.0, day_context=True)
    assert with_context.mlp.state_dict().keys() == plain.mlp.state_dict().keys()
    for name, tensor in plain.mlp.state_dict().items():
        torch.testing.assert_close(with_context.mlp.state_dict()[name], tensor)
    values, missing = torch.randn(2, 48, 3), torch.zeros(2, 48, 3, dtype=torch.bool)
    with torch.no_grad():
        with_context.context[-1].weight.zero_()
        with_context.context[-1].bias.zero_()
    torch.testing.assert_close(with_context(values, missing), plain(values, missing))
