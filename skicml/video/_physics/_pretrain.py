r"""``skicml pretrain physics-world-model``: train the shipped VideoWorldModel on 32-px uniform motion.

The recipe behind ``skicml/video/_weights/``::

    skicml pretrain physics-world-model --steps 3200 --threads 1 --checkpoint run.ckpt --max-minutes 240 \
        --export physics_world_model_uniform32.pt

(again with the same ``--checkpoint`` if it stopped: it resumes).

It trains the network of :class:`~skicml.video.VideoWorldModel` with the
objective, optimiser and schedule of its ``fit`` (flow matching with
logit-normal times on the generated frames, an EMA of the weights, AdamW
with a 5% warm-up then cosine decay, gradient norms clipped at 1) on 3,000
clips of uniform motion in distribution, 3 + 5 frames at 32 px, patch 8,
width 64, depth 2: the settings of
``benchmarks/bench_video_physics_world_model.py``, whose options are these.
It runs in the resumable step loop of the recipes
(:func:`skicml.utils.pretraining.pretrain`): a run stopped by
``--max-minutes`` (or killed) continues from ``--checkpoint`` to the same
weights. Every ``--eval-every`` steps, and at the end, the averaged network
rolls out the in-distribution clips of the official evaluation grid: the
velocity error and the correlation of the generated speed with the given
one, which tells whether the model reads the speed from the conditioning
frames. At the end the whole grid is scored per bucket, and ``--export``
writes the averaged weights in float16 with that provenance.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch

from ..._weights import recipe_command, save_module
from ...datasets import make_physics_eval, make_physics_videos
from ...utils.pretraining import add_run_options, pretrain
from ._evaluation import infer_attributes, summarize_by_bucket, velocity_error
from ._model import TIME_SAMPLINGS, VideoDiT
from ._world_model import VideoWorldModel, _FlowObjective

__all__ = ["add_model_options", "bucket_means", "main", "pretrained_model", "recipe_model", "speed_following"]

#: ``skicml pretrain physics-world-model`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "physics-world-model"

N_COND = 3
BUCKETS = ("id", "r_out", "v_out", "rv_out", "zero")
_RESOLUTION = 32


def add_model_options(parser):
    """The model's and the evaluation's options, shared by this recipe and the benchmark."""
    parser.add_argument("--steps", type=int, default=1000, help="optimiser steps")
    parser.add_argument("--n-frames", type=int, default=8, help="frames per clip, 3 of them given")
    parser.add_argument("--patch-size", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--time-sampling", default="logit_normal", choices=TIME_SAMPLINGS)
    parser.add_argument("--sampling-steps", type=int, default=10)
    parser.add_argument("--n-eval", type=int, default=30, help="clips per evaluation bucket")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    return parser


def build_parser():
    parser = argparse.ArgumentParser(prog=f"skicml pretrain {RECIPE_NAME}", description=__doc__.splitlines()[0])
    parser.add_argument("--n-videos", type=int, default=3000)
    add_model_options(parser)
    parser.add_argument("--eval-every", type=int, default=500, help="roll out the ID clips every so many steps")
    return add_run_options(parser, "network")


def recipe_model(args, n_videos, **extra):
    """The estimator of these options for ``n_videos`` training clips (the benchmark's, too).

    ``fit`` runs whole epochs: ``--steps`` rounded to epochs of
    ``ceil(n_videos / batch_size)`` steps.
    """
    steps_per_epoch = math.ceil(n_videos / args.batch_size)
    return VideoWorldModel(patch_size=args.patch_size, d_model=args.d_model, depth=args.depth,
                           n_heads=args.n_heads, n_sampling_steps=args.sampling_steps,
                           time_sampling=args.time_sampling, ema_decay=args.ema_decay,
                           max_epochs=max(1, round(args.steps / steps_per_epoch)), batch_size=args.batch_size,
                           lr=args.lr, device=args.device, random_state=args.seed, **extra)


def bucket_means(future, test, scenario="uniform", column="vel_error"):
    """Mean ``column`` of :func:`velocity_error` per bucket of the evaluation grid ``test``."""
    errors = velocity_error(future, test.params, scenario, n_cond_frames=N_COND, states_true=test.states)
    summary = summarize_by_bucket(errors, columns=[column])[column]["mean"]
    return {bucket: float(summary.get(bucket, np.nan)) for bucket in BUCKETS}


def speed_following(model, test):
    """Does the generated speed follow the given one? Over the grid's in-distribution clips.

    The correlation of the parsed speed of the rollouts with the true one,
    the slope of the generated speed on the true one (1 when it follows, 0
    when it ignores it: a correlation alone can be high between two nearly
    constant speeds), both means, and the velocity error.
    """
    inside = (test.params["bucket"] == "id").to_numpy()
    full = model.predict(test.videos[inside, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND, colors=["red"])["velocity"].to_numpy()
    true = test.params["v1"].to_numpy()[inside]
    found = np.isfinite(generated)
    errors = velocity_error(full, test.params[inside], "uniform", n_cond_frames=N_COND,
                            states_true=test.states[inside])
    correlation, slope = np.nan, np.nan
    if found.sum() > 2:
        correlation = np.corrcoef(true[found], generated[found])[0, 1]
        slope = np.polyfit(true[found], generated[found], 1)[0]
    return {"correlation": float(correlation), "slope": float(slope), "v_true_mean": float(true.mean()),
            "v_generated_mean": float(np.mean(generated[found])) if found.any() else float("nan"),
            "vel_error_id": float(errors["vel_error"].mean())}


class _ClipBatches:
    """Batches of training clips, each clip once an epoch in a fresh order; resumable."""

    def __init__(self, clips, batch_size, seed):
        self.clips, self.batch_size = clips, int(batch_size)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.order, self.position = torch.randperm(len(clips), generator=self.generator), 0

    def sample(self):
        if self.position >= len(self.order):
            self.order, self.position = torch.randperm(len(self.clips), generator=self.generator), 0
        index = self.order[self.position:self.position + self.batch_size]
        self.position += len(index)
        return self.clips[index]

    def state_dict(self):
        return {"generator": self.generator.get_state(), "order": self.order, "position": self.position}

    def load_state_dict(self, state):
        self.generator.set_state(state["generator"])
        self.order, self.position = state["order"], int(state["position"])


def pretrained_model(source, args, clips):
    """VideoWorldModel with the network of a weights file as it is, sampling as these options say.

    ``source`` is a shipped name or a file; ``clips`` (whole clips) only
    give ``fit`` the layout.
    """
    model = VideoWorldModel(pretrained=source, max_epochs=0, n_sampling_steps=args.sampling_steps,
                            batch_size=args.batch_size, device=args.device, random_state=args.seed)
    return model.fit(clips[:, :N_COND], clips[:, N_COND:])


def _as_estimator(network, args, clips, folder):
    """A fitted VideoWorldModel around ``network`` (through a weights file, as users load one)."""
    path = os.path.join(folder, f"network-{len(os.listdir(folder))}.pt")
    save_module(path, network, network.config, {"weights": "an evaluation copy"}, dtype=torch.float32)
    return pretrained_model(path, args, clips)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    train = make_physics_videos("uniform", args.n_videos, n_frames=args.n_frames, min_frames_in_view=args.n_frames,
                                random_state=args.seed)
    test = make_physics_eval("uniform", n_per_bucket=args.n_eval, n_frames=args.n_frames, random_state=args.seed + 1)
    clips = torch.as_tensor(train.videos).permute(0, 1, 4, 2, 3).float() / 127.5 - 1.0  # [-1, 1], as fit's
    torch.manual_seed(args.seed)
    network = VideoDiT(n_frames=args.n_frames, frame_size=(_RESOLUTION, _RESOLUTION), patch_size=args.patch_size,
                       dim=args.d_model, depth=args.depth, n_heads=args.n_heads)
    objective = _FlowObjective(network, N_COND, args.ema_decay, args.time_sampling)
    scratch = tempfile.TemporaryDirectory()

    def evaluate(module, step):
        # Forked: loading the copy draws initial weights, which must not move training's random stream.
        with torch.random.fork_rng():
            return speed_following(_as_estimator(module.averaged_network(), args, test.videos, scratch.name), test)

    history = pretrain(
        objective, _ClipBatches(clips, args.batch_size, args.seed), lambda model, batch: model(batch),
        steps=args.steps, lr=args.lr, warmup_fraction=0.05, grad_clip=1.0, device=args.device,
        checkpoint_path=args.checkpoint, checkpoint_every=100, callback=evaluate, callback_every=args.eval_every,
        max_seconds=None if args.max_minutes is None else 60 * args.max_minutes, meta=vars(args),
        verbose=0 if args.quiet else 1, desc=RECIPE_NAME,
    )
    for metrics in history["metrics"]:
        print(f"step {metrics['step']}: " + ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k != "step"),
              flush=True)
    if history["step"] < args.steps:
        print(f"stopped at step {history['step']} of {args.steps}; run again with the same --checkpoint to "
              "resume", flush=True)
        return 0
    averaged = objective.finish()[1] or objective.network
    model = _as_estimator(averaged, args, test.videos, scratch.name)
    metrics = {f"vel_error_{bucket}": round(value, 4)
               for bucket, value in bucket_means(model.predict(test.videos[:, :N_COND]), test).items()}
    following = speed_following(model, test)
    print(f"velocity error per bucket: {metrics}")
    print(f"in distribution, generated against given speed: correlation {following['correlation']:.3f}, slope "
          f"{following['slope']:.3f}, means {following['v_generated_mean']:.2f} against "
          f"{following['v_true_mean']:.2f}", flush=True)
    if args.export:
        steps_per_epoch = math.ceil(args.n_videos / args.batch_size)
        provenance = {
            "recipe": recipe_command(RECIPE_NAME, sys.argv[3:] if argv is None else argv),
            "data": (f"make_physics_videos('uniform', {args.n_videos}, n_frames={args.n_frames}, "
                     f"min_frames_in_view={args.n_frames}, random_state={args.seed}): 32 px, speed [1, 4], "
                     f"radius [0.7, 1.4]; {N_COND} conditioning frames"),
            "training": (f"{history['step']} steps ({history['step'] / steps_per_epoch:.1f} epochs) of batch "
                         f"{args.batch_size}, lr {args.lr}, {args.time_sampling} flow times, EMA "
                         f"{args.ema_decay}, seed {args.seed}; weights: the EMA, float16"),
            "final_loss": round(float(np.mean(history["loss"][-50:])), 4),
            "train_minutes": round(history["seconds"] / 60, 1),
            "threads": torch.get_num_threads(),
            "evaluation": (f"make_physics_eval('uniform', n_per_bucket={args.n_eval}, n_frames={args.n_frames}, "
                           f"random_state={args.seed + 1}), {args.sampling_steps} Euler steps, velocity error "
                           "(units/s) per bucket; speed correlation over the id clips"),
            "metrics": metrics,
            "speed_following_id": {"correlation": round(following["correlation"], 4),
                                   "slope": round(following["slope"], 4)},
            "sampling_steps": args.sampling_steps,
            "torch": str(torch.__version__),
        }
        digest = save_module(args.export, averaged, averaged.config, provenance, dtype=torch.float16)
        print(f"wrote {args.export} (sha256 {digest})")
    scratch.cleanup()
    return 0
