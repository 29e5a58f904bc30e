import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.pointcloud._model import (
    GAPromptNetwork,
    PointMAE,
    PointMAEBackbone,
    ShiftNet,
    fourier_features,
    invariant_start_index,
)


def _clouds(batch=3, n=96, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, 3, generator=g, dtype=dtype)
    return x / x.norm(dim=-1).amax(dim=1)[:, None, None]


def _tiny_backbone(seed=0, **kwargs):
    torch.manual_seed(seed)
    config = dict(trans_dim=16, depth=2, num_heads=2, num_group=16, group_size=8) | kwargs
    return PointMAEBackbone(**config)


def _network(peft="gaprompt", seed=0, **kwargs):
    backbone = _tiny_backbone(seed)
    torch.manual_seed(seed + 1)
    return GAPromptNetwork(backbone, 4, peft=peft, **({"head_hidden": 8} | kwargs))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), duplicates=st.integers(0, 10), seed=st.integers(0, 2**16))
def test_invariant_start_index_ignores_point_order(n, duplicates, seed):
    rng = np.random.default_rng(seed)
    points = rng.integers(-3, 4, size=(n, 3)).astype(np.float32)  # a coarse grid: many ties
    points = np.concatenate([points, points[rng.integers(0, n, duplicates)]])
    perm = rng.permutation(len(points))
    start = invariant_start_index(torch.as_tensor(points)[None])[0]
    start_perm = invariant_start_index(torch.as_tensor(points[perm])[None])[0]
    np.testing.assert_array_equal(points[start], points[perm][start_perm])
    radius = ((points - points.mean(0)) ** 2).sum(1)
    assert radius[start] == pytest.approx(radius.max())


def test_fourier_features_match_the_official_channel_order():
    x = torch.tensor([[0.5, -1.0, 2.0]])
    out = fourier_features(x, 2)
    expected = torch.cat([x, torch.sin(x), torch.cos(x), torch.sin(2 * x), torch.cos(2 * x)], dim=-1)
    torch.testing.assert_close(out, expected)
    assert out.shape == (1, 15)


def test_shift_net_keeps_points_at_the_origin_and_counts_like_the_official():
    torch.manual_seed(0)
    net = ShiftNet(n_groups=16, group_size=8, shift_scale=0.8).eval()
    x = _clouds(2, 64)
    x[:, 0] = 0.0
    shifted, shape = net(x)
    assert torch.equal(shifted[:, 0], torch.zeros(2, 3))
    assert not torch.allclose(shifted, x)          # kaiming-initialised head: moved at step 0
    assert shape.shape == (2, 8 * 8)
    # The official ShiftNet of the ScanObjectNN config (G=128, M=32): 25,371 parameters.
    assert sum(p.numel() for p in ShiftNet(128, 32).parameters()) == 25_371


def test_zero_init_shift_is_identity():
    torch.manual_seed(0)
    net = _network(zero_init=True).eval()
    x = _clouds()
    shifted, _ = net.shift(x)
    torch.testing.assert_close(shifted, x, rtol=0, atol=0)


def test_trainable_parameters_of_the_paper_config():
    # Spec section 2.7 counts 628,147 trainable parameters for the official
    # PB_T50_RS model; we leave out the adapters' unused `scale` layers
    # (12 x 385) and the prompt embeddings of the six unprompted blocks.
    backbone = PointMAEBackbone(384, 12, 6, 128, 32)
    net = GAPromptNetwork(backbone, 15, head_hidden=256, head_dropout=0.6, prompt_depth=6, interp_neighbors=32)
    trainable = sum(p.numel() for p in net.trainable_parameters())
    assert trainable == 628_147 - 12 * 385 - 6 * 10 * 384
    assert sum(p.numel() for p in backbone.parameters()) == 21_825_024  # 22,453,195 - trainable - 24 scalers


