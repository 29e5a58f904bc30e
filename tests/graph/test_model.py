"""The GraphGPT network: causal masking, padding, SMTP corruption, objectives
and the predictor (GraphGPT spec, section 6, properties 9-11)."""

import math

import networkx as nx
import numpy as np
import pytest
import torch
from scipy import stats

from skicml.graph import (
    EulerTokenizer,
    GraphGPTModel,
    GraphPredictor,
    MaskedTokenObjective,
    NextTokenObjective,
    mask_cells,
    pad_sequences,
)
from skicml.graph._graphgpt._model import IGNORE, MASK, PAD

TINY = dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2)


@pytest.fixture(scope="module")
def batch():
    """Tokens (4, L, F) of four graphs of different lengths, 0-padded, and the vocabulary size."""
    graphs = [nx.cycle_graph(5), nx.path_graph(3), nx.petersen_graph(), nx.star_graph(4)]
    for graph in graphs:
        nx.set_node_attributes(graph, {n: n % 3 for n in graph}, "x")
        nx.set_edge_attributes(graph, {e: (e[0] + e[1]) % 2 for e in graph.edges}, "edge_attr")
    tokenizer = EulerTokenizer(node_scope=16, random_state=0).fit(graphs)
    sequences = tokenizer.transform(graphs)
    return torch.from_numpy(pad_sequences(sequences)), tokenizer.vocab_size_, [len(s) for s in sequences]


def _model(vocab_size, n_stacked, seed=0, **kwargs):
    torch.manual_seed(seed)
    return GraphGPTModel(vocab_size, n_stacked, **{**TINY, **kwargs}).eval()


@pytest.mark.parametrize("stack_agg", ["sum", "gated"])
def test_causal_rows_never_see_the_future(batch, stack_agg):
    tokens, vocab, lengths = batch
    model = _model(vocab, tokens.shape[-1], num_layers=2, causal=True, stack_agg=stack_agg)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        hidden = model(tokens)
        for t in range(min(lengths) - 1):
            changed = tokens.clone()
            k = int(torch.randint(1, tokens.shape[1] - t, (1,), generator=generator))
            changed[:, t + k] = torch.randint(2, vocab, changed[:, t + k].shape, generator=generator)
            after = model(changed)
            torch.testing.assert_close(after[:, : t + 1], hidden[:, : t + 1], rtol=0, atol=0)
            assert not torch.allclose(after[:, t + k], hidden[:, t + k])
    # The bidirectional model does look ahead.
    bidirectional = _model(vocab, tokens.shape[-1], causal=False)
    changed = tokens.clone()
    changed[:, 1] = 2
    with torch.no_grad():
        assert not torch.allclose(bidirectional(changed)[:, 0], bidirectional(tokens)[:, 0])


@pytest.mark.parametrize("pooling", ["eos", "mean"])
@pytest.mark.parametrize("causal", [False, True])
def test_padding_leaves_pooled_outputs_unchanged(batch, pooling, causal):
    tokens, vocab, lengths = batch
    model = _model(vocab, tokens.shape[-1], causal=causal, stack_agg="gated")
    padded = torch.cat([tokens, torch.zeros(tokens.shape[0], 7, tokens.shape[2], dtype=tokens.dtype)], dim=1)
    with torch.no_grad():
        pooled = model.pool(tokens, model(tokens), pooling)
        torch.testing.assert_close(model.pool(padded, model(padded), pooling), pooled, rtol=0, atol=1e-5)
        # Each graph alone, unpadded, gives its row of the batch.
        for i, length in enumerate(lengths):
            alone = tokens[i: i + 1, :length]
            torch.testing.assert_close(model.pool(alone, model(alone), pooling), pooled[i: i + 1],
                                       rtol=0, atol=1e-5)
    if pooling == "eos":
        with torch.no_grad():
            hidden = model(tokens)
        last = torch.tensor(lengths) - 1
        torch.testing.assert_close(pooled, hidden[torch.arange(len(lengths)), last])


