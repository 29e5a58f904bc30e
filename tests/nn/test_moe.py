import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.base import seeded
from skicml.nn import ExpertRaceMoE
from skicml.nn.moe import balance_loss, race_threshold, router_similarity_loss, routing_statistics


def _moe(dim=8, seed=0, **kwargs):
    with seeded(seed):
        return ExpertRaceMoE(dim, **kwargs)


def _tokens(batch=3, length=5, dim=8, seed=0, dtype=torch.float32):
    return torch.randn(batch, length, dim, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 8), length=st.integers(1, 32), n_experts=st.integers(1, 16),
       fraction=st.floats(0.05, 1.0), seed=st.integers(0, 50))
def test_each_routing_keeps_what_its_groups_may_keep(batch, length, n_experts, fraction, seed):
    x = _tokens(batch, length, seed=seed, dtype=torch.float64)
    k_race = fraction * n_experts
    race = _moe(n_experts=n_experts, top_k=k_race, seed=seed).double()
    mask = race(x)[1]["mask"]
    assert int(mask.sum()) == min(max(round(k_race * batch * length), 1), batch * length * n_experts)
    k_token = max(1, int(fraction * n_experts))
    mask = _moe(n_experts=n_experts, top_k=k_token, routing="token_choice", seed=seed).double()(x)[1]["mask"]
    assert torch.all(mask.sum(dim=-1) == k_token)
    capacity = math.floor(k_race * length / n_experts)
    expert_choice = _moe(n_experts=n_experts, top_k=k_race, routing="expert_choice", seed=seed).double()
    if capacity < 1:
        with pytest.raises(ValueError, match="floor"):
            expert_choice(x)
    else:
        assert torch.all(expert_choice(x)[1]["mask"].sum(dim=1) == capacity)

    def kept(share, competing):
        return min(max(round(share), 1), competing)

    mask = _moe(n_experts=n_experts, top_k=k_race, routing="bl_choice", seed=seed).double()(x)[1]["mask"]
    assert torch.all(mask.sum(dim=(0, 1)) == kept(k_race * batch * length / n_experts, batch * length))
    mask = _moe(n_experts=n_experts, top_k=k_race, routing="be_choice", seed=seed).double()(x)[1]["mask"]
    assert torch.all(mask.sum(dim=(0, 2)) == kept(k_race * batch, batch * n_experts))
    mask = _moe(n_experts=n_experts, top_k=k_race, routing="le_choice", seed=seed).double()(x)[1]["mask"]
    assert torch.all(mask.sum(dim=(1, 2)) == kept(k_race * length, length * n_experts))


def test_race_competes_over_the_whole_batch():
    # Token choice gives every token two experts; the race lets one sample take more than another.
    x = _tokens(4, 8)
    x[0] *= 5.0
    moe = _moe(n_experts=4, top_k=2)
    per_sample = moe(x)[1]["mask"].sum(dim=(1, 2))
    assert int(per_sample.sum()) == 2 * 4 * 8
    assert len(set(per_sample.tolist())) > 1
    # Batch top K in training: a sample's routing changes with its neighbours, as the method intends.
    alone = moe(x[1:2])[1]["mask"]
    assert not torch.equal(alone, moe(x)[1]["mask"][1:2])


def test_all_pairs_selected_is_the_gated_sum_of_every_expert():
    moe = _moe(n_experts=3, top_k=3).double()
    x = _tokens(dtype=torch.float64)
    y, aux = moe(x)
    assert aux["mask"].all()
    gates = aux["logits"]
    expected = sum(
        gates[..., e, None] * (torch.nn.functional.gelu(x @ moe.w1[e] + moe.b1[e], approximate="tanh") @ moe.w2[e]
                               + moe.b2[e])
        for e in range(3))
    torch.testing.assert_close(y, expected)


@pytest.mark.parametrize("routing", ["expert_race", "token_choice", "expert_choice", "bl_choice", "be_choice",
                                     "le_choice"])
def test_permuting_the_batch_permutes_the_output(routing):
    moe = _moe(n_experts=4, top_k=2, routing=routing).double()
    x = _tokens(4, 6, dtype=torch.float64)
    order = torch.tensor([2, 0, 3, 1])
    torch.testing.assert_close(moe(x[order])[0], moe(x)[0][order])
    # Tokens may move freely where no group is tied to a position (BE's groups are the positions).
    if routing != "be_choice":
        tokens = torch.randperm(24, generator=torch.Generator().manual_seed(0))
        flat = x.reshape(1, 24, 8)
        torch.testing.assert_close(moe(flat[:, tokens])[0], moe(flat)[0][:, tokens])


