"""Fine-tuning a TabICL network on the user's own table (``finetune_epochs``).

The official recipe (``tabicl`` 2.2.0, ``FinetunedTabICLClassifier`` and
``FinetunedTabICLRegressor``), run through the shared epoch loop
(:func:`skicml.utils.training.fit_module`):

* a held-out share of the rows (``finetune_validation_fraction``, 0.1,
  stratified for classification) never enters an episode;
* every epoch cuts the other rows, shuffled, into chunks of at most
  :data:`MAX_EPISODE_ROWS` (one chunk, so one optimiser step per epoch, up to
  10,000 rows); each chunk is one *episode*: :data:`QUERY_FRACTION` of its
  rows (at least one per class) are the queries, the rest the context, split
  afresh every epoch (stratified for classification);
* the context is preprocessed into a few ensemble members exactly as the
  estimator's ensemble does (normalisation, column order, class shift; fitted
  on the context, with the estimator's fixed seed, so only the rows change
  between epochs), and the network's own training forward predicts the
  queries from the context: cross-entropy over the classes (labels shifted as
  each member shifts them), or for regression the pinball loss over the
  network's quantile levels on targets standardised by the context;
* AdamW on every parameter (weight decay 0.01), linear warm-up over 10% of the
  steps then cosine decay, gradient norm clipped at 1.0;
* after every epoch the held-out rows are scored (same loss) against the
  training rows as context; training stops after ``finetune_patience`` epochs
  without an improvement of 1e-4, and the best weights are kept: the
  pretrained ones when no epoch beat them on the held-out rows.

The estimator then runs its ordinary ``fit`` (all rows as context, every
ensemble member, the ``"auto"`` temperature) with the fine-tuned network, so
inference is unchanged.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

from ._ensemble import EnsembleGenerator
from ._quantiles import quantile_levels

__all__ = ["EpisodeTrainer", "finetune_network"]

#: Share of an episode's rows that are queries (the official ``finetune_ctx_query_ratio``).
QUERY_FRACTION = 0.2
#: Most rows of one episode (the official ``max_data_size``); more rows make several episodes per epoch.
MAX_EPISODE_ROWS = 10_000
#: The official optimiser settings.
WEIGHT_DECAY = 0.01
GRAD_CLIP = 1.0
WARMUP_FRACTION = 0.1
#: An epoch improves on the best held-out loss by more than this (the official ``min_delta``).
MIN_DELTA = 1e-4


def _can_stratify(y, n_test, n_classes=None):
    """Whether a stratified split of ``y`` with ``n_test`` test rows is possible."""
    _, counts = np.unique(y, return_counts=True)
    k = len(counts) if n_classes is None else n_classes
    return counts.min() >= 2 and k <= n_test <= len(y) - k


class EpisodeTrainer(torch.nn.Module):
    """The loss of a TabICL network on episodes drawn from one table, for the epoch loop.

    ``forward(rows)`` takes row indices of the table. In training mode the
    rows are one episode: split into context and queries, preprocessed into
    the members, and the mean loss of the queries is returned. In evaluation
    mode (the loop's held-out rows) the rows are all queries, against the
    training rows seen so far as context (at most :data:`MAX_EPISODE_ROWS`
    of them), with members fitted once on that context.

    Parameters
    ----------
    network : TabICLModel or TabICLv2Model
        Trained in place (float32).
    X : ndarray of shape (n, p)
        The table, numeric (the estimator's encoder's output).
    y : ndarray of shape (n,)
        Class ids ``0 .. n_classes - 1``, or the (standardised) targets.
    n_classes : int
        0 for regression.
    ensemble_params : dict
        :class:`EnsembleGenerator` parameters of the members of an episode.
    seed : int
        Seeds the context/query splits (episode ``e`` uses ``seed + e``).
    """

    def __init__(self, network, X, y, *, n_classes, ensemble_params, seed):
        super().__init__()
        self.network = network
        self.X = X
        self.y = y
        self.n_classes = n_classes
        self.ensemble_params = ensemble_params
        self.seed = int(seed)
        self.seen = np.zeros(len(y), dtype=bool)
        self.episodes = 0
        self._valid = None

    # -- episodes ---------------------------------------------------------------
    def _split(self, rows):
        """``(context, query)`` rows of one episode."""
        y = self.y[rows]
        n = len(rows)
        n_query = max(1, math.floor(QUERY_FRACTION * n))
        split_seed = (self.seed + self.episodes) % 2**32
        stratify = False
        if self.n_classes:
            n_query = max(n_query, len(np.unique(y)))
            stratify = _can_stratify(y, min(n_query, n - 1))
        n_query = max(1, min(n_query, n - 1))
        splitter = (StratifiedShuffleSplit if stratify else ShuffleSplit)(
            n_splits=1, test_size=n_query, random_state=split_seed)
        context, query = next(splitter.split(np.zeros((n, 1)), y))
        if self.n_classes:
            # A query of a class the context lacks cannot be answered in context.
            query = query[np.isin(y[query], y[context])]
        return rows[context], rows[query]

    def _members(self, context):
        """The members of an episode, fitted on its context rows."""
        y = self.y[context] if self.n_classes else np.zeros(len(context), dtype=np.int64)
        return EnsembleGenerator(**self.ensemble_params).fit(self.X[context], y)

    def _loss(self, ensemble, context, query):
        """Mean loss of the ``query`` rows against the ``context`` rows, over the members."""
        parameter = next(self.network.parameters())
        if len(query) == 0 or ensemble.n_features_out_ == 0:
            return parameter.sum() * 0.0  # nothing to learn from: a zero gradient
        X_query = ensemble.transform(self.X[query])
        y_context, y_query = self.y[context], self.y[query]
        if not self.n_classes:  # the official per-episode standardisation of the targets
            mean, std = float(y_context.mean()), max(float(y_context.std()), 1e-8)
            y_context, y_query = (y_context - mean) / std, (y_query - mean) / std
        by_width = {}
        for index, (view, permutation, _) in enumerate(ensemble.configs_):
            by_width.setdefault(len(permutation), []).append(index)
        total, count = 0.0, 0
        for members in by_width.values():
            tables, contexts, queries = [], [], []
            for index in members:
                view, permutation, offset = ensemble.configs_[index]
                tables.append(np.concatenate([ensemble.X_train_[view][:, permutation],
                                              X_query[view][:, permutation]]))
                if self.n_classes:
                    contexts.append((y_context + offset) % self.n_classes)
                    queries.append((y_query + offset) % self.n_classes)
                else:
                    contexts.append(y_context)
                    queries.append(y_query)
            X = torch.from_numpy(np.stack(tables)).to(parameter.device, parameter.dtype)
            if self.n_classes:
                y_train = torch.as_tensor(np.stack(contexts), device=X.device, dtype=torch.long)
                target = torch.as_tensor(np.stack(queries), device=X.device, dtype=torch.long)
                logits = self.network(X, y_train)[..., :self.n_classes]
                total = total + F.cross_entropy(logits.reshape(-1, self.n_classes).float(), target.reshape(-1),
                                                reduction="sum")
            else:
                y_train = torch.as_tensor(np.stack(contexts), device=X.device, dtype=parameter.dtype)
                target = torch.as_tensor(np.stack(queries), device=X.device, dtype=torch.float32)
                quantiles = self.network(X, y_train).float()
                levels = quantile_levels(quantiles.shape[-1], device=X.device)
                errors = target.unsqueeze(-1) - quantiles
                total = total + torch.maximum(levels * errors, (levels - 1) * errors).mean(-1).sum()
            count += target.numel()
        return total / count

    def _validation_members(self):
        """Context rows and members of the held-out evaluation (cached while the training rows stay)."""
        key = self.seen.tobytes()
        if self._valid is None or self._valid[0] != key:
            context = np.flatnonzero(self.seen)
            if len(context) > MAX_EPISODE_ROWS:
                keep = np.random.RandomState(self.seed).choice(len(context), MAX_EPISODE_ROWS, replace=False)
                context = context[np.sort(keep)]
            self._valid = (key, context, self._members(context))
        return self._valid[1], self._valid[2]

    def forward(self, rows):
        rows = rows.detach().cpu().numpy().astype(np.int64)
        if self.training:
            self.seen[rows] = True
            context, query = self._split(rows)
            self.episodes += 1
            return self._loss(self._members(context), context, query)
        context, ensemble = self._validation_members()
        return self._loss(ensemble, context, rows)

    def validation_loss(self):
        """The held-out loss (rows never in an episode) of the network as it is now."""
        rows = np.flatnonzero(~self.seen)
        was_training = self.training
        self.eval()
        total = 0.0
        with torch.no_grad():
            for start in range(0, len(rows), MAX_EPISODE_ROWS):
                part = rows[start:start + MAX_EPISODE_ROWS]
                total += float(self(torch.from_numpy(part))) * len(part)
        self.train(was_training)
        return total / len(rows)


def _best_epoch(valid_loss):
    """The epoch whose weights early stopping kept: the last to improve on the best by more than :data:`MIN_DELTA`."""
    best, epoch = math.inf, 0
    for index, value in enumerate(valid_loss, start=1):
        if value < best - MIN_DELTA:
            best, epoch = value, index
    return epoch, best


def check_finetune_data(estimator, n_samples):
    """Raise when ``n_samples`` rows leave no episode after the held-out share."""
    n_valid = math.ceil(estimator.finetune_validation_fraction * n_samples)
    if n_samples - n_valid < 2:
        raise ValueError(
            f"finetune_epochs={estimator.finetune_epochs} fine-tunes on episodes of at least 2 rows (a context "
            f"and a query) after holding out finetune_validation_fraction={estimator.finetune_validation_fraction} "
            f"of the rows ({n_valid} of {n_samples}); {n_samples} rows are too few: pass more rows or "
            "finetune_epochs=0."
        )


def finetune_network(estimator, network, X, y, *, n_classes, ensemble_params, seed):
    """Fine-tune ``network`` on the table ``(X, y)`` with ``estimator``'s ``finetune_*`` settings.

    Returns ``(network, history, n_steps)``: the network (float32, eval
    mode) with the kept weights, a dict ``{"train_loss", "valid_loss",
    "pretrained_valid_loss", "best_epoch", "kept_valid_loss"}`` (per-epoch
    losses; ``best_epoch`` 0: the pretrained weights were kept;
    ``kept_valid_loss``: the held-out loss of the kept weights, measured
    again after they were restored) and the optimiser steps taken.
    """
    check_finetune_data(estimator, len(y))
    if n_classes and n_classes > network.max_classes:
        raise ValueError(
            f"finetune_epochs={estimator.finetune_epochs}: fine-tuning trains the network's own "
            f"{network.max_classes}-class head, and y has {n_classes} classes; pass finetune_epochs=0 (the class "
            "tree then handles them at inference) or fewer classes."
        )
    network = network.float().train()
    pretrained = copy.deepcopy(network.state_dict())
    trainer = EpisodeTrainer(network, X, y, n_classes=n_classes, ensemble_params=ensemble_params, seed=seed)
    n = len(y)
    fraction = estimator.finetune_validation_fraction
    n_valid = math.ceil(fraction * n)
    n_train = n - n_valid
    # Equal chunks of at most MAX_EPISODE_ROWS rows (the official recipe's last chunk may be small).
    n_chunks = -(-n_train // MAX_EPISODE_ROWS)
    batch_size = -(-n_train // n_chunks)
    patience = estimator.finetune_patience
    trainer, history = estimator._fit_module(
        trainer, {"rows": np.arange(n)}, y if n_classes else None, loss=None,
        max_epochs=estimator.finetune_epochs, batch_size=batch_size, lr=estimator.finetune_lr,
        weight_decay=WEIGHT_DECAY, optimizer="adamw", lr_schedule="cosine", warmup_fraction=WARMUP_FRACTION,
        grad_clip=GRAD_CLIP, validation_fraction=fraction,
        stratify=bool(n_classes) and _can_stratify(y, n_valid, n_classes),
        # without patience every epoch runs, and the best one is still kept
        n_iter_no_change=estimator.finetune_epochs if patience is None else patience, tol=MIN_DELTA,
        seed=seed,
    )
    best_epoch, best_loss = _best_epoch(history.valid_loss)
    tuned = copy.deepcopy(network.state_dict())
    network.load_state_dict(pretrained)
    baseline = trainer.validation_loss()
    if best_loss < baseline - MIN_DELTA:
        network.load_state_dict(tuned)
        kept = trainer.validation_loss()
    else:
        best_epoch, kept = 0, baseline
    record = {
        "train_loss": list(history.train_loss), "valid_loss": list(history.valid_loss),
        "pretrained_valid_loss": baseline, "best_epoch": best_epoch, "kept_valid_loss": kept,
    }
    return network.eval(), record, history.n_epochs * n_chunks
