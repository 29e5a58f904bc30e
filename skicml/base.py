"""Shared machinery of every torch-backed skicml estimator.

An estimator mixes :class:`TorchEstimatorMixin` into the usual scikit-learn
bases and calls the helpers below from ``fit``; it never re-implements device
handling, seeding, persistence or the training loop.

- :func:`resolve_device` turns ``device="auto"`` into CUDA when present.
- :func:`seed_from_random_state` and :func:`seeded` make torch reproducible
  from a scikit-learn ``random_state`` without touching the global RNG state
  that the caller sees.
- :func:`to_tensor` / :func:`resolve_dtype` convert validated arrays.
- :class:`TorchEstimatorMixin` pickles fitted modules on the CPU, so an
  estimator fitted on a GPU loads on a machine without one.
- :func:`progress` is the one progress bar (tqdm, silenced by ``verbose=0``).
- :func:`fit_module` is the one supervised / self-supervised training loop,
  built on skorch (callbacks for early stopping, learning-rate schedules,
  gradient clipping and resumable checkpoints) and DDP-aware.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.utils import Tags, check_random_state

__all__ = [
    "SkicmlTags",
    "TorchEstimatorMixin",
    "TrainingHistory",
    "as_skicml_tags",
    "fit_module",
    "progress",
    "resolve_device",
    "resolve_dtype",
    "seed_from_random_state",
    "seeded",
    "to_device",
    "to_tensor",
]


# --------------------------------------------------------------------------
# device, seeds, dtypes
# --------------------------------------------------------------------------
def resolve_device(device="auto"):
    """Return the :class:`torch.device` an estimator should compute on.

    Parameters
    ----------
    device : {"auto", "cpu", "cuda"}, str or torch.device, default="auto"
        ``"auto"`` picks the first CUDA device when one is available and the
        CPU otherwise. Any string torch understands (``"cuda:1"``) is accepted.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the string is not a device, or CUDA is requested on a machine
        without it.
    """
    if device is None or (isinstance(device, str) and device == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device={device!r} is not a device; expected 'auto', 'cpu', "
            "'cuda', 'cuda:<index>' or a torch.device."
        ) from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} asks for CUDA but torch sees no GPU on this "
            "machine; pass device='cpu' or device='auto'."
        )
    return resolved


def seed_from_random_state(random_state):
    """Draw a torch seed from a scikit-learn ``random_state``.

    ``None`` gives a fresh seed, an int always the same seed, and a
    :class:`numpy.random.RandomState` advances as scikit-learn expects.
    """
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


@contextlib.contextmanager
def seeded(seed, device=None):
    """Run a block under a fixed torch seed, restoring the global RNG after.

    Dropout, ``randperm`` and data shuffling inside the block are then
    reproducible, while code outside it sees an untouched random stream.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    cuda_devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda_devices, device_type="cuda"):
        torch.manual_seed(seed)
        np_state = np.random.get_state()
        try:
            yield
        finally:
            np.random.set_state(np_state)


