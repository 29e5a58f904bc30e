"""The one runner of the ``skicml pretrain`` recipes, their shared options and their provenance.

A recipe is a method's pieces: how to build its network, the stream of
batches it learns from, its loss, what it measures on the way, and what it
writes at the end. :func:`run_recipe` does everything else, the same way for
every recipe, in small named steps:

1. ``--threads`` (torch's intra-op threads);
2. ``torch.distributed`` under ``torchrun``, for the recipes that run
   data-parallel (set up here, torn down at the end);
3. ``torch.manual_seed(--seed)``, then the network;
4. the data source;
5. the warm start from ``--init-from``, unless ``--checkpoint`` exists;
6. the step loop (:func:`pretrain`), which resumes from ``--checkpoint``
   exactly and stops after ``--max-minutes``;
7. on rank 0, once the last step is done: the method's final measurements
   and the export to ``--export``.

:func:`recipe_provenance` writes the standard keys of an exported file's
provenance (the recipe's command, steps, seed, threads, torch version...)
beside the method's own. :func:`add_run_options` declares the options every
recipe takes. :func:`pretrain`, the step loop, lives in
:mod:`skicml.utils.training` beside the epoch loop and stays importable from
here.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

from .._weights import load_weights, recipe_command
from ..base import resolve_device
from .training import distributed_context, pretrain

__all__ = [
    "RecipeRun",
    "add_run_options",
    "final_loss",
    "load_model_state",
    "metrics_line",
    "pretrain",
    "recipe_provenance",
    "run_recipe",
    "set_threads",
]


def add_run_options(parser, what="model"):
    """Add the options of a resumable recipe to its ``argparse`` parser.

    ``--checkpoint`` (the resumable training state, a file), ``--max-minutes``
    (stop early; a later call with the same checkpoint resumes), ``--export``
    (where to write the shippable file), ``--export-now`` (export the
    checkpoint as it is, mid-run, without training on; the provenance's
    ``steps`` are the steps it made), ``--threads`` (torch's intra-op
    threads) and ``--quiet``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    what : str, default="model"
        What the exported file holds, for the help text.

    Returns
    -------
    argparse.ArgumentParser
        ``parser``, for chaining.

    Examples
    --------
    >>> import argparse
    >>> from skicml.utils.pretraining import add_run_options
    >>> args = add_run_options(argparse.ArgumentParser()).parse_args(["--max-minutes", "5"])
    >>> args.max_minutes, args.checkpoint, args.export_now, args.quiet
    (5.0, None, False, False)
    """
    parser.add_argument("--checkpoint", default=None, help="resumable training state (a file)")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop early; a later call resumes")
    parser.add_argument("--export", default=None, help=f"write the shippable {what} file here")
    parser.add_argument("--export-now", action="store_true",
                        help="export the --checkpoint as it is, without training on to --steps")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    return parser


# --------------------------------------------------------------------------
# the run and its provenance
# --------------------------------------------------------------------------
@dataclass
class RecipeRun:
    """One call of a recipe: its options, where it runs, and what it has made so far.

    :func:`run_recipe` hands it to the method's pieces (as skorch hands the
    net to its callbacks): ``make_source`` reads ``run.model``, ``finish``
    and ``export`` read ``run.model`` and ``run.history``, ``export`` reads
    ``run.final``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options (:func:`add_run_options` and the method's own).
    name : str
        The recipe's ``RECIPE_NAME``.
    argv : list of str or None
        The recipe's arguments; ``None`` reads them from ``sys.argv`` (after
        ``skicml pretrain <name>``).

    Attributes
    ----------
    command : str
        The command line to record (:func:`skicml._weights.recipe_command`).
    rank, world_size : int
        This process among the ``torchrun`` processes (0 and 1 outside one).
    device : torch.device
    model : torch.nn.Module or None
        The network being trained, once built.
    history : dict or None
        What :func:`pretrain` returned, once it has run.
    final : object
        What the recipe's ``finish`` returned (``None`` without one).
    """

    args: object
    name: str
    argv: list = None
    command: str = field(init=False)
    rank: int = field(init=False, default=0)
    world_size: int = field(init=False, default=1)
    device: torch.device = field(init=False, default_factory=lambda: torch.device("cpu"))
    model: torch.nn.Module = field(init=False, default=None, repr=False)
    history: dict = field(init=False, default=None, repr=False)
    final: object = field(init=False, default=None, repr=False)
    _owns_process_group: bool = field(init=False, default=False, repr=False)

    def __post_init__(self):
        self.command = recipe_command(self.name, sys.argv[3:] if self.argv is None else self.argv)

    @property
    def is_main(self):
        """Whether this process reports and exports (rank 0)."""
        return self.rank == 0

    @property
    def finished(self):
        """Whether the run has made all ``--steps`` steps."""
        return self.history is not None and self.history["step"] >= self.args.steps


def final_loss(history, window=100, digits=4):
    """The mean training loss of the last ``window`` steps, rounded; ``None`` before any step.

    Examples
    --------
    >>> from skicml.utils.pretraining import final_loss
    >>> final_loss({"loss": [4.0, 2.0, 1.0, 0.5]}, window=2)
    0.75
    """
    losses = history["loss"][-window:]
    return round(float(np.mean(losses)), digits) if losses else None


def _option(name):
    return lambda run: getattr(run.args, name)


#: The standard provenance keys and how each is read from a finished run.
_STANDARD_KEYS = {
    "steps": lambda run: run.history["step"],
    "steps_planned": _option("steps"),
    "batch_size": _option("batch_size"),
    "lr": _option("lr"),
    "weight_decay": _option("weight_decay"),
    "seed": _option("seed"),
    "final_loss": lambda run: final_loss(run.history),
    "train_minutes": lambda run: round(run.history["seconds"] / 60, 1),
    "train_seconds": lambda run: round(run.history["seconds"], 1),
    "threads": lambda run: torch.get_num_threads(),
    "device": _option("device"),
    "torch": lambda run: str(torch.__version__),
}

#: The keys most recipes record.
PROVENANCE_KEYS = ("steps", "batch_size", "seed", "final_loss", "train_minutes", "threads", "torch")


def recipe_provenance(run, keys=PROVENANCE_KEYS, **fields):
    """The provenance of an exported file: the recipe, the method's fields, then the standard keys.

    Parameters
    ----------
    run : RecipeRun
        The finished run (its ``history`` is read for ``steps``,
        ``final_loss`` and the training time).
    keys : sequence of str, default=PROVENANCE_KEYS
        The standard keys to record, among ``steps``, ``steps_planned``,
        ``batch_size``, ``lr``, ``weight_decay``, ``seed``, ``final_loss``
        (the mean loss of the last 100 steps), ``train_minutes``,
        ``train_seconds``, ``threads``, ``device`` and ``torch``.
    **fields
        The method's own keys (data or prior settings, scores...). A field
        named like a standard key replaces its value (``final_loss`` over
        another window, ``recipe`` from the checkpoint's first call).

    Returns
    -------
    dict
        ``recipe`` first, then ``fields``, then ``keys``.

    Examples
    --------
    >>> import argparse
    >>> from skicml.utils.pretraining import RecipeRun, recipe_provenance
    >>> run = RecipeRun(argparse.Namespace(seed=0, steps=2), "toy", ["--steps", "2"])
    >>> run.history = {"step": 2, "loss": [1.0, 0.5], "seconds": 3.0}
    >>> recipe_provenance(run, ("steps", "seed", "final_loss"), data="three points")
    {'recipe': 'skicml pretrain toy --steps 2', 'data': 'three points', 'steps': 2, 'seed': 0, 'final_loss': 0.75}
    """
    unknown = [key for key in keys if key not in _STANDARD_KEYS]
    if unknown:
        raise ValueError(f"Unknown provenance keys {unknown}; the standard keys are {sorted(_STANDARD_KEYS)}.")
    provenance = {"recipe": fields.pop("recipe", run.command)}
    provenance.update({key: value for key, value in fields.items() if key not in keys})
    for key in keys:
        provenance[key] = fields[key] if key in fields else _STANDARD_KEYS[key](run)
    return provenance


def metrics_line(metrics, digits=3):
    """``"name value, ..."`` of one evaluation's metrics (its ``step`` left out), for ``describe=``.

    Examples
    --------
    >>> from skicml.utils.pretraining import metrics_line
    >>> metrics_line({"accuracy": 0.8125, "loss": 0.5, "step": 10})
    'accuracy 0.812, loss 0.500'
    """
    return ", ".join(f"{name} {value:.{digits}f}" for name, value in metrics.items() if name != "step")


def load_model_state(path):
    """Model weights from a shipped weights file or a :func:`pretrain` checkpoint, in float32.

    Parameters
    ----------
    path : str or path-like
        A checkpoint (its ``"model"`` entry is read), or anything
        :func:`skicml._weights.load_weights` reads (a file or a shipped name).

    Returns
    -------
    dict
        A ``state_dict``.
    """
    state = torch.load(path, map_location="cpu", weights_only=True) if os.path.exists(path) else {}
    if "model" in state:  # a checkpoint of skicml.utils.training.pretrain
        return state["model"]
    return {key: value.float() for key, value in load_weights(path)["state_dict"].items()}


# --------------------------------------------------------------------------
# the runner's steps
# --------------------------------------------------------------------------
def set_threads(args):
    """Apply ``--threads`` (torch's intra-op threads), when given.

    :func:`run_recipe` does it first; a recipe that reads or generates its
    data before calling the runner calls it at the start of ``main``, so that
    the data is made under the same threads.
    """
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)


def _start(run, distributed, device):
    """Join ``torchrun``'s process group (when ``distributed`` and launched by it) and pick the device."""
    import torch.distributed as dist

    if distributed and "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        run._owns_process_group = True
    run.rank, run.world_size = distributed_context()
    run.device = resolve_device(device)
    if run.device.type == "cuda" and run.world_size > 1:
        run.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(run.device)


def _stop(run):
    import torch.distributed as dist

    if run._owns_process_group and dist.is_initialized():
        dist.destroy_process_group()


def _build(run, build_model):
    """The network, built under ``--seed``."""
    torch.manual_seed(run.args.seed)
    return build_model(run)


def _warm_start(run, warm_start):
    """Start from ``--init-from``'s weights with a fresh schedule, unless ``--checkpoint`` already exists."""
    args = run.args
    init_from = getattr(args, "init_from", None)
    if not init_from or (args.checkpoint and os.path.exists(args.checkpoint)):
        return
    state = load_model_state(init_from)
    if warm_start is None:
        run.model.load_state_dict(state)
    else:
        warm_start(run.model, state)


def _check_export_now(args):
    """``--export-now`` needs a ``--checkpoint`` file: said before the model and its data are built."""
    if not args.checkpoint or not os.path.exists(args.checkpoint):
        raise ValueError(f"--export-now exports the --checkpoint as it is, but --checkpoint is "
                         f"{args.checkpoint!r}, which names no file.")


def _restore(run):
    """``--export-now``: the checkpoint's model and history as they are, without training."""
    state = torch.load(run.args.checkpoint, map_location="cpu", weights_only=True)
    run.model.load_state_dict(state["model"])
    run.model.eval()
    return state["history"]


def _train(run, source, loss, evaluate, schedule):
    """The step loop, resumed from ``--checkpoint`` when it exists."""
    args = run.args
    return pretrain(
        run.model, source, loss, steps=args.steps, lr=args.lr, device=run.device,
        checkpoint_path=args.checkpoint, callback=evaluate, callback_every=getattr(args, "eval_every", 0) or 0,
        max_seconds=None if args.max_minutes is None else 60 * args.max_minutes,
        meta={**vars(args), "recipe": run.command}, verbose=0 if args.quiet else 1,
        desc=f"pretrain {run.name}", **schedule,
    )


def _report(run, describe):
    """Each evaluation's line (``describe``), then whether the run stopped before its last step."""
    if describe is not None:
        for metrics in run.history["metrics"]:
            print(f"step {metrics['step']}: {describe(metrics)}", flush=True)
    if not run.finished:
        print(f"stopped at step {run.history['step']} of {run.args.steps}; run the same command again to resume",
              flush=True)


def _conclude(run, finish, export):
    """On rank 0: the method's final measurements, then the export to ``--export``."""
    run.final = finish(run) if finish is not None else None
    if run.args.export and export is not None:
        export(run)


def run_recipe(args, argv, recipe_name, *, build_model, make_source, loss, evaluate=None, describe=None,
               finish=None, export=None, warm_start=None, distributed=False, device="cpu", **schedule):
    """Run a ``skicml pretrain`` recipe: the method's pieces in the one resumable run.

    The steps, in order: ``--threads``; the ``torch.distributed`` process
    group under ``torchrun`` (``distributed=True``); ``--seed``, then
    ``build_model``; ``make_source``; the warm start from ``--init-from``
    (where the recipe has the option) unless ``--checkpoint`` exists; the
    step loop (:func:`pretrain`: ``--steps`` at ``--lr``, resumed exactly from
    ``--checkpoint``, stopped after ``--max-minutes``, ``evaluate`` every
    ``--eval-every`` steps); a line per evaluation (``describe``) or a note
    that the run stopped early; and on rank 0, once the last step is done,
    ``finish`` then ``export`` (when ``--export`` is given). The process
    group it set up is torn down at the end, whatever happens.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options: :func:`add_run_options`' and ``--steps``,
        ``--lr``, ``--seed``; ``--eval-every``, ``--init-from`` and
        ``--export-now`` (export the checkpoint as it is) where the recipe
        has them.
    argv : list of str or None
        The recipe's arguments, recorded as its command (``run.command``);
        ``None`` reads ``sys.argv``.
    recipe_name : str
        The recipe's ``RECIPE_NAME``.
    build_model : callable
        ``build_model(run) -> torch.nn.Module``, called under ``--seed``:
        the module the loop trains (a network, or an objective around one).
    make_source : callable
        ``make_source(run) -> source``, an object with ``sample()``,
        ``state_dict()`` and ``load_state_dict()`` (see :func:`pretrain`);
        ``run.model``, ``run.rank`` and ``run.device`` are set.
    loss : callable
        ``loss(model, batch) -> scalar tensor``.
    evaluate : callable or None
        ``evaluate(model, step) -> dict`` of metrics, every ``--eval-every``
        steps and at the end, on rank 0, in eval mode.
    describe : callable or None
        ``describe(metrics) -> str``: the line printed for each evaluation
        after the loop (:func:`metrics_line` is a plain one); ``None``
        prints none.
    finish : callable or None
        ``finish(run) -> object``: the method's measurements once the last
        step is done (whether or not it exports), on rank 0; kept as
        ``run.final``.
    export : callable or None
        ``export(run)`` writes ``run.model`` to ``args.export``, with
        :func:`recipe_provenance`; called on rank 0 after ``finish``.
    warm_start : callable or None
        ``warm_start(model, state)`` loads ``--init-from``'s weights
        (:func:`load_model_state`); ``None`` loads them strictly.
    distributed : bool, default=False
        Whether the recipe runs data-parallel under ``torchrun`` (its source
        draws per ``run.rank``).
    device : str, default="cpu"
        Where to train (``"auto"``: CUDA when present).
    **schedule
        Other keywords of :func:`pretrain`: ``weight_decay``,
        ``warmup_fraction``, ``grad_clip``, ``checkpoint_every``, ``amp``.

    Returns
    -------
    dict
        The loop's history (:func:`pretrain`).

    Examples
    --------
    A toy recipe: fit ``y = 2x`` from a stream of random batches, stop after
    the first step, then resume to the end and export.

    >>> import argparse, os, tempfile
    >>> import torch
    >>> from skicml.utils.pretraining import add_run_options, recipe_provenance, run_recipe
    >>> class Stream:
    ...     def __init__(self):
    ...         self.index = 0
    ...     def sample(self):
    ...         self.index += 1
    ...         x = torch.randn(8, 1, generator=torch.Generator().manual_seed(self.index))
    ...         return x, 2 * x
    ...     def state_dict(self):
    ...         return {"index": self.index}
    ...     def load_state_dict(self, state):
    ...         self.index = state["index"]
    >>> parser = add_run_options(argparse.ArgumentParser())
    >>> for option, default in (("--steps", 20), ("--lr", 0.1), ("--seed", 0)):
    ...     _ = parser.add_argument(option, type=type(default), default=default)
    >>> def export(run):
    ...     provenance = recipe_provenance(run, ("steps", "seed", "final_loss"))
    ...     torch.save({"weights": run.model.state_dict(), "provenance": provenance}, run.args.export)
    >>> folder = tempfile.mkdtemp()
    >>> argv = ["--checkpoint", os.path.join(folder, "run.ckpt"), "--export", os.path.join(folder, "toy.pt"),
    ...         "--quiet"]
    >>> def main(argv):
    ...     return run_recipe(parser.parse_args(argv), argv, "toy", build_model=lambda run: torch.nn.Linear(1, 1),
    ...                       make_source=lambda run: Stream(), loss=lambda model, batch: torch.nn.functional.mse_loss(
    ...                           model(batch[0]), batch[1]), export=export)
    >>> main(argv + ["--max-minutes", "0"])["step"]
    stopped at step 1 of 20; run the same command again to resume
    1
    >>> main(argv)["step"]
    20
    >>> provenance = torch.load(os.path.join(folder, "toy.pt"))["provenance"]
    >>> provenance["recipe"], provenance["steps"]
    ('skicml pretrain toy --checkpoint run.ckpt --export toy.pt --quiet', 20)
    """
    export_now = getattr(args, "export_now", False)
    if export_now:
        _check_export_now(args)
    set_threads(args)
    run = RecipeRun(args, recipe_name, argv)
    _start(run, distributed, device)
    try:
        run.model = _build(run, build_model)
        source = make_source(run)
        if export_now:
            run.history = _restore(run)
        else:
            _warm_start(run, warm_start)
            run.history = _train(run, source, loss, evaluate, schedule)
            if run.is_main:
                _report(run, describe)
        if run.is_main and (run.finished or export_now):
            _conclude(run, finish, export)
    finally:
        _stop(run)
    return run.history