def test_the_learned_threshold_makes_inference_independent_of_the_batch():
    moe = _moe(n_experts=8, top_k=2)
    for seed in range(40):
        moe(_tokens(16, 8, seed=seed))
    moe.eval()
    x = _tokens(8, 8, seed=99)
    with torch.no_grad():
        together = moe(x)[0]
        for i in range(8):
            torch.testing.assert_close(moe(x[i:i + 1])[0], together[i:i + 1])
        per_token = moe(x)[1]["mask"].sum(-1).double().mean()
    assert 1.5 <= float(per_token) <= 2.5  # within 25% of k on inputs of the training distribution


@pytest.mark.parametrize("routing, groups", [("bl_choice", 8), ("be_choice", 8)])
def test_bl_and_be_learn_one_threshold_per_group_and_route_each_sample_alone(routing, groups):
    moe = _moe(n_experts=8, top_k=2, routing=routing)
    with pytest.raises(RuntimeError, match="no inference threshold"):
        moe.eval()(_tokens(2, 8))
    moe.train()
    for seed in range(40):
        assert moe(_tokens(16, 8, seed=seed))[1]["tau"].shape == (groups,)
    assert moe.tau_.shape == (groups,) and torch.isfinite(moe.tau_).all()
    moe.eval()
    x = _tokens(8, 8, seed=99)
    with torch.no_grad():
        together = moe(x)[0]
        for i in range(8):
            torch.testing.assert_close(moe(x[i:i + 1])[0], together[i:i + 1])
        per_token = moe(x)[1]["mask"].sum(-1).double().mean()
    assert 1.0 <= float(per_token) <= 3.0
    # The thresholds survive a round trip into a fresh layer (BE's buffer takes the saved length).
    fresh = _moe(n_experts=8, top_k=2, routing=routing, seed=1)
    fresh.load_state_dict(moe.state_dict())
    torch.testing.assert_close(fresh.tau_, moe.tau_)


def test_be_choice_refuses_another_sequence_length_than_its_thresholds():
    moe = _moe(n_experts=4, top_k=2, routing="be_choice")
    moe(_tokens(4, 6))
    with pytest.raises(ValueError, match="6 tokens; got 5"):
        moe.eval()(_tokens(4, 5))


def test_the_threshold_starts_from_the_first_batch_and_moves_by_its_momentum():
    moe = _moe(n_experts=4, top_k=2, threshold_momentum=0.9)
    assert torch.isnan(moe.tau_)
    with pytest.raises(RuntimeError, match="no inference threshold"):
        moe.eval()(_tokens())
    moe.train()
    first = moe(_tokens(seed=1))[1]["tau"]
    torch.testing.assert_close(moe.tau_, first)
    second = moe(_tokens(seed=2))[1]["tau"]
    torch.testing.assert_close(moe.tau_, 0.9 * first + 0.1 * second)
    before = moe.tau_.clone()
    moe.eval()(_tokens(seed=3))
    assert torch.equal(moe.tau_, before)
    state = moe.state_dict()
    assert "tau_" in state and "expert_load_" in state
    assert int(moe.expert_load_.sum()) == 2 * 2 * 3 * 5


def test_batch_topk_inference_is_the_documented_batch_dependent_option():
    moe = _moe(n_experts=4, top_k=2, inference="batch_topk").eval()
    aux = moe(_tokens())[1]
    assert int(aux["mask"].sum()) == 2 * 3 * 5 and torch.isnan(moe.tau_)


@settings(max_examples=30, deadline=None)
@given(n_tokens=st.integers(2, 40), n_experts=st.integers(2, 8), seed=st.integers(0, 99), shift=st.floats(-5, 5))
def test_router_similarity_loss_properties(n_tokens, n_experts, seed, shift):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n_tokens, n_experts, generator=g, dtype=torch.float64)
    mask = torch.rand(n_tokens, n_experts, generator=g) < 0.5
    mask[0, :2] = True  # at least one co-selected pair
    loss = router_similarity_loss(logits, mask)
    assert loss >= 0
    torch.testing.assert_close(router_similarity_loss(logits + shift, mask), loss)
    torch.testing.assert_close(router_similarity_loss(torch.full_like(logits, shift), mask),
                               torch.tensor(1.0, dtype=torch.float64))


def test_router_similarity_loss_has_gradients_and_punishes_co_firing():
    logits = torch.randn(8, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    collapsed = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1]] * 4, dtype=torch.bool)
    (grad,) = torch.autograd.grad(router_similarity_loss(logits, collapsed), logits)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    # The same balanced load, but the pairs that always fire together give a larger loss once probabilities follow them.
    diverse = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0], [0, 1, 0, 1]] * 2, dtype=torch.bool)
    following = torch.where(collapsed, 2.0, -2.0)
    assert router_similarity_loss(following, collapsed) > router_similarity_loss(following, diverse)