@pytest.mark.parametrize("peft", ["gaprompt", "linear", "full", "prompt", "adapter"])
def test_methods_train_what_they_say(peft):
    net = _network(peft)
    backbone_trains = any(p.requires_grad for p in net.backbone.parameters())
    assert backbone_trains == (peft == "full")
    names = {name.split(".")[0] for name, p in net.named_parameters() if p.requires_grad}
    expected = {
        "gaprompt": {"cls_token", "cls_pos", "cls_head", "shift_net", "shape_feature_mlp", "point_prompt",
                     "prompt_embeddings", "prompt_cor", "adapter", "out_transform"},
        "linear": {"cls_token", "cls_pos", "cls_head"},
        "full": {"cls_token", "cls_pos", "cls_head", "backbone"},
        "prompt": {"cls_token", "cls_pos", "cls_head", "prompt_embeddings", "prompt_cor"},
        "adapter": {"cls_token", "cls_pos", "cls_head", "adapter"},
    }[peft]
    assert names == expected


def test_frozen_backbone_stays_in_eval_mode_while_training():
    net = _network().train()
    assert net.training and not net.backbone.training
    assert not any(m.training for m in net.backbone.modules())
    assert net.shift_net.training
    full = _network("full").train()
    assert full.backbone.training


@pytest.mark.parametrize("propagation", ["after_attention", "before_attention"])
def test_a_cloud_does_not_depend_on_its_batch(propagation):
    net = _network(propagation=propagation).double().eval()
    x = _clouds(4, dtype=torch.float64)
    with torch.no_grad():
        together = net(x)
        alone = torch.cat([net(x[i:i + 1]) for i in range(4)])
        other = x.clone()
        other[0] = _clouds(1, seed=9, dtype=torch.float64)[0]
        swapped = net(other)
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-12)
    torch.testing.assert_close(swapped[1:], together[1:], rtol=0, atol=1e-12)