_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def resolve_dtype(dtype):
    """Map ``"float32"``, ``np.float64``, ``torch.float32``... to a torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    except TypeError:
        name = str(dtype)
    if name not in _DTYPES:
        raise ValueError(
            f"dtype={dtype!r} is not supported; expected one of {sorted(_DTYPES)}."
        )
    return _DTYPES[name]


def to_tensor(X, *, dtype=None, device="cpu"):
    """Turn a validated array (or a dict of arrays) into torch tensors.

    Arrays are made contiguous first so read-only or memory-mapped inputs are
    copied rather than shared with torch.
    """
    if isinstance(X, dict):
        return {k: to_tensor(v, dtype=dtype, device=device) for k, v in X.items()}
    if isinstance(X, torch.Tensor):
        tensor = X
    else:
        array = np.asarray(X)
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, order="C", copy=True)
        tensor = torch.from_numpy(array)
    if dtype is not None and tensor.is_floating_point():
        tensor = tensor.to(resolve_dtype(dtype))
    return tensor.to(device)


# --------------------------------------------------------------------------
# tags and the estimator mixin
# --------------------------------------------------------------------------
@dataclass(slots=True)
class SkicmlTags(Tags):
    """scikit-learn's :class:`~sklearn.utils.Tags` plus skicml's own fields.

    Attributes
    ----------
    expected_failed_checks : dict of str to str
        scikit-learn common checks this estimator cannot pass, each mapped to
        the reason. The common test suite marks them as expected failures.
    three_d_input : bool
        The estimator also reads 3-D arrays ``(n_samples, n_steps,
        n_channels)`` (weeks of hourly variables, for one), so skicml's checks
        do not expect such input to be rejected.
    """

    expected_failed_checks: dict = field(default_factory=dict)
    three_d_input: bool = False


def as_skicml_tags(tags):
    """``tags`` as :class:`SkicmlTags` (for estimators without :class:`TorchEstimatorMixin`)."""
    if isinstance(tags, SkicmlTags):
        return tags
    values = {f.name: getattr(tags, f.name) for f in dataclasses.fields(tags)}
    return SkicmlTags(**values)


def to_device(value, device):
    """``value`` with every torch module and tensor nested in it (dicts,
    lists, tuples) on ``device``; nothing is copied that is already there,
    and modules are copied rather than moved, so the caller's stay put."""
    device = torch.device(device)
    if isinstance(value, torch.nn.Module):
        if any(t.device != device for t in value.state_dict().values()):
            return copy.deepcopy(value).to(device)
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


class TorchEstimatorMixin:
    """Device, seeding and persistence for estimators that hold torch state.

    Put it leftmost: ``class MyClassifier(TorchEstimatorMixin, ClassifierMixin,
    BaseEstimator)``. Subclasses are expected to have ``device`` and
    ``random_state`` constructor parameters (and usually ``verbose``).

    Fitted torch modules and tensors stored in attributes are pickled on the
    CPU, so an estimator fitted on a GPU unpickles on a machine without one;
    :meth:`_device` moves them back when predicting.
    """

    def __sklearn_tags__(self):
        tags = as_skicml_tags(super().__sklearn_tags__())
        tags.expected_failed_checks = dict(tags.expected_failed_checks)
        return tags

    def _device(self):
        return resolve_device(getattr(self, "device", "auto"))

    def _seed(self):
        """The torch seed of this fit, drawn once from ``random_state``."""
        return seed_from_random_state(getattr(self, "random_state", None))

    def __getstate__(self):
        state = super().__getstate__()
        return to_device(state, "cpu")


# --------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------
def progress(iterable=None, *, verbose=0, total=None, desc=None, unit="it"):
    """The progress bar of skicml: tqdm, shown only when ``verbose > 0``."""
    from tqdm.auto import tqdm

    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        disable=not verbose,
        leave=verbose > 1,
        dynamic_ncols=True,
    )


# --------------------------------------------------------------------------
# the training loop
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


def _warmup_cosine(total_steps, warmup_steps, final_factor=0.0):
    def factor(step):
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        progress_ = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        progress_ = min(max(progress_, 0.0), 1.0)
        return final_factor + (1 - final_factor) * 0.5 * (1 + math.cos(math.pi * progress_))

    return factor


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