def test_balance_loss_is_one_at_uniform_probabilities_and_load():
    mask = torch.eye(4, dtype=torch.bool).repeat(3, 1)
    torch.testing.assert_close(balance_loss(torch.zeros(12, 4), mask), torch.tensor(1.0))
    skewed = torch.zeros(12, 4, dtype=torch.bool)
    skewed[:, 0] = True
    assert balance_loss(torch.where(skewed, 3.0, 0.0), skewed) > 1.5


def test_routing_statistics_by_hand():
    balanced = torch.eye(4, dtype=torch.bool).repeat(2, 1)
    stats = routing_statistics(balanced)
    assert stats["max_violation"] == 0 and stats["experts_per_token_mean"] == 1
    assert math.isnan(stats["combination_usage"])  # no token has two experts
    skewed = torch.tensor([[1, 0, 0], [1, 0, 0], [1, 1, 0]], dtype=torch.bool)
    assert routing_statistics(skewed)["max_violation"] == pytest.approx(3 / (4 / 3) - 1)
    # Six pairs used 4:2:1:1:1:1 of 10: 0.4, 0.6, 0.7, 0.8, 0.9 -> five pairs reach 0.95 only with the sixth.
    rows = [[0, 1]] * 4 + [[0, 2]] * 2 + [[0, 3], [1, 2], [1, 3], [2, 3]]
    mask = torch.zeros(len(rows), 4, dtype=torch.bool)
    for i, pair in enumerate(rows):
        mask[i, pair] = True
    assert routing_statistics(mask)["combination_usage"] == pytest.approx(100.0)
    assert routing_statistics(mask, mass=0.6)["combination_usage"] == pytest.approx(100 * 2 / 6)
    assert routing_statistics(np.asarray(mask))["load"].tolist() == [7, 6, 4, 3]


def test_race_threshold_keeps_k_pairs():
    scores = torch.tensor([[0.1, 0.9], [0.5, 0.3], [0.2, 0.8]])
    assert float(race_threshold(scores, 1.0)) == pytest.approx(0.5)
    assert float(race_threshold(scores, 2.0)) == pytest.approx(0.1)
    assert float(race_threshold(scores, 0.01)) == pytest.approx(0.9)  # at least one pair


def test_per_layer_regularization_head_is_a_separate_branch():
    x = _tokens()
    with_head = _moe(n_experts=4, top_k=2, target_dim=12)
    y, aux = with_head(x)
    assert aux["plr_pred"].shape == (3, 5, 12)
    without = _moe(n_experts=4, top_k=2)
    missing = without.load_state_dict(with_head.state_dict(), strict=False)
    assert set(missing.unexpected_keys) == {"target_head.weight", "target_head.bias"}
    y_plain, _ = without(x)
    torch.testing.assert_close(y, y_plain)
    grads = torch.autograd.grad(y.sum(), list(with_head.parameters()), allow_unused=True)
    named = dict(zip([n for n, _ in with_head.named_parameters()], grads))
    assert named["target_head.weight"] is None
    plain = dict(zip([n for n, _ in without.named_parameters()],
                     torch.autograd.grad(y_plain.sum(), list(without.parameters()), allow_unused=True)))
    for name, grad in plain.items():
        if grad is not None:
            torch.testing.assert_close(named[name], grad)


@pytest.mark.parametrize("gating", ["identity", "softmax", "sigmoid"])
def test_gating_and_gradients_reach_router_and_experts(gating):
    moe = _moe(n_experts=4, top_k=2, gating=gating)
    y, aux = moe(_tokens())
    (y.square().mean() + 0.01 * aux["sim_loss"]).backward()
    for name, parameter in moe.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    if gating == "softmax":
        assert torch.all(aux["logits"].softmax(-1) > 0)


@pytest.mark.parametrize("kwargs, match", [
    ({"routing": "switch"}, "routing"),
    ({"gating": "relu"}, "gating"),
    ({"inference": "mean"}, "inference"),
    ({"top_k": 0}, "top_k"),
    ({"top_k": 9}, "top_k"),
    ({"top_k": 1.5, "routing": "token_choice"}, "whole number"),
    ({"n_experts": 0}, "n_experts"),
    ({"threshold_momentum": 1.0}, "threshold_momentum"),
])
def test_bad_arguments_name_the_problem(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExpertRaceMoE(8, **kwargs)


def test_bad_input_shape_is_refused():
    with pytest.raises(ValueError, match=r"\(B, L, 8\)"):
        _moe()(torch.randn(5, 8))
