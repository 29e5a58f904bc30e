"""GIT's link prediction and multi-task binary heads: negative pairs, the dot-product decoder and masked BCE.

As the official ``task/link_pred.py``: every node's embedding is the
task-tree pooling of its own tree, the score of a pair ``(u, v)`` is
``sigmoid(<z_u, z_v>)`` (an inner-product decoder with no weights of its
own), and training adds as many uniformly drawn non-edges as the batch has
labelled pairs, each with label 0, under binary cross-entropy.

As the official ``task/graph.py``: a multi-task binary target ``(n, T)``
of 0 / 1 with NaN for a missing label trains ``T`` logits with the mean
binary cross-entropy over the labels present (``multitask_cross_entropy``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._backbone import TaskTreeNet

__all__ = ["LinkNet", "edge_keys", "link_loss", "multitask_loss", "sample_negative_pairs"]


def edge_keys(task_graph):
    """Sorted ``u * n + v`` of every directed edge of ``task_graph``'s CSR (both directions)."""
    n = task_graph.n_nodes
    degree = task_graph.indptr[1:] - task_graph.indptr[:-1]
    return torch.repeat_interleave(torch.arange(n), degree) * n + task_graph.neighbors


def sample_negative_pairs(n_nodes, n_pairs, keys, generator=None):
    """``(n_pairs, 2)`` uniform node pairs ``u != v`` that are not edges (``keys`` from :func:`edge_keys`).

    Draws twice as many candidates and keeps the first non-edges; on a graph
    so dense that too few survive, the rest are drawn again (a few rounds at
    most), and a complete graph returns what it found.
    """
    found, rounds = [], 0
    while sum(len(f) for f in found) < n_pairs and rounds < 8:
        pairs = torch.randint(n_nodes, (2 * n_pairs + 8, 2), generator=generator)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        key = pairs[:, 0] * n_nodes + pairs[:, 1]
        if len(keys):
            position = torch.searchsorted(keys, key).clamp_max(len(keys) - 1)
            pairs = pairs[keys[position] != key]
        found.append(pairs)
        rounds += 1
    return torch.cat(found)[:n_pairs]


class LinkNet(TaskTreeNet):
    """Dot-product link logits of node pairs over a node-task :class:`TaskGraph` (one task a node).

    Each batch of labelled pairs gets as many sampled non-edges (label 0)
    appended to its logits, in training and on a validation split alike;
    :func:`link_loss` reads them. Prediction does not go through this
    module (the estimator embeds the end nodes directly).
    """

    def __init__(self, model, task_graph, fanout, n_negatives=1.0):
        super().__init__(model, task_graph, fanout)
        self.n_negatives = float(n_negatives)
        self.keys = edge_keys(task_graph)

    def node_embeddings(self, nodes):
        """Task-tree embeddings ``(len(nodes), d)`` of the trees of ``nodes`` (distinct ids)."""
        x, edge_index, task_of_root, roots, n_tasks, edge_attr = self.trees(nodes)
        return self.model(x, edge_index, task_of_root, roots, n_tasks, edge_attr)

    def forward(self, pairs):
        pairs = torch.as_tensor(pairs, dtype=torch.int64).cpu()
        if self.n_negatives > 0:  # also on a validation split, so that its loss has both labels
            n_neg = max(1, int(round(self.n_negatives * len(pairs))))
            pairs = torch.cat([pairs, sample_negative_pairs(self.task_graph.n_nodes, n_neg, self.keys)])
        nodes, inverse = torch.unique(pairs.reshape(-1), return_inverse=True)
        z = self.node_embeddings(nodes)[inverse.to(next(self.model.parameters()).device)].reshape(len(pairs), 2, -1)
        return (z[:, 0] * z[:, 1]).sum(-1)


def link_loss(logits, target):
    """Binary cross-entropy of link logits; logits past the targets are the sampled non-edges (label 0)."""
    target = target.to(logits.dtype).reshape(-1)
    full = torch.zeros_like(logits)
    full[:len(target)] = target
    return F.binary_cross_entropy_with_logits(logits, full)


def multitask_loss(logits, target):
    """Mean binary cross-entropy over the labels present (NaN: missing), as the official ``multitask_cross_entropy``."""
    target = target.to(logits.dtype)
    present = ~torch.isnan(target)
    if not bool(present.any()):
        return logits.sum() * 0.0
    return F.binary_cross_entropy_with_logits(logits[present], target[present])