def _long_batch(n_graphs, length, n_stacked=3, seed=0):
    """Random tokens with graph i keeping lengths[i] rows and pad rows after."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(2, 50, (n_graphs, length, n_stacked), generator=generator)
    lengths = torch.randint(1, length + 1, (n_graphs,), generator=generator)
    tokens[torch.arange(length)[None, :] >= lengths[:, None]] = PAD
    return tokens, lengths


@pytest.mark.parametrize("t, power", [(0.25, 1.0), (0.5, 1.0), (0.875, 1.0), (0.5, 2.0)])
def test_mask_cells_masks_exactly_the_scheduled_count(t, power):
    # A one-point ratio range makes the ratio exact: 1 - t**power is a
    # dyadic fraction, so ceil(ratio * cells) has no rounding to argue about.
    tokens, lengths = _long_batch(64, 20)
    generator = torch.Generator().manual_seed(1)
    inputs, labels = mask_cells(tokens, 50, ratio_range=(t, t), power=power, generator=generator)
    chosen = inputs == MASK
    cells = lengths * tokens.shape[-1]
    expected = torch.ceil((1 - t ** power) * cells.double()).long()
    torch.testing.assert_close(chosen.sum((1, 2)), expected)
    pad = tokens == PAD
    assert not chosen[pad].any()
    assert (labels[~chosen] == IGNORE).all()
    torch.testing.assert_close(labels[chosen], tokens[chosen])
    assert torch.equal(inputs[~chosen], tokens[~chosen])


def test_mask_cells_token_choices_and_minimum():
    tokens, _ = _long_batch(32, 12)
    generator = torch.Generator().manual_seed(0)
    # "Stay unchanged": the inputs are the tokens, the labels still mark cells.
    inputs, labels = mask_cells(tokens, 50, token_probs=(0.0, 0.0, 1.0), generator=generator)
    assert torch.equal(inputs, tokens)
    assert ((labels != IGNORE).sum((1, 2)) >= 1).all()
    # "Random token": never pad or <mask>, always inside the vocabulary.
    inputs, labels = mask_cells(tokens, 50, token_probs=(0.0, 1.0, 0.0), generator=generator)
    chosen = labels != IGNORE
    assert inputs[chosen].min() >= MASK + 1 and inputs[chosen].max() < 50
    assert (inputs[chosen] != tokens[chosen]).float().mean() > 0.8
    # A tiny ratio still masks one cell per graph.
    inputs, _ = mask_cells(tokens, 50, ratio_range=(0.99, 0.99), power=1.0, generator=generator)
    assert ((inputs == MASK).sum((1, 2)) == 1).all()


def test_mask_ratio_is_uniform():
    n_graphs, length, width = 2000, 100, 5
    tokens = torch.randint(2, 50, (n_graphs, length, width), generator=torch.Generator().manual_seed(0))
    inputs, _ = mask_cells(tokens, 50, generator=torch.Generator().manual_seed(1))
    ratio = ((inputs == MASK).sum((1, 2)).double() / (length * width)).numpy()
    assert ratio.min() >= 0.01 and ratio.max() <= 0.99 + 1 / (length * width)
    assert stats.kstest(ratio, stats.uniform(0.01, 0.98).cdf).pvalue > 1e-3
    # power > 1 shifts the mass to high mask ratios: 1 - t**2 has median about 1 - 0.5**2.
    inputs, _ = mask_cells(tokens, 50, power=2.0, generator=torch.Generator().manual_seed(2))
    ratio = ((inputs == MASK).sum((1, 2)).double() / (length * width)).numpy()
    assert abs(np.median(ratio) - (1 - 0.5 ** 2)) < 0.05


@pytest.mark.parametrize("views", [False, True])
def test_objectives_give_finite_losses_with_gradients(batch, views):
    tokens, vocab, _ = batch
    if views:
        tokens = torch.stack([tokens, tokens.roll(1, dims=0)], dim=1)  # (B, V, L, F)
    torch.manual_seed(0)
    for objective in (MaskedTokenObjective(_model(vocab, tokens.shape[-1]).train()),
                      NextTokenObjective(_model(vocab, tokens.shape[-1], causal=True).train())):
        loss = objective(tokens)
        assert loss.ndim == 0 and torch.isfinite(loss)
        # An untrained model is close to a uniform guess over the vocabulary.
        assert abs(loss.item() - math.log(vocab)) < 0.5 * math.log(vocab)
        loss.backward()
        model = objective.model
        for name in ("embed.weight", "lm_head.weight", "token_proj.weight", "layers.0.qkv.weight"):
            grad = model.get_parameter(name).grad
            assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0, name
        assert model.embed.weight.grad[PAD].abs().sum() == 0


def test_next_token_objective_needs_a_causal_model(batch):
    _, vocab, _ = batch
    with pytest.raises(ValueError, match="causal=True"):
        NextTokenObjective(_model(vocab, 4))
    with pytest.raises(ValueError, match="stack_agg='max'"):
        GraphGPTModel(vocab, 4, stack_agg="max")
    with pytest.raises(ValueError, match="multiple of head_dim"):
        GraphGPTModel(vocab, 4, hidden_size=12, head_dim=8)


def test_masked_objective_learns(batch):
    tokens, vocab, _ = batch
    torch.manual_seed(0)
    objective = MaskedTokenObjective(_model(vocab, tokens.shape[-1]).train())
    optimizer = torch.optim.Adam(objective.parameters(), lr=1e-2)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = objective(tokens)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])


@pytest.mark.parametrize("head_hidden", [None, 8])
def test_predictor_averages_views_in_eval_and_picks_one_in_training(batch, head_hidden):
    tokens, vocab, _ = batch
    views = torch.stack([tokens, tokens.roll(1, dims=0), tokens.roll(2, dims=0)], dim=1)
    torch.manual_seed(0)
    predictor = GraphPredictor(_model(vocab, tokens.shape[-1]), n_outputs=2, head_hidden=head_hidden).eval()
    with torch.no_grad():
        per_view = torch.stack([predictor(views[:, v]) for v in range(3)], dim=1)
        torch.testing.assert_close(predictor(views), per_view.mean(1))
        assert predictor(views).shape == (len(tokens), 2)
        predictor.train()
        picked = predictor(views)
    # In training each graph uses one of its views.
    matches = (picked[:, None] - per_view).abs().amax(-1) < 1e-5
    assert matches.any(1).all()


def test_predictor_freezes_its_backbone(batch):
    tokens, vocab, _ = batch
    predictor = GraphPredictor(_model(vocab, tokens.shape[-1]), n_outputs=1, freeze_backbone=True)
    assert not any(p.requires_grad for p in predictor.backbone.parameters())
    assert all(p.requires_grad for p in predictor.head.parameters())
    predictor.train()(tokens).sum().backward()
    assert all(p.grad is None for p in predictor.backbone.parameters())
    assert predictor.head.weight.grad is not None


def test_masked_pseudo_log_likelihood_is_per_sequence_and_ignores_padding(batch):
    tokens, vocab, _ = batch
    model = _model(vocab, tokens.shape[-1])
    views = torch.stack([tokens, tokens.roll(1, dims=0)], dim=1)  # (B, V, L, F)
    padded = torch.cat([tokens, torch.zeros(tokens.shape[0], 5, tokens.shape[2], dtype=tokens.dtype)], dim=1)
    with torch.no_grad():
        scores = model.masked_pseudo_log_likelihood(views)
        alone = model.masked_pseudo_log_likelihood(tokens[2:3])
        longer = model.masked_pseudo_log_likelihood(padded)
    assert scores.shape == (4, 2) and scores.dtype == torch.float64
    # An untrained model is close to a uniform guess over the vocabulary.
    assert (scores.sub(-math.log(vocab)).abs() < 0.5 * math.log(vocab)).all()
    torch.testing.assert_close(scores[:, 1], scores[:, 0].roll(1))
    torch.testing.assert_close(alone, scores[2:3, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(longer, scores[:, 0], atol=1e-6, rtol=0)
