"""The two training loops of skicml.

- :func:`fit_module`, the *epoch loop*: an estimator trains its module on the
  data it is given, epoch after epoch, on skorch (validation split, early
  stopping, warm-up and cosine schedule, gradient clipping, checkpoints that
  resume the remaining epochs). Estimators reach it through
  :meth:`skicml.base.TorchEstimatorMixin._fit_module`, which hands it their
  own training settings.
- :func:`pretrain`, the *step loop*: a ``skicml pretrain`` recipe trains on an
  endless stream (a synthetic prior, a corpus sampled batch by batch) for a
  fixed number of optimiser steps, with checkpoints that resume *exactly*.

Both share the learning-rate schedule (:func:`warmup_cosine`) and run
data-parallel under ``torchrun`` (:func:`distributed_context`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._runtime import progress, resolve_device, seeded, to_device

__all__ = ["TrainingHistory", "distributed_context", "fit_module", "pretrain", "warmup_cosine"]


# --------------------------------------------------------------------------
# shared by both loops
# --------------------------------------------------------------------------
def warmup_cosine(total_steps, warmup_steps, final_factor=0.0):
    """The learning-rate factor of a linear warm-up followed by a cosine decay.

    Parameters
    ----------
    total_steps : int
        Steps of the whole schedule.
    warmup_steps : int
        Steps of the linear warm-up from ``1 / warmup_steps`` to 1.
    final_factor : float, default=0.0
        Factor the cosine decays to at ``total_steps`` (and keeps after).

    Returns
    -------
    callable
        ``factor(step) -> float``, for :class:`torch.optim.lr_scheduler.LambdaLR`.

    Examples
    --------
    >>> from skicml.utils.training import warmup_cosine
    >>> factor = warmup_cosine(total_steps=10, warmup_steps=2)
    >>> [round(factor(step), 3) for step in (0, 1, 2, 6, 10)]
    [0.5, 1.0, 1.0, 0.5, 0.0]
    """

    def factor(step):
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        progress_ = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        progress_ = min(max(progress_, 0.0), 1.0)
        return final_factor + (1 - final_factor) * 0.5 * (1 + math.cos(math.pi * progress_))

    return factor


def distributed_context():
    """``(rank, world_size)`` of this process; ``(0, 1)`` outside multi-process ``torch.distributed``.

    Examples
    --------
    >>> from skicml.utils.training import distributed_context
    >>> distributed_context()
    (0, 1)
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# --------------------------------------------------------------------------
# the epoch loop
# --------------------------------------------------------------------------
@dataclass
class TrainingHistory:
    """What :func:`fit_module` reports back to the estimator.

    Attributes
    ----------
    train_loss : list of float
        Mean training loss per epoch.
    valid_loss : list of float
        Mean validation loss per epoch (empty without a validation split).
    best_epoch : int
        1-based epoch whose weights were kept.
    n_epochs : int
        Epochs actually run (early stopping may end before ``max_epochs``).
    epoch_seconds : list of float
        Wall time of each epoch, those of resumed runs included.
    """

    train_loss: list
    valid_loss: list
    best_epoch: int
    n_epochs: int
    epoch_seconds: list = field(default_factory=list)


def _loss_is_output(output, target=None):
    return output.mean()


