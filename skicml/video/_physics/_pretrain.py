"""``skicml pretrain physics-world-model``: train the shipped VideoWorldModel on 32-px uniform motion.

The recipe behind ``skicml/video/_weights/``::

    skicml pretrain physics-world-model --export physics_world_model_uniform32.pt

It fits :class:`~skicml.video.VideoWorldModel` with the settings of
``benchmarks/bench_video_physics_world_model.py`` (3,000 clips of uniform
motion in distribution, 3 + 5 frames at 32 px, patch 8, width 64, depth 2,
about 1,000 steps of 32 clips; 20-30 minutes on one CPU thread), scores it
on the official ID / OOD grid and writes its averaged weights in float16.
The fit is deterministic for a seed on the CPU, so ``--fitted`` can export
the model the benchmark saved (``--save-models``) instead of training it
again; the settings are checked to be the recipe's.
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys

import torch

from ..._weights import recipe_command, save_module
from ...datasets import make_physics_eval, make_physics_videos
from ._evaluation import summarize_by_bucket, velocity_error
from ._world_model import VideoWorldModel

__all__ = ["main"]

#: ``skicml pretrain physics-world-model`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "physics-world-model"

N_COND = 3


def build_parser():
    parser = argparse.ArgumentParser(prog=f"skicml pretrain {RECIPE_NAME}", description=__doc__.splitlines()[0])
    parser.add_argument("--n-videos", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--n-frames", type=int, default=8)
    parser.add_argument("--patch-size", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--sampling-steps", type=int, default=10)
    parser.add_argument("--n-eval", type=int, default=30, help="clips per evaluation bucket")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--fitted", default=None, help="a pickled VideoWorldModel fitted with these settings")
    parser.add_argument("--export", required=True, help="where to write the weights file")
    return parser


def recipe_model(args):
    """The estimator the recipe fits (and the benchmark's, for the same arguments)."""
    steps_per_epoch = math.ceil(args.n_videos / args.batch_size)
    return VideoWorldModel(patch_size=args.patch_size, d_model=args.d_model, depth=args.depth,
                           n_heads=args.n_heads, n_sampling_steps=args.sampling_steps, ema_decay=args.ema_decay,
                           max_epochs=max(1, round(args.steps / steps_per_epoch)), batch_size=args.batch_size,
                           lr=args.lr, device=args.device, random_state=args.seed)


def main(argv=None):
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    model = recipe_model(args)
    if args.fitted:
        with open(args.fitted, "rb") as handle:
            fitted = pickle.load(handle)
        wanted = model.get_params()
        found = {key: getattr(fitted, key, wanted[key]) for key in wanted}
        differing = {key: (found[key], wanted[key]) for key in wanted
                     if key not in ("device", "verbose") and found[key] != wanted[key]}
        if differing or getattr(fitted, "n_cond_frames_", None) != N_COND:
            raise ValueError(f"--fitted was fitted with other settings than the recipe's: {differing}.")
        model = fitted
    else:
        train = make_physics_videos("uniform", args.n_videos, n_frames=args.n_frames,
                                    min_frames_in_view=args.n_frames, random_state=args.seed)
        model.fit(train.videos[:, :N_COND], train.videos[:, N_COND:])
    test = make_physics_eval("uniform", n_per_bucket=args.n_eval, n_frames=args.n_frames,
                             random_state=args.seed + 1)
    network = model.ema_module_ if model.ema_module_ is not None else model.module_
    future = model.predict(test.videos[:, :N_COND])
    errors = velocity_error(future, test.params, "uniform", n_cond_frames=N_COND, states_true=test.states)
    summary = summarize_by_bucket(errors, columns=["vel_error"])["vel_error"]["mean"]
    metrics = {f"vel_error_{bucket}": round(float(value), 4) for bucket, value in summary.items()}
    height, width, channels = model.frame_shape_
    config = {"n_frames": int(model.n_cond_frames_ + model.n_future_frames_), "frame_size": [height, width],
              "channels": channels, "patch_size": args.patch_size, "dim": args.d_model, "depth": args.depth,
              "n_heads": args.n_heads, "mlp_ratio": 4.0}
    arguments = list(sys.argv[3:] if argv is None else argv)
    if args.fitted:
        # The recorded command retrains; --fitted only spared this run the training.
        at = next(i for i, a in enumerate(arguments) if a.startswith("--fitted"))
        del arguments[at:at + (1 if "=" in arguments[at] else 2)]
    provenance = {
        "recipe": recipe_command(RECIPE_NAME, arguments),
        "trained_by": ("benchmarks/bench_video_physics_world_model.py --save-models, the same fit" if args.fitted
                       else "this recipe"),
        "data": (f"make_physics_videos('uniform', {args.n_videos}, n_frames={args.n_frames}, "
                 f"min_frames_in_view={args.n_frames}, random_state={args.seed}): 32 px, speed [1, 4], "
                 f"radius [0.7, 1.4]; {N_COND} conditioning frames"),
        "training": (f"{model.n_iter_} epochs of {math.ceil(args.n_videos / args.batch_size)} steps, batch "
                     f"{args.batch_size}, lr {args.lr}, EMA {args.ema_decay}, seed {args.seed}; weights: the EMA, "
                     "float16"),
        "final_loss": round(float(model.loss_curve_[-1]), 4),
        "evaluation": (f"make_physics_eval('uniform', n_per_bucket={args.n_eval}, n_frames={args.n_frames}, "
                       f"random_state={args.seed + 1}), {args.sampling_steps} Euler steps, velocity error "
                       "(units/s) per bucket"),
        "metrics": metrics,
        "sampling_steps": args.sampling_steps,
    }
    digest = save_module(args.export, network, config, provenance, dtype=torch.float16)
    print(f"wrote {args.export} (sha256 {digest})")
    print(f"velocity error per bucket: {metrics}")
    return 0
