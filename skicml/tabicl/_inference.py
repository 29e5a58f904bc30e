"""A fitted TabICL ensemble at inference: each member's context, its cache, its predictions.

Every member of the ensemble (:class:`~._ensemble.EnsembleGenerator`) is the
network run on one preprocessed view of the training table, its columns in
one order, its labels cyclically shifted. :class:`EnsembleContext` builds at
``fit`` what each member's training rows contribute
(:meth:`TabICLModel.build_context`) and predicts through it
(:meth:`TabICLModel.predict_with_context`), sharing work the network allows
to share: members of one view share its column context (the column stage
does not depend on column order or labels), and members that also read the
columns in the same order share the training rows' vectors.

:class:`MemberContexts` does the same for TabICL v2 networks
(:class:`~._model_v2.TabICLv2Model`), classification and regression, where
labels enter the column stage and nothing is shared between members.
"""

from __future__ import annotations

import dataclasses

import torch

from ..base import progress

__all__ = ["ROW_CHUNK", "EnsembleContext", "MemberContexts"]

# Rows per forward pass at predict time; bounds memory, not results.
ROW_CHUNK = 2048

# cache="auto" caches the in-context keys and values when all members' take less.
_AUTO_CACHE_BYTES = 2 * 1024**3


def _moved(value, device, memo):
    """``value`` with every tensor nested in it on ``device``.

    A tensor reached twice (members share their view's columns and rows) is
    moved once and stays shared.
    """
    if isinstance(value, torch.Tensor):
        if id(value) not in memo:
            memo[id(value)] = value.detach().to(device)
        return memo[id(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{field.name: _moved(getattr(value, field.name), device, memo)
                                             for field in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {key: _moved(item, device, memo) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_moved(item, device, memo) for item in value)
    return value


def _order_key(permutation):
    return tuple(permutation.tolist())


class EnsembleContext:
    """What the training table contributes to every member of a fitted ensemble.

    Parameters
    ----------
    model : TabICLModel
        On the device and in the precision of inference.
    ensemble : EnsembleGenerator
        Fitted: its preprocessed training views and member configurations.
    labels : bool, default=True
        Build the members' contexts; ``False`` keeps only the label-free
        column contexts (row representations need nothing else).
    cache : {"auto", True, False}, default="auto"
        Cache the members' in-context keys and values (``"auto"``: when they
        take under 2 GB together).
    verbose : int, default=0
        A progress bar over the members while their contexts are built.

    Attributes
    ----------
    columns : dict of str -> ColumnContext
        The column context of every view.
    members : list of TabICLContext
        One per member, in the order of ``ensemble.configs_`` (empty with
        ``labels=False``).
    cached : bool
        Whether the members hold their in-context keys and values.
    """

    def __init__(self, model, ensemble, *, labels=True, cache="auto", verbose=0):
        self.columns = {view: model.column_context(_as_input(X_train, model))
                        for view, X_train in ensemble.X_train_.items()}
        self.members = []
        self.cached = False
        if not labels:
            return
        self.cached = ensemble.n_classes_ <= model.max_classes and (cache is True or (
            cache == "auto"
            and model.context_nbytes(len(ensemble.y_train_)) * ensemble.n_estimators_ < _AUTO_CACHE_BYTES))
        rows = {}
        device = _device_of(model)
        for index, (view, permutation, _) in enumerate(
            progress(ensemble.configs_, verbose=verbose, desc="TabICL context", unit="member")
        ):
            key = (view, _order_key(permutation))
            if key not in rows:
                rows[key] = model.encode_with_context(self.columns[view], permutations=[permutation])[0]
            y = torch.from_numpy(ensemble.y_members_[index]).to(device).unsqueeze(0)
            self.members.append(model.build_context(self.columns[view], y, permutation=permutation,
                                                    rows=rows[key], cache=self.cached))

    def to(self, device):
        """This context with its tensors on ``device`` (shared tensors stay shared)."""
        moved = object.__new__(type(self))
        moved.__dict__.update(_moved(self.__dict__, device, {}))
        return moved

    def __getstate__(self):
        # Pickled on the CPU, as TorchEstimatorMixin pickles fitted tensors.
        return _moved(self.__dict__, "cpu", {})

    def _test_rows(self, model, ensemble, X_test):
        """Row vectors of test rows for every (view, column order) of the members."""
        rows = {}
        for view, X in X_test.items():
            orders = {}
            for member_view, permutation, _ in ensemble.configs_:
                if member_view == view:
                    orders.setdefault(_order_key(permutation), permutation)
            encoded = model.encode_with_context(self.columns[view], _as_input(X, model), list(orders.values()))
            rows.update(((view, key), r) for key, r in zip(orders, encoded))
        return rows

    def member_logits(self, model, ensemble, X_test, softmax_temperature):
        """Logits (m, K) of every member for test rows, in member order.

        Parameters
        ----------
        model : TabICLModel
        ensemble : EnsembleGenerator
        X_test : dict of str -> ndarray of shape (m, H_view)
            The test rows preprocessed for every view (``ensemble.transform``).
        softmax_temperature : float
            Temperature of the class tree's nodes.

        Yields
        ------
        Tensor of shape (m, K), one per member; the class offset is not undone.
        """
        context = self.to(_device_of(model))
        rows = context._test_rows(model, ensemble, X_test)
        for member, (view, permutation, _) in zip(context.members, ensemble.configs_):
            logits = model.predict_with_context(member, rows=rows[view, _order_key(permutation)],
                                                softmax_temperature=softmax_temperature)
            yield logits[0]

    def held_out_logits(self, model, index, query, context, softmax_temperature):
        """Logits of member ``index`` for its training rows ``query`` against its training rows ``context``."""
        member = _moved(self.members[index], _device_of(model), {})
        return model.predict_with_context(member.select(context), rows=member.rows[:, query],
                                          softmax_temperature=softmax_temperature)[0]

    def embed(self, model, ensemble, X_test):
        """Row vectors (m, row_dim) of test rows, averaged over the members, float64."""
        context = self.to(_device_of(model))
        rows = context._test_rows(model, ensemble, X_test)
        members = [rows[view, _order_key(permutation)][0] for view, permutation, _ in ensemble.configs_]
        return torch.stack(members).double().mean(0)


def _device_of(model):
    return next(model.parameters()).device


def _as_input(X, model):
    """A preprocessed table (n, H) as a batch of one on the model's device and dtype."""
    parameter = next(model.parameters())
    return torch.from_numpy(X).to(parameter.device, parameter.dtype).unsqueeze(0)



def _nbytes(value):
    """Bytes of the tensors nested in ``value`` (a context dataclass, list or dict)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(_nbytes(getattr(value, field.name)) for field in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(_nbytes(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item) for item in value)
    return 0


class MemberContexts:
    """What the training table contributes to every member of a fitted ensemble, for a TabICL v2 network.

    Labels enter TabICL v2's column stage (target-aware embedding) and its
    feature groups mix neighbouring columns, so unlike v1 no stage is shared
    between members: each member's training rows (its view, its column
    order, its labels) are encoded, ``batch_size`` members per forward pass,
    with :meth:`TabICLv2Model.build_context`.

    Parameters
    ----------
    model : TabICLv2Model
        On the device and in the precision of inference.
    ensemble : EnsembleGenerator
        Fitted: its preprocessed training views and member configurations.
    y : ndarray of shape (n_estimators_, n_train) or (1, n_train)
        Every member's training labels (class ids or standardised targets);
        one row is shared by all members.
    cache : {"auto", True, False}, default="auto"
        Keep the contexts (``"auto"``: when all of them take under 2 GB,
        measured on the first batch); without them every prediction runs
        the training rows again.
    batch_size : int or None, default=8
        Members per forward pass (``None``: all members of a view at once).
    verbose : int, default=0

    Attributes
    ----------
    batches : list of (str, list of int, TabICLv2Context or None)
        The view, member indices and context of every batch of members.
    cached : bool
    """

    def __init__(self, model, ensemble, y, *, cache="auto", batch_size=8, verbose=0):
        parameter = next(model.parameters())
        self.y = torch.as_tensor(y).to(parameter.device, parameter.dtype)
        self.ensemble = ensemble  # held-out predictions re-read members' training rows
        plan = []
        for view, indices in ensemble.members_by_method_.items():
            size = len(indices) if batch_size is None else batch_size
            plan += [(view, [int(i) for i in indices[start:start + size]]) for start in range(0, len(indices), size)]
        self.cached = cache is not False
        self.batches = []
        for view, indices in progress(plan, verbose=verbose, desc="TabICL context", unit="batch"):
            context = None
            if self.cached:
                X_train = _member_rows(ensemble.X_train_[view], ensemble, indices, model)
                context = model.build_context(X_train, self._labels(indices))
                # Measured on the first batch: contexts grow with rows and columns alike.
                if cache == "auto" and not self.batches and _nbytes(context) * len(plan) > _AUTO_CACHE_BYTES:
                    self.cached, context = False, None
            self.batches.append((view, indices, context))

    def _labels(self, indices, rows=slice(None)):
        y = self.y if len(self.y) > 1 else self.y.expand(max(indices) + 1, -1)
        return y[indices][:, rows]

    def __getstate__(self):
        # Pickled on the CPU, as TorchEstimatorMixin pickles fitted tensors.
        return _moved(self.__dict__, "cpu", {})

    def member_outputs(self, model, ensemble, X_test, bar=None, **options):
        """Outputs (n_estimators_, m, out) of every member for test rows, in member order.

        Parameters
        ----------
        model : TabICLv2Model
        ensemble : EnsembleGenerator
        X_test : dict of str -> ndarray of shape (m, H_view)
            The test rows preprocessed for every view (``ensemble.transform``).
        bar : progress bar or None
            Advanced by the members of every batch.
        **options
            Passed to :meth:`TabICLv2Model.predict_with_context`
            (``softmax_temperature``, ``quantile_mean``).

        Returns
        -------
        Tensor
            Logits over the classes present (class offsets not undone), raw
            standardised quantiles, or with ``quantile_mean=True`` their
            means (n_estimators_, m).
        """
        device = _device_of(model)
        out = [None] * ensemble.n_estimators_
        for view, indices, context in self.batches:
            X = _member_rows(X_test[view], ensemble, indices, model)
            if context is None:
                X_train = _member_rows(ensemble.X_train_[view], ensemble, indices, model)
                context = model.build_context(X_train, self._labels(indices).to(device), cache=False)
            else:
                context = _moved(context, device, {})
            outputs = model.predict_with_context(context, X, **options)
            for row, index in enumerate(indices):
                out[index] = outputs[row]
            if bar is not None:
                bar.update(len(indices))
        return torch.stack(out)

    def member_logits(self, model, ensemble, X_test, softmax_temperature):
        """Logits (m, K) of every member, in member order, as :meth:`EnsembleContext.member_logits` yields them."""
        yield from self.member_outputs(model, ensemble, X_test, softmax_temperature=softmax_temperature)

    def held_out_logits(self, model, index, query, context, softmax_temperature):
        """Logits of member ``index`` for its training rows ``query`` against its training rows ``context``."""
        view = self.ensemble.configs_[index][0]
        X = _member_rows(self.ensemble.X_train_[view], self.ensemble, [index], model)
        context = torch.as_tensor(context, device=X.device)
        query = torch.as_tensor(query, device=X.device)
        y = self._labels([index]).to(X.device)
        table = torch.cat([X[:, context], X[:, query]], dim=1)
        return model.predict_logits(table, y[:, context], softmax_temperature=softmax_temperature)[0]


def _member_rows(X, ensemble, indices, model):
    """Rows of one view in each member's column order, stacked (members, n, H), on the model's device."""
    parameter = next(model.parameters())
    X = torch.as_tensor(X).to(parameter.device, parameter.dtype)
    return torch.stack([X[:, torch.as_tensor(ensemble.configs_[i][1], device=X.device, dtype=torch.long)]
                        for i in indices])
