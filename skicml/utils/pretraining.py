"""The step-based pretraining loop shared by every ``skicml pretrain`` recipe.

Estimators train on the data they are given through
:func:`skicml.base.fit_module`. Foundation models instead pretrain on an
endless stream (a synthetic prior, a corpus sampled batch by batch) for a
fixed number of optimiser steps; :func:`pretrain` is that loop:

- AdamW, linear warmup then cosine decay, gradient-norm clipping;
- bfloat16 autocast on CUDA (``amp="auto"``);
- checkpoints that resume *exactly*: model, optimiser, schedule, the data
  source's own state and the RNG states are saved, so an interrupted run
  continued from its checkpoint produces the same weights as an
  uninterrupted one;
- data-parallel training under ``torchrun`` (DDP; rank 0 writes checkpoints);
- a tqdm progress bar with the loss and items per second, and an optional
  evaluation callback whose metrics are kept in the history.
"""

from __future__ import annotations

import os
import time

import torch

from ..base import _distributed_context, _warmup_cosine, progress, resolve_device, to_device

__all__ = ["pretrain"]


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
        if the file exists, where to resume from.
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
    rank, world_size = _distributed_context()
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _warmup_cosine(steps, int(warmup_fraction * steps))
    )
    history = {"step": 0, "loss": [], "metrics": [], "seconds": 0.0, "items": 0, "meta": dict(meta or {})}

    if checkpoint_path is not None and os.path.exists(checkpoint_path):
        state = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
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