def _distributed_context():
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


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

    The single training loop of skicml. Supervised models pass ``y`` and a
    ``loss``; self-supervised models pass ``y=None, loss=None`` and return
    their loss from ``forward``.

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
    optimizer : {"adamw", "adam", "sgd"} or torch.optim.Optimizer subclass
    lr_schedule : {"cosine", None}, default="cosine"
        Linear warmup over ``warmup_fraction`` of the steps, then cosine decay
        to zero, stepped every batch.
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
    from skorch import NeuralNet
    from skorch.callbacks import (
        Callback,
        Checkpoint,
        EarlyStopping,
        GradientNormClipping,
        LRScheduler,
    )
    from skorch.dataset import ValidSplit

    device = resolve_device(device)
    rank, world_size = _distributed_context()
    if n_iter_no_change is not None and not validation_fraction:
        raise ValueError("n_iter_no_change needs a validation_fraction to monitor.")
    if isinstance(optimizer, str):
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r}; expected one of {sorted(_OPTIMIZERS)}.")
        optimizer = _OPTIMIZERS[optimizer]

    n_samples = _n_samples(X)
    if world_size > 1:
        # Each rank takes an equal share so every rank runs the same number of
        # batches: DDP hangs if one rank makes a step the others do not.
        order = np.random.RandomState(seed).permutation(n_samples)
        per_rank = n_samples // world_size
        shard = np.sort(order[rank * per_rank:(rank + 1) * per_rank])
        X, y = _take(X, shard), _take(y, shard)
        n_samples = per_rank

    n_train = n_samples - (math.ceil(n_samples * validation_fraction) if validation_fraction else 0)
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    total_steps = steps_per_epoch * max_epochs

    class SyncedValidLoss(Callback):
        def on_epoch_end(self, net, **kwargs):
            if world_size > 1 and "valid_loss" in net.history[-1]:
                import torch.distributed as dist

                value = torch.tensor([net.history[-1, "valid_loss"]], dtype=torch.float64)
                dist.all_reduce(value)
                net.history.record("valid_loss", float(value) / world_size)
                best = min(net.history[:, "valid_loss"])
                net.history.record("valid_loss_best", float(value) / world_size <= best)

    class EpochProgress(Callback):
        def on_train_begin(self, net, **kwargs):
            done = len(net.history)
            self.bar_ = progress(
                total=max_epochs, verbose=verbose if rank == 0 else 0, desc=desc, unit="epoch"
            )
            self.bar_.update(done)

        def on_epoch_end(self, net, **kwargs):
            row = net.history[-1]
            postfix = {"loss": f"{row['train_loss']:.4g}"}
            if "valid_loss" in row:
                postfix["valid"] = f"{row['valid_loss']:.4g}"
            self.bar_.set_postfix(postfix, refresh=False)
            self.bar_.update(1)

        def on_train_end(self, net, **kwargs):
            self.bar_.close()

    callbacks = [("synced_valid_loss", SyncedValidLoss())]
    if lr_schedule == "cosine":
        callbacks.append((
            "lr_schedule",
            LRScheduler(
                policy=torch.optim.lr_scheduler.LambdaLR,
                lr_lambda=_warmup_cosine(total_steps, int(warmup_fraction * total_steps)),
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
    checkpoint = None
    if checkpoint_dir is not None:
        checkpoint = Checkpoint(
            dirname=os.fspath(checkpoint_dir), monitor=None, f_criterion=None,
            f_pickle=None, load_best=False, sink=lambda *a: None,
        )
        if rank == 0:
            callbacks.append(("checkpoint", checkpoint))
    callbacks.append(("progress", EpochProgress()))

    criterion = _criterion(loss)
    if world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        module = module.to(device)
        train_module = DistributedDataParallel(
            module, device_ids=[device.index or 0] if device.type == "cuda" else None
        )
    else:
        train_module = module

    if validation_fraction:
        split = ValidSplit(validation_fraction, stratified=stratify, random_state=seed)
    else:
        split = None

    with seeded(seed, device):
        net = NeuralNet(
            module=train_module,
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
        net.initialize()
        resumed = False
        if checkpoint is not None and os.path.exists(
            os.path.join(os.fspath(checkpoint_dir), "history.json")
        ):
            net.load_params(checkpoint=checkpoint)
            resumed = True
        remaining = max_epochs - len(net.history) if resumed else max_epochs
        if remaining > 0:
            net.partial_fit(X, y, epochs=remaining)

    trained = net.module_
    if world_size > 1:
        trained = trained.module
    trained.eval()

    train_loss = [float(v) for v in net.history[:, "train_loss"]] if len(net.history) else []
    valid_loss = (
        [float(v) for v in net.history[:, "valid_loss"]]
        if len(net.history) and "valid_loss" in net.history[-1]
        else []
    )
    if valid_loss:
        best_epoch = int(np.argmin(valid_loss)) + 1 if n_iter_no_change is not None else len(valid_loss)
    else:
        best_epoch = len(train_loss)
    seconds = [float(v) for v in net.history[:, "dur"]] if len(net.history) else []
    return trained, TrainingHistory(train_loss, valid_loss, best_epoch, len(train_loss), seconds)
