"""TabICLv2's random-DAG structural causal models ("graph_scm"), batched over a group of tables.

The third engine of :class:`skicml.tabicl.prior.TabularPrior`, beside the
MLP-SCM and the tree-SCM (``PriorConfig.graph_scm_prob`` picks it per group).
It follows ``tabicl==2.2.0``'s ``prior/graph_lib`` (read for facts; the code
is ours) and, like the rest of the prior, draws the *structure* once per group
of tables and everything continuous per table, so that one group is one
batched computation.

Generation of one group of ``g`` tables with ``T`` rows
--------------------------------------------------------
1. **Columns.** A share ``clip(U(-0.5, 1.2), 0, 1)`` of the ``n_features``
   columns is categorical, with 2 to 9 categories (a table-wide limit, then
   per column, some columns drawn independently and some through the shared
   meta-distribution). The target is one numerical column (regression) or one
   categorical column of ``K`` classes (classification).
2. **Graph.** ``n_nodes`` is log-uniform in ``[min_nodes, max_nodes]``; a
   random DAG over them in index order connects ``i -> j`` (``i < j``) with
   probability ``sigmoid(c + a_j + b_i)``, ``c``, ``a``, ``b`` standard
   Cauchy, so graphs range from empty to complete and hubs appear. Feature
   columns go to random nodes of a random subset of the nodes, and so does the
   target, independently; nodes that no column depends on are not computed.
3. **Nodes.** Each node holds a matrix ``(T, d)``, ``d`` = 1-31 latent units
   plus the units its columns read. A root node is random points (uniform
   cube, ball, Gaussian, or Gaussian / uniform through a random covariance)
   passed through a random function; another node applies a random
   *multi-function* to its parents: one random function of their
   concatenation, or one per parent combined by sum, product, max or
   log-sum-exp. The result is standardised, its units reweighted by random
   importance weights, scaled to unit mean row norm, its columns extracted
   (below), and the node scaled by a random importance in ``[0.1, 10]``.
4. **Random functions** (one of eight, uniformly): an MLP (1-3 linear maps,
   width 1-127, random activations, optionally also first and last); an
   ensemble of 1-128 oblivious trees of depth 1-7 (split units drawn in
   proportion to their spread, thresholds at the values of random rows,
   Gaussian leaves, averaged); a nearest-centre discretisation (2-255 random
   rows as centres, an ``L_p`` distance, a random linear map of the centres);
   a linear map; a quadratic form (of up to 20 units); a random-Fourier
   Gaussian-process sample (256 frequencies, a heavy-tailed spectrum, either
   an axis-aligned product kernel or a random input transform); a soft
   cluster assignment (an EM-like softmax over random centres, then linear);
   or the product of two cheaper functions. Linear maps use random matrices
   of five kinds (Gaussian, rows of random weights, random singular values,
   a Laplace kernel between random Gaussian-mixture points, an activation of
   another random matrix), rows normalised. Activations standardise, shift by
   a random row and scale by ``[1, 10]``, apply one of 27 torch functions
   (tanh ... rank, softmax, argsort, ...) or a random power, and standardise.
5. **Columns from nodes.** A numerical column reads one unit (with an optional
   Kumaraswamy warping applied to what the node propagates, not to the column:
   the behaviour TabICLv2 was trained with). A categorical column reads ``k``
   units and returns the index of its nearest of ``K`` random centres or a
   draw from a softmax over the units; what the node propagates is then the
   units unchanged, the centre, a random function of the centre, or the index.

Scalar hyper-parameters follow the official "meta" sampling: each named
parameter has a Beta distribution of random location and concentration drawn
once per group, so that the many draws of one name within a group are
correlated.

Deviations from the official per-table generator (all deliberate)
-------------------------------------------------------------------
* Structure is shared by the group's tables: the graph, the column placement,
  node widths, function kinds and their discrete sizes (MLP width, tree count
  and depth, number of centres, matrix kinds, activation kinds), converter
  modes, category counts and the scalar hyper-parameters. Everything drawn as
  a tensor (points, matrices, weights, thresholds, centres, leaves, noise) is
  per table. The official code draws all of it per table; the official
  classification ``K`` is per table, here per group for this engine.
* Categorical choices are uniform. The official "meta" categorical sampler
  stores its random weights under a different key than it looks them up (its
  ``use_corrected_cat_meta_sampling=False`` default), so every draw gets fresh
  weights and the choices are uniform in distribution: what v2 trained on.
* ``exp`` activations clamp their input at ``exp_clamp``; a table that still
  overflows anywhere (any non-finite node value, not only a NaN in the output
  as officially) is reported as not finite and regenerated by the caller.
* The categorical sampler of a softmax converter uses the table's device
  generator (inverse CDF) rather than ``torch.multinomial``'s global one.
* No ExtraTrees predictability filter (off by default officially too).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ["ACTIVATIONS", "FUNCTION_TYPES", "GraphSCM", "TensorRandom"]

#: The random functions of a node, drawn uniformly.
FUNCTION_TYPES = ("mlp", "tree", "discretization", "linear", "quadratic", "gp", "em", "product")
#: The cheaper ones, for products and a categorical centre's follow-up function.
CHEAP_FUNCTION_TYPES = ("gp", "tree", "discretization", "linear", "quadratic")
MATRIX_TYPES = ("gaussian", "weights", "singular_values", "kernel", "activation")
#: The torch activations of v2's pool (the last four act across a node's units).
ACTIVATIONS = (
    "tanh", "leaky_relu", "elu", "identity", "selu", "silu", "relu", "softplus", "relu6", "hardtanh", "sign",
    "heaviside", "gauss", "exp", "unit_indicator", "sin", "square", "abs", "log_abs", "sigmoid", "round", "modulo",
    "logsigmoid", "rank", "softmax", "is_max", "argsort",
)
CATEGORICAL_MODES = ("neighbor_id", "neighbor_disc", "neighbor_func", "neighbor_int",
                     "softmax_id", "softmax_disc", "softmax_int")


#: Every named activation of both priors, elementwise or across the last axis;
#: ``exp`` clamps its input (see :func:`apply_activation`).
_ACTIVATION_FUNCTIONS = {
    "tanh": torch.tanh,
    "leaky_relu": F.leaky_relu,
    "elu": F.elu,
    "identity": lambda x: x,
    "selu": F.selu,
    "silu": F.silu,
    "relu": F.relu,
    "softplus": F.softplus,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "sign": lambda x: 2.0 * (x >= 0).float() - 1.0,
    "heaviside": lambda x: (x >= 0).float(),
    "gauss": lambda x: torch.exp(-x.square()),
    "sqrt_abs": lambda x: x.abs().sqrt(),
    "unit_indicator": lambda x: (x.abs() <= 1.0).float(),
    "sin": torch.sin,
    "square": lambda x: x.square(),
    "abs": lambda x: x.abs(),
    "log_abs": lambda x: torch.log(x.abs().clamp_min(1e-6)),
    "sigmoid": torch.sigmoid,
    "round": torch.round,
    "modulo": lambda x: x - torch.floor(x),
    "logsigmoid": F.logsigmoid,
    "rank": lambda x: torch.argsort(torch.argsort(x, dim=-1), dim=-1).float(),
    "softmax": lambda x: torch.softmax(x, -1),
    "is_max": lambda x: (x == x.amax(-1, keepdim=True)).float(),
    "argsort": lambda x: torch.argsort(x, dim=-1).float(),
}


def apply_activation(name, x, exp_clamp):
    """The activation ``name`` of either prior on ``x``; ``exp`` clamps its input at ``exp_clamp``."""
    if name == "exp":
        return torch.exp(x.clamp_max(exp_clamp))
    return _ACTIVATION_FUNCTIONS[name](x)


class TensorRandom:
    """Tensor draws from one ``torch.Generator`` (the prior's device stream).

    Parameters
    ----------
    generator : torch.Generator
    device : torch.device
    """

    def __init__(self, generator, device):
        self.generator = generator
        self.device = torch.device(device)

    def rand(self, *shape):
        return torch.rand(shape, generator=self.generator, device=self.device)

    def randn(self, *shape):
        return torch.randn(shape, generator=self.generator, device=self.device)

    def randint(self, high, *shape):
        """Integers in ``[0, high)``; ``high`` may be a tensor broadcasting against ``shape``."""
        if isinstance(high, int):
            return torch.randint(0, high, shape, generator=self.generator, device=self.device)
        return (self.rand(*shape) * high).long().clamp_max(high - 1)

    def categorical(self, probs, n):
        """``n`` indices per row of ``probs`` ``(..., K)`` (unnormalised), by inverse CDF."""
        cdf = probs.cumsum(-1)
        u = self.rand(*probs.shape[:-1], n) * cdf[..., -1:]
        return torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True).clamp_max(probs.shape[-1] - 1)

    def rows(self, g, T, n):
        """``n`` distinct row indices in ``[0, T)`` per table, ``(g, n)``."""
        return torch.argsort(self.rand(g, T), dim=1)[:, :n]

    def gamma(self, shape, rounds=4):
        """Gamma(``shape``, 1) draws, one per element of the float64 tensor ``shape``.

        Marsaglia-Tsang with ``rounds`` proposals drawn at once (each is
        accepted with probability above 95%; an element whose proposals all
        fail, about 1e-6 of them, takes the distribution's mode). Shapes
        below 1 are boosted: ``Gamma(a) = Gamma(a + 1) * U^(1/a)``.
        """
        boost = shape < 1.0
        a = torch.where(boost, shape + 1.0, shape)
        d = a - 1.0 / 3.0
        c = torch.rsqrt(9.0 * d)
        x = self.randn(rounds, *shape.shape).double()
        log_u = torch.log(self.rand(rounds + 1, *shape.shape).double().clamp_min(1e-300))
        v = (1.0 + c * x) ** 3
        ok = (v > 0) & (log_u[:-1] < 0.5 * x * x + d - d * v + d * torch.log(v.clamp_min(1e-300)))
        first = ok.double().argmax(0, keepdim=True)  # first accepted proposal (0 if none)
        out = torch.where(ok.any(0), (d * v).gather(0, first).squeeze(0), d)
        return torch.where(boost, out * torch.exp(log_u[-1] / shape), out)


class _Draws:
    """Scalar hyper-parameters of one group: v2's ``GlobalSampler`` in "meta" mode.

    A named parameter gets a Beta distribution (location ``U(0, 1)``,
    concentration log-uniform in ``[0.1, 1e4]``) on its first use; all its
    draws in the group come from it.
    """

    def __init__(self, host, rng):
        self.host = host
        self.rng = rng
        self.meta = {}

    def _beta_parameters(self, name):
        if name not in self.meta:
            loc = min(max(self.host.u(), 1e-6), 1.0 - 1e-6)
            total = self.host.log_uniform(0.1, 1e4)
            self.meta[name] = (loc * total, (1.0 - loc) * total)
        return self.meta[name]

    def _unit(self, name):
        a, b = self._beta_parameters(name)
        x, y = self.host.gamma(a), self.host.gamma(b)
        if x + y <= 0.0:  # both underflowed: the limit of a tiny concentration is Bernoulli(loc)
            return float(self.host.u() < a / (a + b))
        return x / (x + y)

    @staticmethod
    def _scale(v, low, high, log, boundary):
        if boundary:  # v2's "boundary mass": a little probability on both ends
            v = min(max(1.2 * v - 0.1, 0.0), 1.0)
        if log:
            return math.exp(math.log(low) + (math.log(high) - math.log(low)) * v)
        return low + (high - low) * v

    def numerical(self, name, low, high, log=False, boundary=False, local=False):
        v = self.host.u() if local else self._unit(name)
        return self._scale(v, low, high, log, boundary)

    def integer(self, name, low, high, log=False, boundary=False, local=False):
        """v2's ``randint``: the floor of a numerical draw in ``[low, high]``, kept in ``[low, high - 1]``."""
        value = math.floor(self.numerical(name, low, high, log, boundary, local))
        return int(min(max(value, low), high - 1))

    def choice(self, options):
        return options[self.host.randint(0, len(options) - 1)]

    def boolean(self):
        return self.host.u() < 0.5

    #: Size of a parameter's bank of Beta draws (per group).
    bank_size = 1024

    def _bank(self, name):
        """``bank_size`` draws of the parameter's meta-Beta, drawn on first use."""
        key = ("bank", name)
        if key not in self.meta:
            a, b = self._beta_parameters(name)
            shape = torch.tensor([a, b], dtype=torch.float64, device=self.rng.device)
            draws = self.rng.gamma(shape.view(2, 1).expand(2, self.bank_size))
            total = draws.sum(0)
            fallback = (self.rng.rand(self.bank_size) < a / (a + b)).double()
            self.meta[key] = torch.where(total > 0, draws[0] / total.clamp_min(1e-300), fallback).float()
        return self.meta[key]

    def numerical_tensors(self, specs, size):
        """Per-element draws from the meta-Betas of several parameters.

        ``specs`` lists ``(name, low, high, log, boundary)``; returns one
        float32 tensor of ``size`` per spec. Elements are drawn with
        replacement from the parameter's bank of Beta draws (mapped to the
        range once): a vectorised gamma sampler per call cost more than the
        rest of a node.
        """
        banks = []
        for spec in specs:
            if spec not in self.meta:
                name, low, high, log, boundary = spec
                v = self._bank(name)
                if boundary:
                    v = (1.2 * v - 0.1).clamp(0.0, 1.0)
                if log:
                    v = torch.exp(math.log(low) + (math.log(high) - math.log(low)) * v)
                else:
                    v = low + (high - low) * v
                self.meta[spec] = v
            banks.append(self.meta[spec])
        picks = torch.stack(banks).gather(1, self.rng.randint(self.bank_size, len(specs), math.prod(size)))
        return [row.view(size) for row in picks]


def _standardize(x):
    """Per table and unit, over rows (population std, v2's ``Standardize``)."""
    mean = x.mean(1, keepdim=True)
    centred = x - mean
    return centred / (centred.square().mean(1, keepdim=True).sqrt() + 1e-4)


def _row_normalize(m):
    return m / (1e-6 + m.norm(dim=-1, keepdim=True))


def _distance(x, centres, p):
    """``L_p`` distances ``(g, n, c)`` of rows to centres, ``p`` snapped to 1 or 2 (the nearer in log scale).

    ``torch.cdist`` has fast kernels for ``p`` = 1 and 2 only; any other ``p``
    costs 20-30 ns per row, centre and unit on one CPU thread, which made
    the nearest-centre functions most of the engine's time.
    """
    return torch.cdist(x, centres, p=1.0 if p < math.sqrt(2.0) else 2.0)


def _nearest(x, centres, p):
    return _distance(x, centres, p).argmin(-1)


def _gather_rows(x, rows):
    """``x`` ``(g, T, d)`` at row indices ``(g, n)`` -> ``(g, n, d)``."""
    return x.gather(1, rows.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


class GraphSCM:
    """Batched sampler of TabICLv2's random-DAG SCM tables.

    Parameters
    ----------
    host : object
        Scalar random source of the prior (``u``, ``uniform``, ``log_uniform``,
        ``randint`` inclusive, ``gamma``): structure and hyper-parameters.
    rng : TensorRandom
        Tensor random source: everything drawn per table.
    min_nodes, max_nodes : int, default=2, 32
        Range of the log-uniform node count (v2's defaults).
    max_category_size : int, default=9
        Largest category count of a categorical feature (v2 as trained).
    max_centres : int, default=256
        Cap of the discretisation function's centre count.
    exp_clamp : float, default=20.0
        Upper clamp of the input of the ``exp`` activation.

    Examples
    --------
    The prior uses it for a share ``graph_scm_prob`` of its groups:

    >>> from skicml.tabicl.prior import PriorConfig, TabularPrior
    >>> prior = TabularPrior(PriorConfig(task="regression", graph_scm_prob=1.0, max_features=5), seed=0)
    >>> batch = prior.sample(4, n_rows=64)
    >>> batch["X"].shape, batch["y"].dtype
    (torch.Size([4, 64, 5]), torch.float32)
    """

    def __init__(self, host, rng, *, min_nodes=2, max_nodes=32, max_category_size=9, max_centres=256,
                 exp_clamp=20.0):
        if not 1 <= min_nodes <= max_nodes:
            raise ValueError(f"need 1 <= min_nodes <= max_nodes, got {min_nodes} and {max_nodes}")
        if max_category_size < 2:
            raise ValueError(f"max_category_size must be at least 2, got {max_category_size}")
        self.host = host
        self.rng = rng
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.max_category_size = max_category_size
        self.max_centres = max_centres
        self.exp_clamp = exp_clamp

    # ------------------------------------------------------------------ public
    def sample(self, g, T, n_features, n_classes=0):
        """One group of tables.

        Parameters
        ----------
        g, T, n_features : int
            Tables, rows, feature columns.
        n_classes : int, default=0
            0 for a numerical target, else the class count of a categorical one.

        Returns
        -------
        X : Tensor ``(g, T, n_features)`` float32
            Numerical columns, then categorical ones (category codes as floats).
        y : Tensor ``(g, T)`` float32
            The target value, or its class code.
        finite : Tensor ``(g,)`` bool
            Whether every computed node value of the table stayed finite.
        """
        self._draws = _Draws(self.host, self.rng)
        self._g, self._T = g, T
        self._finite = torch.ones(g, dtype=torch.bool, device=self.rng.device)

        columns = [("x", i, size) for i, size in enumerate(self._categorical_sizes(n_features))]
        columns.append(("y", 0, n_classes))
        n_nodes = self._draws.integer("n_nodes", self.min_nodes, self.max_nodes + 1, log=True)
        parents = self._cauchy_dag(n_nodes)
        placed = [[] for _ in range(n_nodes)]
        for group in ("x", "y"):
            members = [c for c in columns if c[0] == group]
            n_hosts = self._draws.integer("n_feature_nodes", 1, n_nodes + 1)
            hosts = self._permutation(n_nodes)[:n_hosts]
            for column in members:
                placed[hosts[self.host.randint(0, n_hosts - 1)]].append(column)

        needed = [bool(placed[i]) for i in range(n_nodes)]
        for node in reversed(range(n_nodes)):
            if needed[node]:
                for p in parents[node]:
                    needed[p] = True
        values, out = [None] * n_nodes, {}
        for node in range(n_nodes):
            if needed[node]:
                values[node], extracted = self._node([values[p] for p in parents[node]], placed[node])
                out.update(extracted)
        X = torch.stack([out[("x", i)].float() for i in range(n_features)], dim=-1)
        return X, out[("y", 0)].float(), self._finite

    # ------------------------------------------------------------- structure
    def _permutation(self, n):
        keys = [self.host.u() for _ in range(n)]
        return sorted(range(n), key=keys.__getitem__)

    def _cauchy(self):
        return math.tan(math.pi * (self.host.u() - 0.5))

    def _cauchy_dag(self, n_nodes):
        """Parent lists of a random DAG in index order (v2's Cauchy DAG)."""
        offset = self._cauchy()
        into = [self._cauchy() for _ in range(n_nodes)]
        out_of = [self._cauchy() for _ in range(n_nodes)]
        parents = []
        for j in range(n_nodes):
            chosen = []
            for i in range(j):
                logit = offset + into[j] + out_of[i]
                p = 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0
                if self.host.u() <= p:
                    chosen.append(i)
            parents.append(chosen)
        return parents

    def _categorical_sizes(self, n_features):
        """Category counts of the feature columns (0: numerical), numerical first."""
        d = self._draws
        n_cat = round(n_features * min(max(self.host.uniform(-0.5, 1.2), 0.0), 1.0))
        n_local = d.integer("cat_sizes_n_local", 0, n_cat + 1, boundary=True, local=True)
        top = self.max_category_size + 1
        limit = d.integer("cat_size_limit", 2, top, log=True)
        local = [d.integer("cat_size", 2, limit + 1, log=True, local=True) for _ in range(n_local)]
        meta = [d.integer("cat_size", 2, min(top, limit + 1), log=True) for _ in range(n_cat - n_local)]
        return [0] * (n_features - n_cat) + local + meta

    # ------------------------------------------------------------------ nodes
    def _node(self, parent_values, columns):
        """One node's matrix ``(g, T, d)`` and the columns it produces."""
        d, g, T = self._draws, self._g, self._T
        converters = [self._converter(column) for column in columns]
        width = d.integer("node_n_latent_features", 1, 32, log=True) + sum(c["width"] for c in converters)
        if parent_values:
            x = self._multi_function(parent_values, width)
        else:
            x = self._points(g, T, width)
        # unit importances, then a unit mean row norm (v2's node feature importance and L2 norm)
        weights = self._weights((g,), width)
        weights = weights / weights.square().mean(-1, keepdim=True).sqrt()
        x = _standardize(x) * weights.unsqueeze(1)
        x = x / (x.square().sum(-1).mean(1).sqrt() + 1e-8).view(g, 1, 1)
        extracted, start = {}, 0
        for conv in converters:
            end = start + conv["width"]
            propagated, column = self._convert(conv, x[..., start:end])
            x[..., start:end] = propagated
            extracted[conv["key"]] = column
            start = end
        x = x * d.numerical("node_importance", 0.1, 10.0, log=True)
        self._finite &= torch.isfinite(x).flatten(1).all(1)
        return x, extracted

    def _multi_function(self, parent_values, width):
        if self._draws.choice(("concat", "aggregate")) == "concat":
            return self._function(torch.cat(parent_values, -1), width)
        op = self._draws.choice(("sum", "product", "max", "logsumexp"))
        outs = torch.stack([self._function(v, width) for v in parent_values])
        if op == "sum":
            return outs.sum(0)
        if op == "product":
            return outs.prod(0)
        if op == "max":
            return outs.amax(0)
        return torch.logsumexp(outs, 0)

    # ------------------------------------------------------------- converters
    def _converter(self, column):
        group, index, size = column
        d = self._draws
        if size == 0:
            return {"key": (group, index), "kind": "numerical", "width": 1,
                    "warp": d.choice(("id", "kumaraswamy")) == "kumaraswamy"}
        mode = d.choice(CATEGORICAL_MODES)
        if mode.startswith("softmax") or d.boolean():
            width = size
        else:
            width = d.integer("cat_n_features", 1, size, log=True, local=True) if size > 1 else 1
        return {"key": (group, index), "kind": "categorical", "mode": mode, "size": size, "width": width}

    def _convert(self, conv, x):
        """``(propagated, column)`` of one converter on its units ``x`` ``(g, T, k)``."""
        g, T, k = x.shape
        d, rng = self._draws, self.rng
        if conv["kind"] == "numerical":
            column = x[..., 0]
            if not conv["warp"]:
                return x, column
            low, high = x.amin(1, keepdim=True), x.amax(1, keepdim=True)
            a = d.numerical("kumaraswamy_a", 0.2, 5.0, log=True)
            b = d.numerical("kumaraswamy_b", 0.2, 5.0, log=True)
            u = ((x - low) / (high - low + 1e-30)).clamp(0.0, 1.0)
            return 1.0 - (1.0 - u.pow(a)).pow(b), column
        size, mode = conv["size"], conv["mode"]
        if mode.startswith("neighbor"):
            centres = _gather_rows(x, rng.rows(g, T, min(size, T)))
            p = d.numerical("cat_disc_p", 0.5, 4.0, log=True)
            index = _nearest(x, centres, p)
            discrete = _gather_rows(centres, index)
        else:
            embeddings = self._points(g, size, size)
            bias = torch.log(self._weights((g,), k) + 1e-4).unsqueeze(1)
            logits = d.numerical("softmax_disc_factor", 0.1, 10.0, log=True) * _standardize(x) + bias
            logits = torch.nan_to_num(logits, nan=0.0, posinf=0.0, neginf=0.0)
            index = rng.categorical(torch.softmax(logits, -1), 1).squeeze(-1)
            discrete = _gather_rows(embeddings, index)
        if mode.endswith("_id"):
            propagated = x
        elif mode.endswith("_disc"):
            propagated = discrete
        elif mode == "neighbor_func":
            propagated = self._function(discrete, k, cheap=True)
        else:  # "_int": the index itself, on every unit
            propagated = index.float().unsqueeze(-1).expand(g, T, k)
        return propagated, index

    # ------------------------------------------------------------------ points
    def _points(self, g, n, width):
        """Random points ``(g, n, width)`` through a random function (a root node)."""
        base = self._base_points(g, n, width, self._draws.choice(("uniform", "ball", "gaussian", "covariance")))
        return self._function(base, width)

    def _base_points(self, g, n, width, kind):
        rng = self.rng
        if kind == "uniform":
            return 2.0 * rng.rand(g, n, width) - 1.0
        if kind == "gaussian":
            return rng.randn(g, n, width)
        if kind == "ball":
            x = rng.randn(g, n, width)
            x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            return x * rng.rand(g, n, 1).pow(1.0 / width)
        matrix = rng.randn(g, width, width) * self._weights((g,), width).unsqueeze(1)
        inner = self._base_points(g, n, width, self._draws.choice(("uniform", "gaussian")))
        return inner @ matrix.transpose(1, 2)

    def _weights(self, batch, n):
        """v2's random weights: power-law decay with log-normal noise, permuted, norm ``sqrt(n)``."""
        d, rng = self._draws, self.rng
        decay, spread = d.numerical_tensors([("weights_decay", 0.1 / math.log(1 + n), 6.0, True, True),
                                             ("weights_spread", 1e-4, 10.0, True, False)], (*batch, 1))
        ranks = torch.arange(1, n + 1, device=rng.device, dtype=torch.float32).log()
        logits = -decay * ranks + spread * rng.randn(*batch, n)
        logits = logits.gather(-1, torch.argsort(rng.rand(*batch, n), dim=-1))
        w = torch.softmax(logits, -1)
        return math.sqrt(n) * w / w.norm(dim=-1, keepdim=True)

    # ---------------------------------------------------------------- matrices
    def _matrix(self, batch, n, m, simple=False):
        """Random matrices ``(batch, n, m)``, rows normalised (v2's ``RandomMatrix``)."""
        kind = self._draws.choice(MATRIX_TYPES[:-1] if simple else MATRIX_TYPES)
        rng = self.rng
        if kind == "gaussian":
            mat = rng.randn(batch, n, m)
        elif kind == "weights":
            mat = _row_normalize(self._weights((batch, n), m) * rng.randn(batch, n, m))
        elif kind == "singular_values":
            k = min(n, m)
            mat = (rng.randn(batch, n, k) * self._weights((batch,), k).unsqueeze(1)) @ rng.randn(batch, k, m)
        elif kind == "kernel":
            points = self._mixture_points(batch, n + m, 3)
            dist = torch.cdist(points[:, :n], points[:, n:])
            dist = dist * self._draws.numerical("kernel_matrix_scale", 0.1, 10.0, log=True)
            mat = torch.exp(-dist) * torch.sign(rng.randn(batch, n, m))
        else:
            mat = self._plain_activation(self._matrix(batch, n, m, simple=True).reshape(batch, n * m))
            mat = mat.view(batch, n, m) + 1e-3 * rng.randn(batch, n, m)
        return _row_normalize(mat + 1e-6 * rng.randn(batch, n, m))

    def _mixture_points(self, batch, n, dim):
        """Points of a random Gaussian mixture, ``(batch, n, dim)``."""
        rng = self.rng
        k = self._draws.integer("mixture_centres", 1, 16, log=True)
        member = rng.categorical(self._weights((batch,), k), n)  # (batch, n)
        centres = rng.randn(batch, k, dim)
        scales = rng.randn(batch, k, dim, dim) * self._weights((batch, k), dim).unsqueeze(2)
        scales = scales * torch.exp(rng.randn(batch, 1, 1, 1) + rng.randn(batch, 1, 1, 1) * rng.randn(batch, k, 1, 1))
        noise = rng.randn(batch, n, dim, 1)
        picked = scales.gather(1, member.view(batch, n, 1, 1).expand(batch, n, dim, dim))
        return _gather_rows(centres, member) + (picked @ noise).squeeze(-1)

    # -------------------------------------------------------------- activations
    def _apply(self, name, x):
        return apply_activation(name, x, self.exp_clamp)

    def _power(self, kind, x):
        d = self._draws
        if kind == "power_relu":
            return F.relu(x).pow(d.numerical("relu_power", 0.1, 10.0, log=True))
        if kind == "power":
            return torch.sign(x) * x.abs().pow(d.numerical("power", 0.1, 10.0, log=True))
        if kind == "negative_power":
            return (x.abs() + 1e-3).pow(-d.numerical("negative_power", 0.1, 10.0, log=True))
        return x.pow(d.integer("integer_power", 2, 6))

    def _plain_activation(self, x):
        """An activation without standardisation (for matrices): torch 8 : 4 random powers."""
        kinds = ("torch",) * 8 + ("power_relu", "power", "negative_power", "integer_power")
        kind = self._draws.choice(kinds)
        return self._apply(self._draws.choice(ACTIVATIONS), x) if kind == "torch" else self._power(kind, x)

    def _activation(self, x):
        """Standardise, shift by a random row and scale, activate, standardise (v2's ``RandomActivation``)."""
        d, rng = self._draws, self.rng
        g, n, k = x.shape
        x = _standardize(x)
        shift = x.gather(1, rng.randint(n, g, 1, k))
        x = d.numerical("activation_scale", 1.0, 10.0, log=True) * (x - shift)
        kind = d.choice(("torch",) * 4 + ("power_relu", "power"))
        x = self._apply(d.choice(ACTIVATIONS), x) if kind == "torch" else self._power(kind, x)
        return _standardize(x)

    # --------------------------------------------------------------- functions
    def _function(self, x, n_out, cheap=False):
        """A random function ``(g, n, k) -> (g, n, n_out)``."""
        kind = self._draws.choice(CHEAP_FUNCTION_TYPES if cheap else FUNCTION_TYPES)
        return getattr(self, f"_{kind}")(x, n_out)

    def _linear(self, x, n_out):
        return x @ self._matrix(x.shape[0], n_out, x.shape[-1]).transpose(1, 2)

    def _mlp(self, x, n_out):
        d = self._draws
        width = d.integer("mlp_width", 1, 128, log=True)
        n_layers = d.integer("mlp_layers", 1, 4, log=True)
        first, last = d.boolean(), d.boolean()
        if first:
            x = self._activation(x)
        for i in range(n_layers):
            x = self._linear(x, n_out if i == n_layers - 1 else width)
            if i < n_layers - 1 or last:
                x = self._activation(x)
        return x

    def _tree(self, x, n_out):
        """Mean of random oblivious trees with Gaussian leaves (CatBoost-style, v2's ``RandomTreeFunction``)."""
        d, rng = self._draws, self.rng
        g, n, k = x.shape
        n_trees = min(max(round(d.numerical("tree_count", 1, 128, log=True)), 1), 128)
        depth = d.integer("tree_depth", 1, 8)
        spread = torch.nan_to_num(x.std(1, correction=0), nan=1e-8, posinf=1e-8).clamp_min(1e-8)
        split_units = rng.categorical(spread, n_trees * depth)  # (g, S), units with more spread split more
        split_rows = rng.randint(n, g, n_trees * depth)
        thresholds = x[torch.arange(g, device=x.device).unsqueeze(1), split_rows, split_units]
        sides = (x.gather(2, split_units.unsqueeze(1).expand(g, n, -1)) > thresholds.unsqueeze(1))
        powers = 2 ** torch.arange(depth, device=x.device)
        leaf = (sides.view(g, n, n_trees, depth).long() * powers).sum(-1)  # (g, n, n_trees)
        n_leaves = 2 ** depth
        leaves = rng.randn(g * n_trees * n_leaves, n_out)
        offset = (torch.arange(g, device=x.device).view(g, 1, 1) * n_trees
                  + torch.arange(n_trees, device=x.device)) * n_leaves
        index = (leaf + offset).view(g * n, n_trees)
        return F.embedding_bag(index, leaves, mode="mean").view(g, n, n_out)

    def _discretization(self, x, n_out):
        d = self._draws
        g, n, k = x.shape
        hi = min(n, self.max_centres)
        n_centres = max(1, min(n, d.integer("centres", 2, max(hi, 3), log=True)))
        centres = _gather_rows(x, self.rng.rows(g, n, n_centres))
        p = d.numerical("cat_disc_p", 0.5, 4.0, log=True)
        targets = self._linear(centres, n_out)
        return _gather_rows(targets, _nearest(x, centres, p))

    def _gp(self, x, n_out, n_freq=256):
        """A random-Fourier Gaussian-process sample with a heavy-tailed spectrum."""
        d, rng = self._draws, self.rng
        g, n, k = x.shape
        a = d.numerical("gp_decay", 2.0, 20.0, log=True)
        if d.boolean():  # axis-aligned product kernel
            u = rng.rand(g, k, n_freq).clamp(1e-6, 1 - 1e-6)
            freqs = u.pow(1.0 / (1.0 - a)) - 1.0
        else:
            u = rng.rand(g, 1, n_freq).clamp(1e-6, 1 - 1e-6)
            freqs = rng.randn(g, k, n_freq)
            freqs = freqs * (u.pow(1.0 / (1.0 - a)) - 1.0) / freqs.norm(dim=1, keepdim=True).clamp_min(1e-12)
            transform = rng.randn(g, k, k) * self._weights((g,), k).unsqueeze(-1)
            freqs = d.numerical("gp_scale", 0.5, 10.0, log=True) * transform @ freqs
        phase = 2.0 * math.pi * rng.rand(g, 1, n_freq)
        weights = rng.randn(g, n_freq, n_out) / math.sqrt(n_freq)
        return torch.cos(x @ freqs + phase) @ weights

    def _quadratic(self, x, n_out, max_units=20):
        g, n, k = x.shape
        if k > max_units:
            x = x.gather(2, torch.argsort(self.rng.rand(g, 1, k), dim=-1)[..., :max_units].expand(g, n, -1))
        x = torch.cat([x, torch.ones(g, n, 1, device=x.device)], -1)
        m = x.shape[-1]
        forms = self._matrix(g * n_out, m, m).view(g, n_out, m, m)
        return torch.einsum("gni,goij,gnj->gno", x, forms, x)

    def _em(self, x, n_out):
        """Soft assignment to random centres (an EM step's responsibilities), then linear."""
        d, rng = self._draws, self.rng
        g, n, k = x.shape
        n_centres = d.integer("em_centres", 2, max(16, 2 * n_out) + 1, log=True)
        centres = _gather_rows(x, rng.randint(n, g, n_centres)) + rng.randn(g, n_centres, k)
        stds = torch.exp(d.numerical("em_std_spread", 0.0, 1.0) * rng.randn(g, 1, n_centres))
        p = d.numerical("em_p", 1.0, 4.0, log=True)
        q = d.numerical("em_q", 1.0, 2.0)
        logits = -torch.log(2 * math.pi * stds.square()) / 2 - (_distance(x, centres, p) / stds).clamp_min(0).pow(q)
        return self._linear(torch.softmax(logits, -1), n_out)

    def _product(self, x, n_out):
        return self._function(x, n_out, cheap=True) * self._function(x, n_out, cheap=True)
