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
``benchmarks/bench_video_physics_world_model.py``, whose options are these
(:func:`~skicml.video._physics._evaluation.add_model_options`).
It runs through the recipes' one runner
(:func:`skicml.utils.pretraining.run_recipe`): a run stopped by
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
import tempfile

import torch

from ..._weights import save_module
from ...datasets import make_physics_eval, make_physics_videos
from ...utils.pretraining import add_run_options, final_loss, metrics_line, recipe_provenance, run_recipe, set_threads
from ._evaluation import N_COND, add_model_options, bucket_means, pretrained_model, speed_following
from ._model import VideoDiT
from ._world_model import _FlowObjective

__all__ = ["main"]

#: ``skicml pretrain physics-world-model`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "physics-world-model"

_RESOLUTION = 32


def build_parser():
    parser = argparse.ArgumentParser(prog=f"skicml pretrain {RECIPE_NAME}", description=__doc__.splitlines()[0])
    parser.add_argument("--n-videos", type=int, default=3000)
    add_model_options(parser)
    parser.add_argument("--eval-every", type=int, default=500, help="roll out the ID clips every so many steps")
    return add_run_options(parser, "network")


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


def _as_estimator(network, args, clips, folder):
    """A fitted VideoWorldModel around ``network`` (through a weights file, as users load one)."""
    path = os.path.join(folder, f"network-{len(os.listdir(folder))}.pt")
    save_module(path, network, network.config, {"weights": "an evaluation copy"}, dtype=torch.float32)
    return pretrained_model(path, args, clips)


def main(argv=None):
    args = build_parser().parse_args(argv)
    set_threads(args)  # before the clips are made, not only for the run
    train = make_physics_videos("uniform", args.n_videos, n_frames=args.n_frames, min_frames_in_view=args.n_frames,
                                random_state=args.seed)
    test = make_physics_eval("uniform", n_per_bucket=args.n_eval, n_frames=args.n_frames, random_state=args.seed + 1)
    clips = torch.as_tensor(train.videos).permute(0, 1, 4, 2, 3).float() / 127.5 - 1.0  # [-1, 1], as fit's

    def build_model(run):
        network = VideoDiT(n_frames=args.n_frames, frame_size=(_RESOLUTION, _RESOLUTION),
                           patch_size=args.patch_size, dim=args.d_model, depth=args.depth, n_heads=args.n_heads)
        return _FlowObjective(network, N_COND, args.ema_decay, args.time_sampling)

    with tempfile.TemporaryDirectory() as scratch:

        def evaluate(objective, step):
            # Forked: loading the copy draws initial weights, which must not move training's random stream.
            with torch.random.fork_rng():
                return speed_following(_as_estimator(objective.averaged_network(), args, test.videos, scratch), test)

        run_recipe(
            args, argv, RECIPE_NAME, build_model=build_model,
            make_source=lambda run: _ClipBatches(clips, args.batch_size, args.seed), loss=_flow_loss,
            evaluate=evaluate, describe=metrics_line, finish=lambda run: _score_the_grid(run, test, scratch),
            export=_export, device=args.device, warmup_fraction=0.05, grad_clip=1.0, checkpoint_every=100,
        )
    return 0


def _flow_loss(objective, clips):
    """The flow-matching loss of a batch of clips, which the objective returns."""
    return objective(clips)


def _score_the_grid(run, test, folder):
    """The averaged network's velocity error per bucket and its speed following, printed and returned."""
    averaged = run.model.finish()[1] or run.model.network
    model = _as_estimator(averaged, run.args, test.videos, folder)
    metrics = {f"vel_error_{bucket}": round(value, 4)
               for bucket, value in bucket_means(model.predict(test.videos[:, :N_COND]), test).items()}
    following = speed_following(model, test)
    print(f"velocity error per bucket: {metrics}")
    print(f"in distribution, generated against given speed: correlation {following['correlation']:.3f}, slope "
          f"{following['slope']:.3f}, means {following['v_generated_mean']:.2f} against "
          f"{following['v_true_mean']:.2f}", flush=True)
    return {"network": averaged, "metrics": metrics, "following": following}


def _export(run):
    """Write the averaged network in float16 with the data, training and evaluation it had."""
    args, history, final = run.args, run.history, run.final
    steps_per_epoch = math.ceil(args.n_videos / args.batch_size)
    provenance = recipe_provenance(
        run, ("final_loss", "train_minutes", "threads", "torch"),
        data=(f"make_physics_videos('uniform', {args.n_videos}, n_frames={args.n_frames}, "
              f"min_frames_in_view={args.n_frames}, random_state={args.seed}): 32 px, speed [1, 4], "
              f"radius [0.7, 1.4]; {N_COND} conditioning frames"),
        training=(f"{history['step']} steps ({history['step'] / steps_per_epoch:.1f} epochs) of batch "
                  f"{args.batch_size}, lr {args.lr}, {args.time_sampling} flow times, EMA "
                  f"{args.ema_decay}, seed {args.seed}; weights: the EMA, float16"),
        final_loss=final_loss(history, window=50),
        evaluation=(f"make_physics_eval('uniform', n_per_bucket={args.n_eval}, n_frames={args.n_frames}, "
                    f"random_state={args.seed + 1}), {args.sampling_steps} Euler steps, velocity error "
                    "(units/s) per bucket; speed correlation over the id clips"),
        metrics=final["metrics"],
        speed_following_id={"correlation": round(final["following"]["correlation"], 4),
                            "slope": round(final["following"]["slope"], 4)},
        sampling_steps=args.sampling_steps,
    )
    averaged = final["network"]
    digest = save_module(args.export, averaged, averaged.config, provenance, dtype=torch.float16)
    print(f"wrote {args.export} (sha256 {digest})")
