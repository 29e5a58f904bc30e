"""NeuralContexture: the contexture learned by a neural encoder (variational)."""

from __future__ import annotations

import zlib

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import LinearOperator
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ..base import TorchEstimatorMixin, seeded, to_tensor
from ..utils.param_validation import (
    HasMethods,
    Integral,
    Interval,
    Real,
    StrOptions,
    fit_context,
    shared_constraints,
)
from ._contexts import FeatureCorruptionContext, GraphContext, _resolve_context
from ._model import ACTIVATIONS, OBJECTIVES, ContextureMLP
from ._spectrum import _fitted_score, spectral_decay_rate

__all__ = ["NeuralContexture"]

# Above this many entries an implicit conditional matrix is not densified to
# draw positive pairs from (256 MiB of float64).
_MAX_DENSE_ENTRIES = 2**25
_MIN_SAMPLES = 3


class _RowSampler:
    """Draws a column index from each requested row of a non-negative sparse matrix.

    Rows are normalised to sum to 1; one ``searchsorted`` on the running sum
    of all entries serves every row at once.
    """

    def __init__(self, M):
        M = sp.csr_matrix(M, dtype=np.float64)
        M.sort_indices()
        mass = np.asarray(M.sum(axis=1)).ravel()
        M = sp.csr_matrix(sp.diags(1.0 / np.where(mass > 0, mass, 1.0)) @ M)
        self.indptr, self.indices = M.indptr, M.indices
        self.cumulative = np.cumsum(M.data)

    def draw(self, rows, rng):
        start, stop = self.indptr[rows], self.indptr[rows + 1]
        before = np.where(start > 0, self.cumulative[np.maximum(start - 1, 0)], 0.0)
        total = self.cumulative[stop - 1] - before
        position = np.searchsorted(self.cumulative, before + rng.random_sample(rows.size) * total, side="right")
        return self.indices[np.clip(position, start, stop - 1)]


def _pair_samplers(context):
    """Samplers of ``P+(a | x)`` (rows of ``W``) and ``P(x | a)`` (its columns, reweighted)."""
    W = context.fit_conditional_
    if isinstance(W, LinearOperator):
        if W.shape[0] * W.shape[1] > _MAX_DENSE_ENTRIES:
            raise ValueError(
                f"{type(context).__name__} keeps its {W.shape[0]} x {W.shape[1]} conditional matrix implicit; "
                "NeuralContexture draws positive pairs from an explicit one. Truncate the context (e.g. "
                "RBFContext(truncate=...)) or fit on fewer rows."
            )
        W = W @ np.eye(W.shape[1])
    W = sp.csr_matrix(W, dtype=np.float64)
    if W.nnz and W.data.min() < 0:
        raise ValueError(
            f"{type(context).__name__}'s conditional matrix has negative entries, so it is not a distribution "
            "P+(a | x) to draw positive pairs from; use ContextureEmbedding for this context."
        )
    row_marginal = np.asarray(context.row_marginal_, dtype=np.float64)
    anchor_marginal = np.asarray(context.anchor_marginal_, dtype=np.float64)
    # P(x_j | a_k) = P_X(x_j) W[j, k] / p_k: the anchors' columns as rows.
    posterior = sp.diags(row_marginal) @ W @ sp.diags(1.0 / anchor_marginal)
    return _RowSampler(W), _RowSampler(posterior.T), row_marginal


class _Trainer(torch.nn.Module):
    """What :func:`~skicml.utils.training.fit_module` trains: draws the views of
    a batch of row indices and returns the objective on them."""

    def __init__(self, encoder, X, objective, n_views, seed, *, context=None, samplers=None,
                 dtype=torch.float32):
        super().__init__()
        self.encoder = encoder
        self.register_buffer("rows", torch.tensor(X, dtype=dtype), persistent=False)
        self.X = X
        self.objective = objective
        self.n_views = n_views
        self.context = context
        self.samplers = samplers
        self.rng = np.random.RandomState(seed)
        if samplers is not None:
            marginal = samplers[2]
            self.uniform = bool(np.allclose(marginal, marginal[0]))

    def forward(self, index):
        index = index.cpu().numpy().astype(np.int64)
        device = self.rows.device
        if self.samplers is None:
            views = self.context.sample(self.X[index], self.n_views, random_state=self.rng)
            views = torch.as_tensor(views, dtype=self.rows.dtype, device=device)
        else:
            by_row, by_anchor, marginal = self.samplers
            if not self.uniform:
                index = self.rng.choice(marginal.size, size=index.size, p=marginal)
            anchors = by_row.draw(index, self.rng)
            # Given its anchor, each partner is drawn like the row itself was:
            # any two of the views are a positive pair of the dual kernel k_X+.
            members = [index] + [by_anchor.draw(anchors, self.rng) for _ in range(self.n_views - 1)]
            views = self.rows[torch.as_tensor(np.stack(members, axis=1), device=device)]
        B, n_views, p = views.shape
        z = self.encoder(views.reshape(B * n_views, p)).reshape(B, n_views, -1)
        return self.objective(z)


