"""The network and the objectives of :class:`~skicml.contexture.NeuralContexture`.

Plain :mod:`torch.nn`: an MLP encoder (the paper's fully connected Tanh
network with skip connections, contexture spec section 2.6) and three
objectives on views ``z[:, v]`` of the same rows, each of which is minimised
by an encoder whose centred span is the top singular functions of the
context (spec section 2.2, theorem 10):

- :func:`vicreg_loss`: the non-contrastive ``E ||Psi(A) - Psi(A+)||^2``
  under ``Cov[Psi] = I``, the constraint enforced VICReg-style (a hinge on
  each output's deviation and a penalty on the covariances);
- :func:`spectral_contrastive_loss`: the centred spectral contrastive loss
  ``L_C = E[-<Psi(A), Psi(A+)> + 1/2 <Psi(A), Psi(A-)>^2]`` with the other
  rows of the batch as negatives;
- :func:`lowrank_loss`: the centred low-rank approximation objective
  ``-2 E_{P+}[Psi(A)^T Psi(A+)] + E_{P x P}[(Psi(A)^T Psi(A'))^2]`` whose
  second term is written through the views' second-moment matrices
  (``O(B d^2)`` rather than the ``O(B^2 d)`` of the pairwise negatives).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["ACTIVATIONS", "OBJECTIVES", "ContextureMLP", "lowrank_loss", "spectral_contrastive_loss",
           "vicreg_loss"]

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


class ContextureMLP(nn.Module):
    """A fully connected encoder with residual (skip) connections.

    ``h_0 = act(L_0 x)``, then ``h_l = h_{l-1} + act(L_l h_{l-1})`` where
    the widths agree (``act(L_l h_{l-1})`` where they do not, or without
    skip connections), and a linear output layer.

    Parameters
    ----------
    n_features : int
    n_outputs : int
    hidden_sizes : tuple of int, default=(256, 256)
    activation : {"tanh", "relu", "gelu"}, default="tanh"
    skip_connections : bool, default=True
    """

    def __init__(self, n_features, n_outputs, hidden_sizes=(256, 256), activation="tanh",
                 skip_connections=True):
        super().__init__()
        widths = [int(n_features), *(int(h) for h in hidden_sizes)]
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.residual = [bool(skip_connections) and a == b for a, b in zip(widths[:-1], widths[1:])]
        self.activation = ACTIVATIONS[activation]()
        self.output = nn.Linear(widths[-1], int(n_outputs))

    def forward(self, x):
        h = x
        for layer, residual in zip(self.hidden, self.residual):
            out = self.activation(layer(h))
            h = h + out if residual else out
        return self.output(h)


def _pairs(n_views):
    return [(v, w) for v in range(n_views) for w in range(v + 1, n_views)]


def _off_diagonal_square_mean(C):
    d = C.shape[0]
    return (C.pow(2).sum() - C.diagonal().pow(2).sum()) / d


def vicreg_loss(z, weights=(25.0, 25.0, 1.0), eps=1e-4):
    """VICReg: invariance, variance and covariance terms on ``z`` of shape (B, n_views, d).

    ``invariance`` is the mean squared difference of two views of a row
    (averaged over the pairs of views), ``variance`` the mean hinge
    ``relu(1 - sqrt(var + eps))`` of every output, ``covariance`` the mean
    of the squared off-diagonal covariances divided by ``d`` (both averaged
    over the views). The default weights are VICReg's 25, 25 and 1.
    """
    w_inv, w_std, w_cov = weights
    B, n_views, d = z.shape
    invariance = torch.stack([(z[:, v] - z[:, w]).pow(2).mean() for v, w in _pairs(n_views)]).mean()
    centred = z - z.mean(dim=0, keepdim=True)
    variance = centred.pow(2).sum(dim=0) / max(B - 1, 1)  # (n_views, d)
    std_term = torch.relu(1.0 - torch.sqrt(variance + eps)).mean()
    cov_term = torch.stack([
        _off_diagonal_square_mean(centred[:, v].T @ centred[:, v] / max(B - 1, 1)) for v in range(n_views)
    ]).mean()
    return w_inv * invariance + w_std * std_term + w_cov * cov_term


def spectral_contrastive_loss(z):
    """Centred spectral contrastive loss on ``z`` of shape (B, n_views, d).

    ``-<z~_i^v, z~_i^w> + 1/2 <z~_i^v, z~_j^w>^2`` averaged over the rows
    ``i``, the other rows ``j != i`` of the batch and the pairs of views,
    with ``z~`` centred over the batch.
    """
    B, n_views, _ = z.shape
    centred = z - z.mean(dim=0, keepdim=True)
    off = ~torch.eye(B, dtype=torch.bool, device=z.device)
    losses = []
    for v, w in _pairs(n_views):
        gram = centred[:, v] @ centred[:, w].T
        positive = gram.diagonal().mean()
        negative = gram[off].pow(2).mean() if B > 1 else gram.new_zeros(())
        losses.append(-positive + 0.5 * negative)
    return torch.stack(losses).mean()


def lowrank_loss(z):
    """Centred low-rank approximation objective on ``z`` of shape (B, n_views, d).

    ``-2 mean_i <z~_i^v, z~_i^w> + tr(M_v M_w)`` with ``M_v`` the batch
    second-moment matrix of view ``v`` (so that ``tr(M_v M_w)`` estimates
    ``E[(Psi(A)^T Psi(A'))^2]`` over independent rows), averaged over the
    pairs of views.
    """
    B, n_views, _ = z.shape
    centred = z - z.mean(dim=0, keepdim=True)
    moments = [centred[:, v].T @ centred[:, v] / B for v in range(n_views)]
    losses = []
    for v, w in _pairs(n_views):
        positive = (centred[:, v] * centred[:, w]).sum(dim=1).mean()
        losses.append(-2.0 * positive + (moments[v] * moments[w]).sum())
    return torch.stack(losses).mean()


OBJECTIVES = {
    "vicreg": vicreg_loss,
    "spectral_contrastive": spectral_contrastive_loss,
    "lowrank": lowrank_loss,
}