def test_propagation_never_reads_another_sample():
    # Point tokens carry their sample's id; whatever is pooled and spread
    # must stay proportional to it, also in training mode.
    net = _network().train()
    for block in net.out_transform:
        block[0] = torch.nn.Identity()
    batch, groups, dim = 3, net.backbone.num_group, net.backbone.trans_dim
    centers = _clouds(batch, groups)
    from skicml.pointcloud._model import group_cloud

    level2_centers, level2_index, level2_neighbours = group_cloud(centers, groups // 2, 4)
    ids = torch.arange(1.0, batch + 1)[:, None, None]
    n_prompts = 10
    x = torch.cat([torch.full((batch, 1 + n_prompts, dim), -100.0), ids.expand(batch, groups, dim)], dim=1)
    with torch.no_grad():
        net.drop_path_rates = [0.0] * len(net.drop_path_rates)
        out = net._propagate(0, x, n_prompts, (centers, level2_centers, level2_index, level2_neighbours))
    gelu = torch.nn.functional.gelu
    expected = ids + 0.3 * (gelu(2 * ids) + 0.3 * ids)
    torch.testing.assert_close(out[:, 1 + n_prompts:], expected.expand(batch, groups, dim))
    torch.testing.assert_close(out[:, :1 + n_prompts], x[:, :1 + n_prompts])


def test_predictions_ignore_the_order_of_points():
    net = _network().eval()
    x = _clouds(2, 128)
    perm = torch.randperm(128, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(net(x[:, perm]), net(x), rtol=0, atol=1e-5)


def test_all_components_off_is_the_plain_backbone():
    net = _network(shift_net=False, n_point_prompts=0, n_token_prompts=0, propagation=None,
                   adapter_dim=0).eval()
    x = _clouds()
    backbone = net.backbone
    with torch.no_grad():
        features = net.features(x)
        centers, neighbourhoods = backbone.group(x)
        tokens = torch.cat([net.cls_token.expand(3, -1, -1), backbone.embed(neighbourhoods)], dim=1)
        pos = torch.cat([net.cls_pos.expand(3, -1, -1), backbone.pos(centers)], dim=1)
        h = tokens
        for block in backbone.blocks:
            h = block(h + pos)
        h = backbone.norm(h)
    dim = backbone.trans_dim
    torch.testing.assert_close(features[:, :dim], h[:, 0])
    torch.testing.assert_close(features[:, dim:2 * dim], h[:, 1:].amax(dim=1))
    assert torch.equal(features[:, 2 * dim:], torch.zeros(3, dim))


def test_point_mae_loss_trains_down():
    torch.manual_seed(0)
    mae = PointMAE(_tiny_backbone(), decoder_depth=1, decoder_heads=2)
    x = _clouds(8, 64)
    optimizer = torch.optim.Adam(mae.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = mae(x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]
    assert mae.n_masked() == round(0.6 * 16)


def test_prompt_depth_beyond_the_backbone_is_refused():
    with pytest.raises(ValueError, match="prompt_depth=5 must lie in"):
        _network(prompt_depth=5)


def test_default_widths_follow_the_backbone_and_are_the_official_at_width_384():
    from skicml.pointcloud._model import PAPER_WIDTHS, default_widths

    assert default_widths(384) == {"head_hidden": 0, "adapter_dim": 16, "shift_net_width": 64}
    assert default_widths(128) == {"head_hidden": 0, "adapter_dim": 16, "shift_net_width": 21}
    assert PAPER_WIDTHS["head_hidden"] == 256
    net = _network(head_hidden=None)
    assert net.widths == {"head_hidden": 0, "adapter_dim": 16, "shift_net_width": 3}  # a width-16 backbone
    assert isinstance(net.cls_head, torch.nn.Linear)


@pytest.mark.parametrize("groups", [(32, 16), (64, 16), (128, 32)])
def test_the_shipped_architecture_trains_the_papers_share(groups):
    # The shipped backbone's architecture (width 128, six blocks): GAPrompt's
    # defaults train at most 3% of the parameters (the paper: 2.2-2.8%); the
    # official widths trained 7.65-8% of them.
    torch.manual_seed(0)
    backbone = PointMAEBackbone(128, 6, 4, *groups)

    def share(**widths):
        net = GAPromptNetwork(backbone, 10, **widths)
        return sum(p.numel() for p in net.trainable_parameters()) / sum(p.numel() for p in net.parameters())

    assert 0.02 < share() <= 0.03
    assert share(head_hidden=128, adapter_dim=16, shift_net_width=64) > 0.075


def test_a_narrower_shift_net_scales_every_layer():
    wide, narrow = ShiftNet(64, 16, width=64), ShiftNet(64, 16, width=32)
    assert narrow.shape_dim == 32 * 4 and wide.shape_dim == 32 * 8
    assert narrow.mlp_position[0].in_features == 16 and narrow.mlp_position[0].out_features == 32
    assert sum(p.numel() for p in narrow.parameters()) < sum(p.numel() for p in wide.parameters()) / 3


def _conv_encoder(encoder, neighbourhoods):
    """The official Encoder's forward: 1x1 convolutions over (BG, C, M) and maxima over the group."""
    batch, groups, size, _ = neighbourhoods.shape
    feature = encoder.first_conv(neighbourhoods.reshape(batch * groups, size, 3).transpose(1, 2))
    pooled = torch.max(feature, dim=2, keepdim=True)[0]
    feature = encoder.second_conv(torch.cat([pooled.expand(-1, -1, size), feature], dim=1))
    return torch.max(feature, dim=2)[0].reshape(batch, groups, -1)


@pytest.mark.parametrize("training", [False, True])
def test_mini_pointnet_is_the_official_encoder_with_its_gradient(training):
    backbone = _tiny_backbone().double()
    encoder = backbone.encoder.train(training)
    reference = copy.deepcopy(encoder)
    neighbourhoods = (0.1 * torch.randn(2, 5, 8, 3, dtype=torch.float64)).requires_grad_()
    mine = neighbourhoods.detach().clone().requires_grad_()
    out, expected = encoder(mine), _conv_encoder(reference, neighbourhoods)
    torch.testing.assert_close(out, expected)
    out.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(mine.grad, neighbourhoods.grad)
    for a, b in zip(encoder.buffers(), reference.buffers()):   # the same batch-norm statistics
        torch.testing.assert_close(a, b)


def test_frozen_parameters_get_no_gradient_but_the_geometry_prompts_do():
    # As in the official code, the shift prompter and the point prompts learn through the frozen
    # mini-PointNet (the gathers of the grouping are differentiable); the frozen weights get no gradient.
    net = _network().train()
    net(_clouds()).logsumexp(dim=1).mean().backward()
    assert all(p.grad is None for p in net.backbone.parameters())
    assert net.point_prompt.grad is not None and net.point_prompt.grad.abs().sum() > 0
    assert all(p.grad is not None for p in net.shift_net.mlp_position.parameters())
