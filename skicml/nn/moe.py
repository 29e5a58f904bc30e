"""Mixture-of-experts layers: Expert Race routing and the strategies it is compared with.

Used by one family: ``moe`` (Race-DiT).

Expert Race (Yuan et al., *Expert Race: A Flexible Routing Strategy for
Scaling Diffusion Transformer with Mixture of Experts*, ICML 2025) scores
every (token, expert) pair of the whole batch and keeps the global top
``K = k * B * L``: a token may get none of the experts or all of them, an
expert any number of tokens, and the hard tokens of the batch take the
compute the easy ones leave. Which dimensions compete is the whole method;
the six routings of the paper's Table 6 differ only in that. Each reshapes
the ``(B, L, E)`` scores into independent groups and keeps the top of each:

=================  =====================  =====================  =================
routing            independent groups     competing set          kept per group
=================  =====================  =====================  =================
``token_choice``   each (sample, token)   its E experts          k
``expert_choice``  each (sample, expert)  the sample's L tokens  floor(k * L / E)
``bl_choice``      each expert            all B * L tokens       round(k * B * L / E)
``be_choice``      each position          its B * E pairs        round(k * B)
``le_choice``      each sample            its L * E pairs        round(k * L)
``expert_race``    one                    all B * L * E pairs    round(k * B * L)
=================  =====================  =====================  =================

At inference a routing whose competing set spans the batch (``bl_choice``,
``be_choice``, ``expert_race``) compares each score with a threshold of its
group estimated during training (an exponential moving average of the
batch's K-th largest score: one for the race, one per expert for BL, one per
position for BE), so a token's experts never depend on the rest of its
batch. The other three compete within one sample and route the same way in
training and inference.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ops import kth_largest, moe_dispatch

__all__ = ["ExpertRaceMoE", "balance_loss", "race_threshold", "router_similarity_loss", "routing_statistics"]

ROUTINGS = ("expert_race", "token_choice", "expert_choice", "bl_choice", "be_choice", "le_choice")
# The routings whose competing set spans the batch: they keep an inference threshold per group.
THRESHOLDED = ("expert_race", "bl_choice", "be_choice")
GATINGS = ("identity", "softmax", "sigmoid")
INFERENCE = ("threshold", "batch_topk")


def _all_scores(flat):
    """The scores of every rank's batch under ``torch.distributed`` (ranks may hold batches of other sizes)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flat
    world = torch.distributed.get_world_size()
    if world == 1:
        return flat
    size = torch.tensor([flat.numel()], device=flat.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    torch.distributed.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.full((longest,), float("-inf"), dtype=flat.dtype, device=flat.device)
    padded[:flat.numel()] = flat
    gathered = [torch.empty_like(padded) for _ in range(world)]
    torch.distributed.all_gather(gathered, padded)
    return torch.cat([g[:int(s.item())] for g, s in zip(gathered, sizes)])


def race_threshold(scores, top_k, *, global_batch=False):
    """The K-th largest of ``scores`` with ``K = round(top_k * n_tokens)``, clipped to [1, all pairs].

    Parameters
    ----------
    scores : torch.Tensor of shape (..., n_experts)
        Gate values of every token of the batch.
    top_k : float
        Experts per token on average.
    global_batch : bool, default=False
        Under ``torch.distributed``, take K over the scores of every rank
        (``K = top_k * all tokens``), as data-parallel Expert Race does.

    Returns
    -------
    torch.Tensor
        A 0-d tensor; the pairs whose score is at least this value are kept.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn.moe import race_threshold
    >>> race_threshold(torch.tensor([[0.1, 0.9], [0.5, 0.3]]), 1.0)
    tensor(0.5000)
    """
    flat = scores.detach().reshape(-1)
    if global_batch:
        flat = _all_scores(flat)
    n_tokens = flat.numel() // scores.shape[-1]
    keep = min(max(int(round(top_k * n_tokens)), 1), flat.numel())
    return kth_largest(flat, keep)


def router_similarity_loss(logits, mask):
    """The router-similarity loss: load balance over single experts *and* over pairs that fire together.

    ``P = softmax(logits)`` per token and ``M`` the selection mask give the
    soft co-assignment ``P^T P`` and the hard co-selection counts ``M^T M``;
    the loss is ``(1/N) sum_ij W_ij (P^T P)_ij`` with constant weights
    ``W_ii = E (M^T M)_ii / trace`` and ``W_ij = (E^2 - E) (M^T M)_ij / sum
    off the diagonal``. Its diagonal is the Switch balance loss; the rest
    penalises experts that always co-fire (a balanced layer that behaves
    like fewer experts). With uniform probabilities it is 1 for any mask
    with co-selected pairs (``1 / E`` for one without).

    Parameters
    ----------
    logits : torch.Tensor of shape (..., n_experts)
        The router's logits (gradients flow to them).
    mask : torch.Tensor of shape (..., n_experts), bool
        The selected pairs (no gradient).

    Returns
    -------
    torch.Tensor
        A 0-d float32 (or float64) tensor, at least 0.

    Examples
    --------
    >>> import torch
    >>> from skicml.nn.moe import router_similarity_loss
    >>> mask = torch.tensor([[True, True, False], [False, True, True]])
    >>> round(float(router_similarity_loss(torch.zeros(2, 3), mask)), 6)
    1.0
    """
    n_experts = logits.shape[-1]
    logits = logits.reshape(-1, n_experts)
    probabilities = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    selected = mask.reshape(-1, n_experts).to(probabilities.dtype)
    soft = probabilities.t() @ probabilities
    with torch.no_grad():
        hard = selected.t() @ selected
        diagonal = torch.diagonal(hard)
        off_diagonal = hard - torch.diag(diagonal)
        weights = torch.zeros_like(hard)
        if diagonal.sum() > 0:
            weights += torch.diag(n_experts * diagonal / diagonal.sum())
        if off_diagonal.sum() > 0:
            weights += (n_experts * n_experts - n_experts) * off_diagonal / off_diagonal.sum()
    return (weights * soft).sum() / max(len(logits), 1)


def balance_loss(logits, mask):
    """Switch-style load balance, ``E * sum_e f_e * mean_e(P)``: 1 at uniform probabilities and load.

    ``f_e`` is expert ``e``'s share of the selected pairs and ``P`` the
    softmax of the logits; used by the token-choice baseline.

    Parameters
    ----------
    logits : torch.Tensor of shape (..., n_experts)
    mask : torch.Tensor of shape (..., n_experts), bool

    Returns
    -------
    torch.Tensor
        A 0-d tensor (0 when nothing is selected).
    """
    n_experts = logits.shape[-1]
    logits = logits.reshape(-1, n_experts)
    probabilities = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    load = mask.reshape(-1, n_experts).sum(dim=0).to(probabilities.dtype)
    if load.sum() == 0:
        return probabilities.sum() * 0.0
    return n_experts * (load / load.sum() * probabilities.mean(dim=0)).sum()


def routing_statistics(mask, mass=0.95):
    """Load diagnostics of a selection mask: load, MaxVio, experts per token, combination usage.

    Parameters
    ----------
    mask : torch.Tensor or ndarray of shape (..., n_experts), bool
    mass : float, default=0.95
        Cumulative share of the co-activations that combination usage covers.

    Returns
    -------
    dict
        ``load`` (tokens per expert, an int64 tensor), ``max_violation``
        (largest load over the mean load, minus one: 0 when balanced),
        ``experts_per_token_mean`` and ``_std``, and ``combination_usage``:
        the co-activation counts of every unordered pair of experts sorted
        from the most frequent, the share (in %) of all ``E (E - 1) / 2``
        pairs needed for their cumulative share to reach ``mass`` (the pair
        that crosses it counted); higher is more diverse, NaN when no pair
        co-fires.

    Examples
    --------
    The collapsed 2-in-4 layer of the paper's Figure 4: experts 0 and 1
    always fire together, and so do 2 and 3; the load is balanced, but only
    two of the six pairs are ever used.

    >>> import torch
    >>> from skicml.nn.moe import routing_statistics
    >>> mask = torch.tensor([[1, 1, 0, 0], [0, 0, 1, 1]] * 4, dtype=torch.bool)
    >>> stats = routing_statistics(mask)
    >>> stats["max_violation"], round(stats["combination_usage"], 1)
    (0.0, 33.3)
    """
    mask = torch.as_tensor(mask).reshape(-1, torch.as_tensor(mask).shape[-1]).to(torch.bool)
    n_experts = mask.shape[1]
    load = mask.sum(dim=0)
    mean_load = load.double().mean()
    per_token = mask.sum(dim=1).double()
    selected = mask.double()
    pairs = torch.triu(selected.t() @ selected, diagonal=1)[torch.triu_indices(n_experts, n_experts, 1).unbind()]
    usage = float("nan")
    if pairs.sum() > 0:
        shares = torch.sort(pairs, descending=True).values / pairs.sum()
        needed = int(torch.searchsorted(torch.cumsum(shares, 0), torch.tensor(mass - 1e-12, dtype=shares.dtype))) + 1
        usage = 100.0 * needed / len(pairs)
    return {
        "load": load,
        "max_violation": float(load.double().max() / mean_load - 1) if mean_load > 0 else float("nan"),
        "experts_per_token_mean": float(per_token.mean()) if len(per_token) else float("nan"),
        "experts_per_token_std": float(per_token.std(unbiased=False)) if len(per_token) else float("nan"),
        "combination_usage": usage,
    }


class ExpertRaceMoE(nn.Module):
    """A mixture-of-experts MLP with Expert Race routing (or the five routings it is compared with).

    ``forward(x)`` takes tokens ``(B, L, dim)`` and returns ``(y, aux)``:
    ``y[b, l] = sum_e mask * gate * FFN_e(x[b, l])``, the gates unnormalised
    (identity gating, the paper's choice, lets them be negative), and a
    token that wins no expert gets zeros (the block's residual carries it).

    Parameters
    ----------
    dim : int
        Token width.
    n_experts : int, default=8
    top_k : float, default=2.0
        Experts per token: exact for ``"token_choice"`` (a whole number
        there), on average over the batch for ``"expert_race"``,
        ``"bl_choice"`` and ``"be_choice"``, over the sample for
        ``"le_choice"``, and ``floor(top_k * L / n_experts)`` tokens per
        expert and sample for ``"expert_choice"`` (see the module's table).
    expert_hidden : int or None, default=None
        Hidden width of each expert; ``None`` is ``4 * dim / top_k``, so the
        active FLOPs equal one dense ``4 * dim`` MLP.
    routing : {"expert_race", "token_choice", "expert_choice", "bl_choice", "be_choice", "le_choice"}, \
            default="expert_race"
        Which (token, expert) pairs compete for the budget (the module's
        table, the paper's Table 6). Under ``torch.distributed`` the race
        competes over the global batch; BL and BE compete within each
        rank's batch.
    gating : {"identity", "softmax", "sigmoid"}, default="identity"
        How router logits become gates (softmax over the experts).
    router_hidden : bool, default=True
        Route from ``GELU(Linear(dim, dim)(x))``, the paper's two-layer
        router, rather than from ``x`` itself.
    threshold_momentum : float, default=0.99
        Momentum of the moving average of the batch threshold (the first
        training batch sets it, so it has no warm-up bias).
    inference : {"threshold", "batch_topk"}, default="threshold"
        The routings that compete across the batch (``expert_race``,
        ``bl_choice``, ``be_choice``) in eval mode: compare scores with the
        learned thresholds (each token independent of its batch), or take
        the batch's top K again (a debugging option: outputs then depend on
        the batch).
    target_dim : int or None, default=None
        Width of the per-layer-regularization head: a linear map of the
        router's hidden state that predicts the diffusion target of each
        token (``aux["plr_pred"]``), trained only through the loss the
        caller adds.

    Attributes
    ----------
    tau_ : torch.Tensor
        The learned inference thresholds (a buffer, NaN before training): a
        0-d tensor for the race, one per expert ``(n_experts,)`` for BL, one
        per position ``(L,)`` for BE (empty until the first training batch
        shows ``L``), and an unused NaN for the per-sample routings.
    expert_load_ : torch.Tensor of shape (n_experts,)
        Tokens each expert took over all training steps (a buffer).

    Examples
    --------
    >>> import torch
    >>> from skicml.nn import ExpertRaceMoE
    >>> _ = torch.manual_seed(0)
    >>> moe = ExpertRaceMoE(16, n_experts=4, top_k=2)
    >>> y, aux = moe(torch.randn(3, 5, 16))
    >>> tuple(y.shape), int(aux["mask"].sum())
    ((3, 5, 16), 30)
    >>> y_eval, aux_eval = moe.eval()(torch.randn(1, 5, 16))   # the learned threshold decides
    >>> bool(torch.isfinite(moe.tau_))
    True
    """

    def __init__(self, dim, n_experts=8, top_k=2.0, expert_hidden=None, routing="expert_race", gating="identity",
                 router_hidden=True, threshold_momentum=0.99, inference="threshold", target_dim=None):
        super().__init__()
        if routing not in ROUTINGS:
            raise ValueError(f"routing={routing!r}; expected one of {ROUTINGS}.")
        if gating not in GATINGS:
            raise ValueError(f"gating={gating!r}; expected one of {GATINGS}.")
        if inference not in INFERENCE:
            raise ValueError(f"inference={inference!r}; expected one of {INFERENCE}.")
        if int(n_experts) != n_experts or n_experts < 1:
            raise ValueError(f"n_experts={n_experts!r}; expected a whole number >= 1.")
        if not 0 < top_k <= n_experts:
            raise ValueError(f"top_k={top_k!r}; expected 0 < top_k <= n_experts={n_experts}.")
        if routing == "token_choice" and int(top_k) != top_k:
            raise ValueError(f"top_k={top_k!r}: token choice gives every token a whole number of experts.")
        if not 0.0 <= threshold_momentum < 1.0:
            raise ValueError(f"threshold_momentum={threshold_momentum!r}; expected a value in [0, 1).")
        self.dim, self.n_experts, self.top_k = int(dim), int(n_experts), float(top_k)
        self.routing, self.gating, self.inference = routing, gating, inference
        self.threshold_momentum = float(threshold_momentum)
        hidden = int(expert_hidden) if expert_hidden is not None else max(1, int(round(4 * dim / top_k)))
        self.expert_hidden = hidden

        self.router = nn.Sequential(nn.Linear(dim, dim), nn.GELU(approximate="tanh")) if router_hidden else nn.Identity()
        self.gate = nn.Linear(dim, n_experts)
        self.target_head = nn.Linear(dim, target_dim) if target_dim else None
        self.w1 = nn.Parameter(torch.empty(n_experts, dim, hidden))
        self.b1 = nn.Parameter(torch.zeros(n_experts, hidden))
        self.w2 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.b2 = nn.Parameter(torch.zeros(n_experts, dim))
        # Xavier-uniform per expert, as DiT initialises its MLPs.
        for weight, (fan_in, fan_out) in ((self.w1, (dim, hidden)), (self.w2, (hidden, dim))):
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            nn.init.uniform_(weight, -bound, bound)
        self.register_buffer("tau_", self._empty_thresholds())
        self.register_buffer("expert_load_", torch.zeros(n_experts, dtype=torch.int64))

    def _empty_thresholds(self):
        if self.routing == "bl_choice":
            return torch.full((self.n_experts,), float("nan"))
        if self.routing == "be_choice":
            return torch.empty(0)
        return torch.tensor(float("nan"))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # BE learns one threshold per position, so its buffer takes the length of the saved one.
        saved = state_dict.get(prefix + "tau_")
        if self.routing == "be_choice" and saved is not None and saved.shape != self.tau_.shape:
            self.tau_ = torch.empty_like(saved, device=self.tau_.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def extra_repr(self):
        return (f"dim={self.dim}, n_experts={self.n_experts}, top_k={self.top_k:g}, "
                f"expert_hidden={self.expert_hidden}, routing={self.routing!r}, gating={self.gating!r}")

    def _gates(self, logits):
        if self.gating == "softmax":
            return torch.softmax(logits, dim=-1)
        if self.gating == "sigmoid":
            return torch.sigmoid(logits)
        return logits

    def _batch_thresholds(self, scores):
        """The K-th largest score of each group whose competing set spans the batch (see the module's table)."""
        batch, length, n_experts = scores.shape
        if self.routing == "expert_race":
            return race_threshold(scores, self.top_k, global_batch=self.training)
        if self.routing == "bl_choice":
            competing = scores.reshape(batch * length, n_experts).t()
            keep = self.top_k * batch * length / n_experts
        else:  # be_choice
            competing = scores.transpose(0, 1).reshape(length, batch * n_experts)
            keep = self.top_k * batch
        keep = min(max(int(round(keep)), 1), competing.shape[1])
        return competing.topk(keep, dim=1).values[:, -1]

    def _broadcast(self, tau):
        if self.routing == "bl_choice":
            return tau.view(1, 1, -1)
        if self.routing == "be_choice":
            return tau.view(1, -1, 1)
        return tau

    def _route(self, gates):
        """The selection mask ``(B, L, E)`` and the thresholds used (None for the per-sample routings)."""
        batch, length, n_experts = gates.shape
        scores = gates.detach()
        if self.routing == "token_choice":
            chosen = scores.topk(int(self.top_k), dim=-1).indices
            return torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, chosen, True), None
        if self.routing == "expert_choice":
            capacity = int(math.floor(self.top_k * length / n_experts))
            if capacity < 1:
                raise ValueError(
                    f"expert_choice with top_k={self.top_k:g}, {n_experts} experts and {length} tokens per sample "
                    "gives each expert floor(top_k * L / E) = 0 tokens; use longer sequences or fewer experts.")
            chosen = scores.topk(capacity, dim=1).indices
            return torch.zeros_like(scores, dtype=torch.bool).scatter_(1, chosen, True), None
        if self.routing == "le_choice":
            pairs = scores.reshape(batch, length * n_experts)
            keep = min(max(int(round(self.top_k * length)), 1), pairs.shape[1])
            chosen = pairs.topk(keep, dim=1).indices
            return torch.zeros_like(pairs, dtype=torch.bool).scatter_(1, chosen, True).reshape(scores.shape), None
        if self.routing == "be_choice" and self.tau_.numel() and self.tau_.numel() != length:
            raise ValueError(
                f"be_choice learned one threshold per position for sequences of {self.tau_.numel()} tokens; "
                f"got {length}.")
        if self.training or self.inference == "batch_topk":
            tau = self._batch_thresholds(scores)
            if self.training:
                with torch.no_grad():
                    if self.tau_.shape != tau.shape:
                        self.tau_ = tau.clone()
                    elif torch.isnan(self.tau_).any():
                        self.tau_.copy_(tau)
                    else:
                        self.tau_.mul_(self.threshold_momentum).add_((1 - self.threshold_momentum) * tau)
        else:
            if not self.tau_.numel() or torch.isnan(self.tau_).any():
                raise RuntimeError(
                    f"ExpertRaceMoE ({self.routing}) has no inference threshold yet: run it in training mode first, "
                    "or set inference='batch_topk'.")
            tau = self.tau_.to(scores.dtype)
        return scores >= self._broadcast(tau), tau

    def forward(self, x):
        """Route and run the experts.

        Parameters
        ----------
        x : torch.Tensor of shape (B, L, dim)

        Returns
        -------
        y : torch.Tensor of shape (B, L, dim)
        aux : dict
            ``sim_loss`` (:func:`router_similarity_loss`), ``balance_loss``
            (:func:`balance_loss`), ``plr_pred`` (``(B, L, target_dim)`` or
            None), ``mask`` (``(B, L, n_experts)`` bool), ``tau`` (the
            thresholds used, or None) and ``logits``.
        """
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"ExpertRaceMoE expects tokens (B, L, {self.dim}), got shape {tuple(x.shape)}.")
        batch, length, dim = x.shape
        hidden = self.router(x)
        logits = self.gate(hidden)
        gates = self._gates(logits)
        mask, tau = self._route(gates)
        if self.training:
            with torch.no_grad():
                self.expert_load_ += mask.sum(dim=(0, 1))
        y = moe_dispatch(x.reshape(-1, dim), mask.reshape(-1, self.n_experts), gates.reshape(-1, self.n_experts),
                         self.w1, self.b1, self.w2, self.b2).reshape(batch, length, dim)
        aux = {
            "sim_loss": router_similarity_loss(logits, mask),
            "balance_loss": balance_loss(logits, mask),
            "plr_pred": self.target_head(hidden) if self.target_head is not None else None,
            "mask": mask,
            "tau": tau,
            "logits": logits,
        }
        return y, aux
