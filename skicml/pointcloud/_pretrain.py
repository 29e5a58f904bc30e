"""``skicml pretrain pointcloud``: pretrain the shipped tiny Point-MAE backbone.

The recipe behind ``skicml/pointcloud/_weights/``::

    skicml pretrain pointcloud --steps 3000 --checkpoint run.pt          # resumable
    skicml pretrain pointcloud --steps 3000 --checkpoint run.pt --export tiny_pointmae.pt

Masked point modelling (Point-MAE) on an endless stream of clean primitive
shapes (:func:`skicml.datasets.make_point_clouds`, variant ``"obj_only"``,
rotations over SO(3)); every batch is new clouds, so the backbone never sees
a cloud twice. Resuming from ``--checkpoint`` continues the same run
exactly. The backbone is judged the way it is used: a linear probe on its
frozen features, on held-out clouds of the clean and of the "hardest"
variant, beside the same probe on a backbone with random weights; both land
in the exported file's provenance.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from .._weights import save_module
from ..base import seeded
from ..datasets import make_point_clouds
from ..utils.pretraining import add_run_options, final_loss, recipe_provenance, run_recipe
from ._input import normalize_point_clouds
from ._model import PointMAE, PointMAEBackbone

__all__ = ["main", "probe_report"]

#: ``skicml pretrain pointcloud`` (found by :func:`skicml.utils.discovery.all_pretrain_recipes`).
RECIPE_NAME = "pointcloud"


class _CloudStream:
    """Fresh clouds every batch, seeded by the batch's position in the stream (exact resumption)."""

    def __init__(self, batch_size, n_points, variant, rotation, seed):
        self.batch_size, self.n_points, self.variant, self.rotation = batch_size, n_points, variant, rotation
        self.seed = seed
        self.position = 0

    def sample(self):
        data = make_point_clouds(self.batch_size, n_points=self.n_points, variant=self.variant,
                                 rotation=self.rotation, random_state=np.random.RandomState([self.seed, self.position]))
        self.position += 1
        return torch.as_tensor(normalize_point_clouds(data.points), dtype=torch.float32)

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = int(state["position"])


def _features(backbone, clouds, batch_size=64):
    out = []
    backbone.eval()
    with torch.inference_mode():
        for start in range(0, len(clouds), batch_size):
            tokens = backbone(torch.as_tensor(clouds[start:start + batch_size], dtype=torch.float32))
            out.append(torch.cat([tokens.amax(dim=1), tokens.mean(dim=1)], dim=-1).double())
    return torch.cat(out).numpy()


def probe_report(backbone, n_train=1000, n_test=500, n_points=512, seed=12345):
    """Linear-probe accuracy of a backbone's frozen features on held-out clouds, per variant.

    Parameters
    ----------
    backbone : PointMAEBackbone
    n_train, n_test : int
        Clouds to fit and to score the probe on (different seeds, balanced classes).
    n_points : int
    seed : int

    Returns
    -------
    dict
        ``{variant: accuracy}`` for ``"obj_only"`` and ``"hardest"``.
    """
    scores = {}
    for variant in ("obj_only", "hardest"):
        train = make_point_clouds(n_train, n_points=n_points, variant=variant, random_state=seed)
        test = make_point_clouds(n_test, n_points=n_points, variant=variant, random_state=seed + 1)
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=0.5))
        probe.fit(_features(backbone, normalize_point_clouds(train.points)), train.target)
        scores[variant] = float(probe.score(_features(backbone, normalize_point_clouds(test.points)),
                                            test.target))
    return scores


def build_parser():
    parser = argparse.ArgumentParser(prog="skicml pretrain pointcloud", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--n-points", type=int, default=512)
    parser.add_argument("--n-groups", type=int, default=64)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--trans-dim", type=int, default=128)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--decoder-depth", type=int, default=2)
    parser.add_argument("--mask-ratio", type=float, default=0.6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--variant", default="obj_only", choices=["obj_only", "obj_bg", "hardest"])
    parser.add_argument("--rotation", default="so3", choices=["y", "so3"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe-clouds", type=int, default=1000, help="training clouds of the linear probes")
    return add_run_options(parser, "backbone")


def main(argv=None):
    args = build_parser().parse_args(argv)

    def backbone():
        return PointMAEBackbone(args.trans_dim, args.depth, args.heads, args.n_groups, args.group_size)

    def build_model(run):
        # Under its own seed (the global generator is the runner's, for masks and stochastic depth), so
        # that the random-weights baseline below starts where the pretrained backbone did.
        with seeded(args.seed):
            return PointMAE(backbone(), args.mask_ratio, args.decoder_depth, args.heads)

    def probes(run):
        with seeded(args.seed):
            random_backbone = backbone()
        return _probe_against_random_weights(run, random_backbone)

    def export(run):
        config = {k: v for k, v in run.model.backbone.config.items() if k not in ("num_group", "group_size")}
        provenance = recipe_provenance(
            run,
            data=dict(generator="make_point_clouds", variant=args.variant, rotation=args.rotation,
                      n_points=args.n_points, clouds=run.history["items"]),
            grouping=dict(num_group=args.n_groups, group_size=args.group_size),
            final_loss=final_loss(run.history, window=50, digits=5), linear_probe=run.final,
            wall_minutes_this_call=round((time.perf_counter() - start) / 60, 1),
        )
        digest = save_module(args.export, run.model.backbone, config, provenance, dtype=torch.float16)
        print(f"wrote {args.export} (sha256 {digest})")

    start = time.perf_counter()
    run_recipe(
        args, argv, RECIPE_NAME, build_model=build_model,
        make_source=lambda run: _CloudStream(args.batch_size, args.n_points, args.variant, args.rotation, args.seed),
        loss=_masked_point_loss, finish=probes, export=export,
        weight_decay=args.weight_decay, warmup_fraction=0.05, grad_clip=10.0, checkpoint_every=100,
    )
    return 0


def _masked_point_loss(model, clouds):
    """The Chamfer loss of the hidden neighbourhoods, which :class:`PointMAE` returns."""
    return model(clouds)


def _probe_against_random_weights(run, random_backbone):
    """Linear probes of the pretrained and of a random backbone, printed; ``{"pretrained", "random_weights"}``."""
    args, losses = run.args, run.history["loss"]
    print(f"step {run.history['step']}/{args.steps}: loss {np.mean(losses[-50:]):.5f} (first 50: "
          f"{np.mean(losses[:50]):.5f}), {run.history['seconds'] / 60:.1f} min")
    n_train, n_test = args.probe_clouds, args.probe_clouds // 2
    scores = probe_report(run.model.backbone, n_train=n_train, n_test=n_test, n_points=args.n_points)
    random_scores = probe_report(random_backbone, n_train=n_train, n_test=n_test, n_points=args.n_points)
    for variant in scores:
        print(f"linear probe {variant}: pretrained {scores[variant]:.3f}, random weights "
              f"{random_scores[variant]:.3f}")
    return {"pretrained": scores, "random_weights": random_scores}


if __name__ == "__main__":
    sys.exit(main())