class NeuralContexture(ClassNamePrefixFeaturesOutMixin, TorchEstimatorMixin, TransformerMixin, BaseEstimator):
    """Learn the contexture of a context with a neural encoder (variational).

    The neural counterpart of
    :class:`~skicml.contexture.ContextureEmbedding` (contexture spec,
    sections 2.2, 2.4 and 4.3). An MLP ``Psi`` (Tanh, skip connections) is
    trained on positive pairs by an objective whose minimisers span the top
    singular functions of the context:

    - with a *sampling* context (feature corruption, cutmix, noise, crops),
      ``Psi`` reads views: each batch draws ``n_views`` fresh views of its
      rows with ``context.sample``; views of one row are positives, views of
      the batch's other rows negatives. The representation of ``x`` is the
      *average encoder* ``Phi(x) = E[Psi(A) | x]``, estimated by averaging
      ``Psi`` over ``n_eval_views`` views (``0``: ``Psi`` of the clean row);
    - with an *exact* context (kNN, RBF, masked, label, ...), ``Psi`` reads
      the rows themselves and the positives are pairs ``(x, x+)`` of the
      dual kernel ``k_X+``: an anchor ``a ~ P+(a | x)`` of the batch row,
      then ``x+ ~ P(x | a)``.

    After training, the post-hoc step of the paper's appendix D turns the
    ``n_outputs`` outputs into ordered components and estimates the
    spectrum: with ``C`` the covariance of the outputs and ``B`` the
    covariance of their context averages (from two views of the same rows,
    or exactly ``Phi~^T diag(P_X)^(1/2) Q Q^T diag(P_X)^(1/2) Phi~`` with
    the context's operator ``Q`` for exact contexts), the generalised
    eigenproblem ``B v = lambda C v`` gives ``eigenvalues_`` (estimates of
    ``s_i^2``; Ritz values, so they err low where the encoder misses a
    singular function) and the ``projection_`` to the top
    ``n_components``. Training more outputs than are kept (``n_outputs =
    4 n_components``) guards against dimensional collapse.

    Parameters
    ----------
    context : context, str or None, default=None
        A context of :mod:`skicml.contexture`, or a shortcut of
        :class:`~skicml.contexture.ContextureEmbedding` (``"knn"``,
        ``"rbf"``, ``"masked_knn"``, ``"masked_rbf"``, ``"label"``).
        ``None`` is :class:`~skicml.contexture.FeatureCorruptionContext`
        (SCARF) with its defaults. Graph contexts (rows are node names, not
        features) are not supported.
    n_components : int, default=32
        ``d``, the width of the representation.
    n_outputs : int or None, default=None
        ``d_1``, the encoder's output width (``None``: ``4 * n_components``);
        ``eigenvalues_`` has this many entries.
    objective : {"vicreg", "spectral_contrastive", "lowrank"}, default="vicreg"
        ``"vicreg"``: invariance ``E||Psi(A) - Psi(A+)||^2`` with VICReg's
        variance and covariance penalties standing for ``Cov[Psi] = I``;
        ``"spectral_contrastive"``: the centred spectral contrastive loss
        ``-<Psi~(A), Psi~(A+)> + 1/2 <Psi~(A), Psi~(A-)>^2``; ``"lowrank"``:
        the centred low-rank approximation objective with its negative term
        through second-moment matrices. See :mod:`skicml.contexture._model`.
    hidden_sizes : tuple of int, default=(256, 256)
        Widths of the hidden layers.
    activation : {"tanh", "relu", "gelu"}, default="tanh"
    skip_connections : bool, default=True
        Residual connections between hidden layers of equal width.
    n_views : int, default=2
        Views per row and batch (every pair of them is a positive pair).
    n_eval_views : int, default=8
        Views averaged by :meth:`transform` (and by the post-hoc step) for a
        sampling context; ``0`` encodes the clean rows. With views the
        output of a row depends on the draws, which are seeded at ``fit``:
        ``transform`` of the same ``X`` repeats itself, but a row's output
        changes with the rows it is transformed with (use ``0`` where that
        matters). Ignored for exact contexts.
    max_epochs : int, default=100
        ``0`` keeps the random network (the post-hoc step still runs).
    batch_size : int, default=256
    lr : float, default=1e-3
    weight_decay : float, default=1e-4
    optimizer : {"adamw", "adam", "sgd"} or torch.optim.Optimizer subclass, default="adamw"
    vicreg_weights : tuple of 3 floats, default=(25.0, 25.0, 1.0)
        Weights of the invariance, variance and covariance terms (VICReg's).
    beta : float, default=1.0
        Weight of the second term of the score ``tau``.
    dtype : {"float32", "float64"}, default="float32"
        Precision of the network (the post-hoc step is in float64).
    device : str or torch.device, default="auto"
    random_state : int, RandomState instance or None, default=None
        Seeds the network, the views and the positive pairs.
    verbose : int or "auto", default="auto"
        ``"auto"`` shows a progress bar only once a step has run for a few
        seconds, and clears it at the end.
        ``1`` shows a progress bar over the epochs.

    Attributes
    ----------
    context_ : context
        The fitted context (a clone of ``context``).
    module_ : ContextureMLP
        The trained encoder ``Psi`` in eval mode.
    history_ : list of float
        Training loss per epoch.
    n_iter_ : int
        Epochs run.
    n_outputs_ : int
    eigenvalues_ : ndarray of shape (n_outputs,)
        Estimates of ``s_1^2 >= s_2^2 >= ...`` (clipped to [0, 1]).
    projection_ : ndarray of shape (n_outputs, n_components)
        Top generalised eigenvectors, scaled to unit variance of the
        projected outputs.
    mean_ : ndarray of shape (n_outputs,)
        The outputs' mean (over views for a sampling context, over the fit
        rows otherwise), subtracted before projecting.
    tau_ : float
        The context score ``min_d tau_d`` on ``eigenvalues_`` (lower is better).
    tau_curve_ : ndarray of shape (n_outputs - 1,)
    optimal_n_components_ : int
        ``argmin_d tau_d``.
    decay_rate_ : float
        ``lambda`` of the fit ``s_i^2 = exp(-lambda i)``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in,)
        Defined when ``X`` has string column names.

    See Also
    --------
    skicml.contexture.ContextureEmbedding : The exact contexture of exact contexts.

    Notes
    -----
    :meth:`score` returns ``-tau_`` like ``ContextureEmbedding``, so a grid
    search over context parameters needs no labels; the neural spectrum
    decays faster than the exact one (the encoder's inductive bias), so
    compare scores between neural fits, not with exact ones.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skicml.contexture import KNNContext, NeuralContexture
    >>> X = StandardScaler().fit_transform(load_digits().data[:300])
    >>> neural = NeuralContexture(KNNContext(n_neighbors=30), n_components=4, objective="spectral_contrastive",
    ...                           hidden_sizes=(64,), max_epochs=20, batch_size=300, lr=3e-3, random_state=0)
    >>> neural.fit_transform(X).shape
    (300, 4)
    >>> neural.eigenvalues_.shape, bool(0 <= neural.eigenvalues_[-1] <= neural.eigenvalues_[0] <= 1)
    ((16,), True)
    """

    _parameter_constraints = {
        "context": [HasMethods(["fit"]), StrOptions({"knn", "rbf", "masked_knn", "masked_rbf", "label"}), None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "n_outputs": [Interval(Integral, 1, None, closed="left"), None],
        "objective": [StrOptions(set(OBJECTIVES))],
        "hidden_sizes": [tuple, list],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "skip_connections": ["boolean"],
        "n_views": [Interval(Integral, 2, None, closed="left")],
        "n_eval_views": [Interval(Integral, 0, None, closed="left")],
        "optimizer": [StrOptions({"adamw", "adam", "sgd"}), type],
        "vicreg_weights": [tuple, list],
        "beta": [Interval(Real, 0, None, closed="left")],
        "dtype": [StrOptions({"float32", "float64"})],
        **shared_constraints("max_epochs", "batch_size", "lr", "weight_decay", "device", "random_state",
                             "verbose"),
    }

    def __init__(self, context=None, n_components=32, *, n_outputs=None, objective="vicreg",
                 hidden_sizes=(256, 256), activation="tanh", skip_connections=True, n_views=2, n_eval_views=8,
                 max_epochs=100, batch_size=256, lr=1e-3, weight_decay=1e-4, optimizer="adamw",
                 vicreg_weights=(25.0, 25.0, 1.0), beta=1.0, dtype="float32", device="auto", random_state=None,
                 verbose="auto"):
        self.context = context
        self.n_components = n_components
        self.n_outputs = n_outputs
        self.objective = objective
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.skip_connections = skip_connections
        self.n_views = n_views
        self.n_eval_views = n_eval_views
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer = optimizer
        self.vicreg_weights = vicreg_weights
        self.beta = beta
        self.dtype = dtype
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def _resolved_context(self):
        return FeatureCorruptionContext() if self.context is None else _resolve_context(self.context)

    def _check_settings(self, n_samples):
        hidden = tuple(self.hidden_sizes)
        if not all(isinstance(h, Integral) and not isinstance(h, bool) and h >= 1 for h in hidden):
            raise ValueError(f"hidden_sizes must be positive integers, got {self.hidden_sizes!r}.")
        weights = tuple(self.vicreg_weights)
        if len(weights) != 3 or not all(isinstance(w, Real) and not isinstance(w, bool) and w >= 0
                                        for w in weights):
            raise ValueError(
                "vicreg_weights must be three non-negative numbers (invariance, variance, covariance), got "
                f"{self.vicreg_weights!r}."
            )
        n_outputs = 4 * self.n_components if self.n_outputs is None else self.n_outputs
        if self.n_components > n_outputs:
            raise ValueError(
                f"n_components={self.n_components} is more than n_outputs={n_outputs}: the post-hoc step keeps "
                "n_components of the encoder's outputs; pass n_outputs >= n_components."
            )
        if self.n_components > n_samples - 1:
            raise ValueError(
                f"n_components={self.n_components} needs at least {self.n_components + 1} rows (the constant "
                f"is not a component); X has {n_samples}."
            )
        return hidden, weights, n_outputs

    @fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Train the encoder, then order its outputs and estimate the spectrum.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or None
            Only for contexts that use labels (``LabelContext``).

        Returns
        -------
        self
        """
        context = self._resolved_context()
        if isinstance(context, GraphContext):
            raise ValueError(
                "NeuralContexture's encoder reads features; a GraphContext's rows are node names. Use "
                "ContextureEmbedding for graph contexts."
            )
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=_MIN_SAMPLES)
        X = np.asarray(X, dtype=np.float64)
        hidden, weights, n_outputs = self._check_settings(X.shape[0])
        exact = bool(getattr(context, "exact", True))
        if not exact and not hasattr(context, "sample"):
            raise ValueError(f"{type(context).__name__} has exact=False but no sample(X, n_views, random_state).")
        self.context_ = clone(context).fit(X, y)
        if exact and not hasattr(self.context_, "fit_operator_"):
            raise ValueError(
                f"{type(context).__name__} has neither an exact operator (fit_operator_) nor a sample method; "
                "NeuralContexture needs one of them."
            )
        seeds = np.random.RandomState(self._seed()).randint(0, 2**31 - 1, size=4)
        self.n_outputs_ = n_outputs
        self._eval_seed = int(seeds[3])
        with seeded(int(seeds[0])):
            encoder = ContextureMLP(X.shape[1], n_outputs, hidden, self.activation, self.skip_connections)
        encoder = encoder.to(getattr(torch, self.dtype))
        if self.objective == "vicreg":
            objective = _VICReg(weights)
        else:
            objective = OBJECTIVES[self.objective]
        samplers = _pair_samplers(self.context_) if exact else None
        trainer = _Trainer(encoder, X, objective, self.n_views, int(seeds[1]), context=self.context_,
                           samplers=samplers, dtype=getattr(torch, self.dtype))
        trainer, history = self._fit_module(trainer, np.arange(X.shape[0]), None, loss=None,
                                            optimizer=self.optimizer, seed=int(seeds[1]))
        self.module_ = trainer.encoder.eval()
        self.history_ = list(history.train_loss)
        self.n_iter_ = int(history.n_epochs)
        self._post_hoc(X, exact, int(seeds[2]))
        return self

    def _encode(self, X):
        device = self._device()
        module = self.module_.to(device).eval()
        out = []
        with torch.inference_mode():
            for start in range(0, X.shape[0], max(1, self.batch_size)):
                batch = to_tensor(X[start:start + self.batch_size], dtype=self.dtype, device=device)
                out.append(module(batch).double().cpu().numpy())
        return np.concatenate(out) if out else np.empty((0, self.n_outputs_))

    def _encode_views(self, X, n_views, seed):
        """Outputs of ``n_views`` views of every row, shape (n, n_views, n_outputs)."""
        views = self.context_.sample(X, n_views, random_state=np.random.RandomState(seed))
        n, k, p = views.shape
        return self._encode(views.reshape(n * k, p)).reshape(n, k, -1)

    def _encode_row_views(self, X):
        """Views seeded by each row's own bytes: a row's average-encoder output
        depends on the row, not on the batch it comes in."""
        views = np.concatenate([
            self.context_.sample(row[None], self.n_eval_views,
                                 random_state=np.random.RandomState(zlib.crc32(row.tobytes(), self._eval_seed)))
            for row in np.ascontiguousarray(X)
        ]) if len(X) else np.empty((0, self.n_eval_views, X.shape[1]))
        n, k, p = views.shape
        return self._encode(views.reshape(n * k, p)).reshape(n, k, -1)

    def _post_hoc(self, X, exact, seed):
        """Appendix D: ``B v = lambda C v`` on the encoder's outputs."""
        if exact:
            weight = np.asarray(self.context_.row_marginal_, dtype=np.float64)
            F = self._encode(X)
            self.mean_ = weight @ F
            centred = F - self.mean_
            C = centred.T @ (weight[:, None] * centred)
            G = np.asarray(self.context_.fit_operator_.T @ (np.sqrt(weight)[:, None] * centred))
            B = G.T @ G
        else:
            n_views = max(2, self.n_eval_views)
            F = self._encode_views(X, n_views, seed)
            n, k, d = F.shape
            self.mean_ = F.reshape(n * k, d).mean(axis=0)
            centred = F - self.mean_
            flat = centred.reshape(n * k, d)
            C = flat.T @ flat / (n * k)
            total = centred.sum(axis=1)
            # All ordered pairs of different views of a row: E[psi~(A) psi~(A+)^T], symmetric.
            B = (total.T @ total - flat.T @ flat) / (n * k * (k - 1))
        C, B = (C + C.T) / 2, (B + B.T) / 2
        ridge = 1e-6 * max(np.trace(C) / C.shape[0], 1e-12)
        values, vectors = scipy.linalg.eigh(B, C + ridge * np.eye(C.shape[0]))
        order = np.argsort(values)[::-1]
        values, vectors = values[order], vectors[:, order]
        projection = vectors[:, : self.n_components]
        variance = np.einsum("ij,ik,kj->j", projection, C, projection)
        projection = projection / np.sqrt(np.where(variance > 0, variance, 1.0))
        # Deterministic signs: each component's largest coefficient is positive.
        largest = projection[np.argmax(np.abs(projection), axis=0), np.arange(projection.shape[1])]
        self.projection_ = projection * np.where(largest < 0, -1.0, 1.0)
        self.eigenvalues_ = np.clip(values, 0.0, 1.0)
        self.tau_, self.optimal_n_components_, self.tau_curve_ = _fitted_score(
            self.eigenvalues_, self.eigenvalues_.size, self.beta)
        self.decay_rate_ = float(spectral_decay_rate(self.eigenvalues_))

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """The learned representation: centred outputs times ``projection_``.

        For a sampling context with ``n_eval_views > 0`` the outputs are
        averaged over that many views of each row (the average encoder).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        embedding : ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self, "projection_")
        X = np.asarray(validate_data(self, X, reset=False, dtype=[np.float64, np.float32]), dtype=np.float64)
        if self.context_.exact or self.n_eval_views == 0:
            F = self._encode(X)
        else:
            F = self._encode_row_views(X).mean(axis=1)
        return (F - self.mean_) @ self.projection_

    def score(self, X=None, y=None):
        """``-tau_``: the context score of the fit's estimated spectrum (higher is better).

        Parameters
        ----------
        X : ignored
        y : ignored

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "projection_")
        if X is not None:
            validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return -self.tau_

    @property
    def _n_features_out(self):
        # The width get_feature_names_out names (ClassNamePrefixFeaturesOutMixin).
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            context = self._resolved_context()
        except (TypeError, ValueError):
            return tags
        tags.target_tags.required = type(context).__name__ == "LabelContext"
        return tags


class _VICReg(torch.nn.Module):
    """:func:`~skicml.contexture._model.vicreg_loss` with fixed weights (picklable)."""

    def __init__(self, weights):
        super().__init__()
        self.weights = tuple(float(w) for w in weights)

    def forward(self, z):
        return OBJECTIVES["vicreg"](z, self.weights)