class _LossFunction(torch.nn.Module):
    """Wrap a plain callable ``loss(output, target)`` as a skorch criterion."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, output, target):
        return self.fn(output, target)


_LOSSES = {
    "cross_entropy": torch.nn.CrossEntropyLoss,
    "mse": torch.nn.MSELoss,
    "l1": torch.nn.L1Loss,
    "bce_with_logits": torch.nn.BCEWithLogitsLoss,
}


def _criterion(loss):
    if loss is None:
        return _LossFunction(_loss_is_output)
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise ValueError(f"loss={loss!r}; expected one of {sorted(_LOSSES)} or a callable.")
        return _LOSSES[loss]()
    if isinstance(loss, torch.nn.Module):
        return loss
    if callable(loss):
        return _LossFunction(loss)
    raise TypeError(f"loss must be a name, an nn.Module or a callable, got {type(loss).__name__}.")


_OPTIMIZERS = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def _optimizer(optimizer):
    if not isinstance(optimizer, str):
        return optimizer
    if optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r}; expected one of {sorted(_OPTIMIZERS)}.")
    return _OPTIMIZERS[optimizer]


def _n_samples(X):
    if isinstance(X, dict):
        return len(next(iter(X.values())))
    return len(X)


def _take(X, index):
    if X is None:
        return None
    if isinstance(X, dict):
        return {k: v[index] for k, v in X.items()}
    return X[index]


def _shard(X, y, seed, rank, world_size):
    """This rank's rows: an equal share of a seeded permutation, in order.

    Every rank runs the same number of batches that way: DDP hangs if one
    rank makes a step the others do not.
    """
    if world_size == 1:
        return X, y
    order = np.random.RandomState(seed).permutation(_n_samples(X))
    per_rank = _n_samples(X) // world_size
    shard = np.sort(order[rank * per_rank:(rank + 1) * per_rank])
    return _take(X, shard), _take(y, shard)


def _total_steps(n_samples, validation_fraction, batch_size, max_epochs):
    n_train = n_samples - (math.ceil(n_samples * validation_fraction) if validation_fraction else 0)
    return max(1, math.ceil(n_train / batch_size)) * max_epochs


def _checkpoint(checkpoint_dir):
    if checkpoint_dir is None:
        return None
    from skorch.callbacks import Checkpoint

    return Checkpoint(
        dirname=os.fspath(checkpoint_dir), monitor=None, f_criterion=None,
        f_pickle=None, load_best=False, sink=lambda *a: None,
    )


def _callbacks(*, total_steps, max_epochs, lr_schedule, warmup_fraction, grad_clip, n_iter_no_change,
               tol, checkpoint, rank, world_size, verbose, desc):
    from skorch.callbacks import EarlyStopping, GradientNormClipping, LRScheduler

    from ._callbacks import EpochProgress, SyncedValidLoss

    # Order matters: the validation loss is averaged over ranks before early
    # stopping reads it, and the progress bar shows the final values.
    callbacks = [("synced_valid_loss", SyncedValidLoss(world_size))]
    if lr_schedule == "cosine":
        callbacks.append((
            "lr_schedule",
            LRScheduler(
                policy=torch.optim.lr_scheduler.LambdaLR,
                lr_lambda=warmup_cosine(total_steps, int(warmup_fraction * total_steps)),
                step_every="batch",
            ),
        ))
    elif lr_schedule is not None:
        raise ValueError(f"lr_schedule={lr_schedule!r}; expected 'cosine' or None.")
    if grad_clip is not None:
        callbacks.append(("grad_clip", GradientNormClipping(gradient_clip_value=grad_clip)))
    if n_iter_no_change is not None:
        callbacks.append((
            "early_stopping",
            EarlyStopping(
                monitor="valid_loss", patience=n_iter_no_change, threshold=tol,
                threshold_mode="abs", load_best=True, sink=lambda *a: None,
            ),
        ))
    if checkpoint is not None and rank == 0:
        callbacks.append(("checkpoint", checkpoint))
    callbacks.append(("progress", EpochProgress(max_epochs, verbose if rank == 0 else 0, desc)))
    return callbacks


def _wrap_for_ddp(module, device, world_size):
    if world_size == 1:
        return module
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(
        module.to(device), device_ids=[device.index or 0] if device.type == "cuda" else None
    )


def _without_decay(optimizer, module, rule):
    """``optimizer`` with the parameters that ``rule(name, parameter)`` picks in a group of their own
    without weight decay (one group, so the fused multi-tensor step still covers them)."""
    if rule is None:
        return optimizer
    exempt = {id(parameter) for name, parameter in module.named_parameters() if rule(name, parameter)}

    def build(param_groups, **settings):
        groups = []
        for group in param_groups:
            params = list(group["params"])
            options = {key: value for key, value in group.items() if key != "params"}
            decayed = [p for p in params if id(p) not in exempt]
            kept = [p for p in params if id(p) in exempt]
            groups += [{"params": decayed, **options}] if decayed else []
            groups += [{"params": kept, **options, "weight_decay": 0.0}] if kept else []
        return optimizer(groups, **settings)

    return build


def _neural_net(module, *, criterion, optimizer, weight_decay, lr, max_epochs, batch_size,
                validation_fraction, stratify, seed, callbacks, device):
    from skorch import NeuralNet
    from skorch.dataset import ValidSplit

    if validation_fraction:
        split = ValidSplit(validation_fraction, stratified=stratify, random_state=seed)
    else:
        split = None
    net = NeuralNet(
        module=module,
        criterion=criterion,
        optimizer=optimizer,
        optimizer__weight_decay=weight_decay,
        lr=lr,
        max_epochs=max_epochs,
        batch_size=batch_size,
        iterator_train__shuffle=True,
        train_split=split,
        callbacks=callbacks,
        device=str(device),
        verbose=0,
        predict_nonlinearity=None,
    )
    return net.initialize()


def _resume(net, checkpoint, checkpoint_dir, max_epochs):
    """Load the checkpoint of an interrupted run, if any; the epochs left to run."""
    if checkpoint is None or not os.path.exists(os.path.join(os.fspath(checkpoint_dir), "history.json")):
        return max_epochs
    net.load_params(checkpoint=checkpoint)
    return max_epochs - len(net.history)


def _history(net, n_iter_no_change):
    history = net.history
    train_loss = [float(v) for v in history[:, "train_loss"]] if len(history) else []
    valid_loss = (
        [float(v) for v in history[:, "valid_loss"]] if len(history) and "valid_loss" in history[-1] else []
    )
    if valid_loss:
        # Early stopping restored the best epoch's weights; without it the last are kept.
        best_epoch = int(np.argmin(valid_loss)) + 1 if n_iter_no_change is not None else len(valid_loss)
    else:
        best_epoch = len(train_loss)
    seconds = [float(v) for v in history[:, "dur"]] if len(history) else []
    return TrainingHistory(train_loss, valid_loss, best_epoch, len(train_loss), seconds)


def fit_module(
    module,
    X,
    y=None,
    *,
    loss="cross_entropy",
    max_epochs=10,
    batch_size=128,
    lr=1e-3,
    weight_decay=0.0,
    no_weight_decay=None,
    optimizer="adamw",
    lr_schedule="cosine",
    warmup_fraction=0.0,
    grad_clip=None,
    validation_fraction=None,
    stratify=False,
    n_iter_no_change=None,
    tol=1e-4,
    checkpoint_dir=None,
    device="cpu",
    seed=0,
    verbose=0,
    desc=None,
):
    """Train a torch module with skorch and return it with its history.

    The epoch loop of skicml. Supervised models pass ``y`` and a ``loss``;
    self-supervised models pass ``y=None, loss=None`` and return their loss
    from ``forward``. An estimator calls it through
    :meth:`skicml.base.TorchEstimatorMixin._fit_module`.

    Parameters
    ----------
    module : torch.nn.Module
        The model, already built. It is trained in place and returned in
        eval mode.
    X : array-like, torch.Tensor or dict of them
        Inputs; a dict is unpacked into ``module.forward(**X)``.
    y : array-like, torch.Tensor or None
        Targets, or ``None`` for self-supervised training.
    loss : str, callable, torch.nn.Module or None, default="cross_entropy"
        ``"cross_entropy"``, ``"mse"``, ``"l1"``, ``"bce_with_logits"``, any
        ``loss(output, target)`` callable, or ``None`` when ``forward``
        returns the loss itself.
    max_epochs : int, default=10
    batch_size : int, default=128
    lr : float, default=1e-3
    weight_decay : float, default=0.0
    no_weight_decay : callable or None, default=None
        ``no_weight_decay(name, parameter) -> bool`` picks the parameters
        that train without weight decay (biases and norms, say); their names
        are those of ``module.named_parameters()``. ``None`` decays all.
    optimizer : {"adamw", "adam", "sgd"} or torch.optim.Optimizer subclass
    lr_schedule : {"cosine", None}, default="cosine"
        Linear warmup over ``warmup_fraction`` of the steps, then cosine decay
        to zero (:func:`warmup_cosine`), stepped every batch.
    warmup_fraction : float, default=0.0
    grad_clip : float or None, default=None
        Clip the global gradient norm to this value.
    validation_fraction : float or None, default=None
        Hold out this share of the rows to monitor ``valid_loss``.
    stratify : bool, default=False
        Stratify the validation split on ``y`` (classification).
    n_iter_no_change : int or None, default=None
        Stop after this many epochs without improving the validation loss (by
        ``tol``) and restore the best weights. Needs ``validation_fraction``.
    tol : float, default=1e-4
    checkpoint_dir : str or path-like or None, default=None
        Save the module, optimizer and history here after every epoch. When
        the directory already holds a checkpoint, training resumes from it and
        runs only the remaining epochs of the schedule.
    device : str or torch.device, default="cpu"
    seed : int, default=0
        Seeds weight-independent randomness of training (shuffling, dropout,
        the validation split).
    verbose : int, default=0
        ``0`` is silent; ``1`` shows a progress bar over epochs.
    desc : str or None
        Label of the progress bar.

    Returns
    -------
    module : torch.nn.Module
        The trained module (unwrapped from DDP) in eval mode.
    history : TrainingHistory

    Notes
    -----
    Under ``torch.distributed`` (e.g. launched by ``torchrun``) with more than
    one process, every rank trains on an equal share of the rows with the
    module wrapped in :class:`~torch.nn.parallel.DistributedDataParallel`;
    validation losses are averaged over ranks so that early stopping agrees,
    and only rank 0 shows progress or writes checkpoints.
    """
    device = resolve_device(device)
    rank, world_size = distributed_context()
    if n_iter_no_change is not None and not validation_fraction:
        raise ValueError("n_iter_no_change needs a validation_fraction to monitor.")
    optimizer = _optimizer(optimizer)
    X, y = _shard(X, y, seed, rank, world_size)
    checkpoint = _checkpoint(checkpoint_dir)
    callbacks = _callbacks(
        total_steps=_total_steps(_n_samples(X), validation_fraction, batch_size, max_epochs),
        max_epochs=max_epochs, lr_schedule=lr_schedule, warmup_fraction=warmup_fraction,
        grad_clip=grad_clip, n_iter_no_change=n_iter_no_change, tol=tol, checkpoint=checkpoint,
        rank=rank, world_size=world_size, verbose=verbose, desc=desc,
    )
    criterion = _criterion(loss)
    train_module = _wrap_for_ddp(module, device, world_size)
    with seeded(seed, device):
        net = _neural_net(
            train_module, criterion=criterion, optimizer=_without_decay(optimizer, module, no_weight_decay),
            weight_decay=weight_decay, lr=lr,
            max_epochs=max_epochs, batch_size=batch_size, validation_fraction=validation_fraction,
            stratify=stratify, seed=seed, callbacks=callbacks, device=device,
        )
        remaining = _resume(net, checkpoint, checkpoint_dir, max_epochs)
        if remaining > 0:
            net.partial_fit(X, y, epochs=remaining)
    trained = net.module_.module if world_size > 1 else net.module_
    return trained.eval(), _history(net, n_iter_no_change)


# --------------------------------------------------------------------------
# the step loop
# --------------------------------------------------------------------------
def _batch_size(batch):
    if isinstance(batch, torch.Tensor):
        return batch.shape[0] if batch.dim() else 1
    if isinstance(batch, dict):
        for value in batch.values():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                return value.shape[0]
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0].shape[0]
    return 1


def _save_atomic(payload, path):
    tmp = f"{path}.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)


def pretrain(model, source, loss_fn, *, steps, lr, weight_decay=0.0, warmup_fraction=0.02,
             grad_clip=1.0, device="auto", amp="auto", checkpoint_path=None, checkpoint_every=500,
             callback=None, callback_every=0, max_seconds=None, meta=None, verbose=1, desc="pretrain"):
    """Pretrain ``model`` for ``steps`` optimiser steps on batches from ``source``.

    The step loop of the ``skicml pretrain`` recipes: AdamW, linear warmup
    then cosine decay (:func:`warmup_cosine`), gradient-norm clipping,
    bfloat16 autocast on CUDA, and checkpoints that resume *exactly*: model,
    optimiser, schedule, the data source's own state and the RNG state are
    saved, so an interrupted run continued from its checkpoint produces the
    same weights as an uninterrupted one. Under ``torchrun`` the model trains
    data-parallel (DDP) and rank 0 writes the checkpoints.

    Parameters
    ----------
    model : torch.nn.Module
    source : object
        ``source.sample()`` returns the next batch (a tensor, tuple or dict of
        tensors); ``state_dict()`` / ``load_state_dict()`` capture its position
        in the stream, for exact resumption.
    loss_fn : callable
        ``loss_fn(model, batch) -> scalar tensor``.
    steps : int
        Total optimiser steps of the schedule (a resumed run continues to it).
    lr, weight_decay : float
    warmup_fraction : float, default=0.02
        Share of ``steps`` with a linear learning-rate warmup.
    grad_clip : float or None, default=1.0
    device : str, default="auto"
    amp : {"auto", "bf16", None}, default="auto"
        ``"auto"`` uses bfloat16 autocast on CUDA and full precision on CPU.
    checkpoint_path : str or None
        Where to save (every ``checkpoint_every`` steps and at the end) and,
        if the file exists, where to resume from. A checkpoint resumes only
        with the ``steps``, ``lr``, ``weight_decay`` and ``warmup_fraction``
        it was started with (``ValueError`` otherwise): its optimiser and
        schedule state belong to that schedule.
    callback : callable or None
        ``callback(model, step) -> dict`` of metrics, run every
        ``callback_every`` steps (and at the end) on rank 0, in eval mode.
    max_seconds : float or None
        Stop (after checkpointing) once this much wall time has passed; a
        later call resumes.
    meta : dict or None
        Saved with the checkpoint (e.g. the recipe's arguments) and kept from
        the first run when resuming.
    verbose : int, default=1

    Returns
    -------
    dict
        ``{"step", "loss" (list), "metrics" (list of dicts), "seconds", "items"}``.
    """
    device = resolve_device(device)
    rank, world_size = distributed_context()
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(steps, int(warmup_fraction * steps))
    )
    # The optimiser state and the schedule's position are restored as saved, so a
    # resume under other schedule options would silently train on a mix of two
    # schedules (a finished run resumed with more steps trained at rate 0).
    schedule_options = {"steps": steps, "lr": lr, "weight_decay": weight_decay,
                        "warmup_fraction": warmup_fraction}
    history = {"step": 0, "loss": [], "metrics": [], "seconds": 0.0, "items": 0, "meta": dict(meta or {}),
               "schedule_options": schedule_options}

    if checkpoint_path is not None and os.path.exists(checkpoint_path):
        state = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
        saved = state["history"].get("schedule_options")  # absent in checkpoints of earlier versions
        changed = [f"{name} {saved[name]!r} -> {value!r}" for name, value in schedule_options.items()
                   if saved is not None and name in saved and saved[name] != value]
        if changed:
            raise ValueError(
                f"checkpoint_path {checkpoint_path!r} was started with other schedule options "
                f"({', '.join(changed)}); resume it with the options it was started with, or start a "
                f"new run from its weights."
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        source.load_state_dict(state["source"])
        torch.set_rng_state(state["rng"])
        history = state["history"]

    train_model = model
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        train_model = DistributedDataParallel(
            model, device_ids=[device.index or 0] if device.type == "cuda" else None
        )
    use_bf16 = (amp == "bf16") or (amp == "auto" and device.type == "cuda")

    def checkpoint():
        if checkpoint_path is not None and rank == 0:
            _save_atomic({
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "schedule": schedule.state_dict(), "source": source.state_dict(),
                "rng": torch.get_rng_state(), "history": history,
            }, checkpoint_path)

    def evaluate(step):
        if callback is None or rank != 0:
            return
        model.eval()
        with torch.no_grad():
            metrics = dict(callback(model, step), step=step)
        model.train()
        history["metrics"].append(metrics)
        return metrics

    start = time.perf_counter()
    bar = progress(total=steps, verbose=verbose if rank == 0 else 0, desc=desc, unit="step")
    bar.update(history["step"])
    model.train()
    running = None
    while history["step"] < steps:
        batch = to_device(source.sample(), device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            loss = loss_fn(train_model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"pretraining loss became {loss.item()} at step {history['step']}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        schedule.step()
        history["step"] += 1
        history["items"] += _batch_size(batch) * world_size
        value = float(loss.detach())
        history["loss"].append(value)
        running = value if running is None else 0.98 * running + 0.02 * value
        elapsed = history["seconds"] + time.perf_counter() - start
        bar.set_postfix(loss=f"{running:.4f}", items_per_s=f"{history['items'] / max(elapsed, 1e-9):.1f}",
                        refresh=False)
        bar.update(1)
        step = history["step"]
        if callback_every and step % callback_every == 0 and step < steps:
            metrics = evaluate(step)
            if metrics and verbose and rank == 0:
                bar.write(f"step {step}: " + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()
                                                        if isinstance(v, float)))
        out_of_time = max_seconds is not None and time.perf_counter() - start > max_seconds
        if step % checkpoint_every == 0 or step == steps or out_of_time:
            history["seconds"] += time.perf_counter() - start
            start = time.perf_counter()
            checkpoint()
        if out_of_time:
            break
    bar.close()
    if history["step"] >= steps and (not history["metrics"] or history["metrics"][-1].get("step") != steps):
        evaluate(history["step"])
        history["seconds"] += time.perf_counter() - start
        checkpoint()
    model.eval()
    return history
