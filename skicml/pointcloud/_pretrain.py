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

from .._weights import recipe_command, save_module
from ..base import seeded
from ..datasets import make_point_clouds
from ..utils.pretraining import add_run_options
from ..utils.training import pretrain
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
    if args.threads:
        torch.set_num_threads(args.threads)
    with seeded(args.seed):
        backbone = PointMAEBackbone(args.trans_dim, args.depth, args.heads, args.n_groups, args.group_size)
        model = PointMAE(backbone, args.mask_ratio, args.decoder_depth, args.heads)
    source = _CloudStream(args.batch_size, args.n_points, args.variant, args.rotation, args.seed)
    # Masks and stochastic depth draw from the global generator: seeded, so a
    # run gives the same weights in any process (a resumed run restores it).
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    history = pretrain(
        model, source, lambda m, batch: m(batch), steps=args.steps, lr=args.lr, weight_decay=args.weight_decay,
        warmup_fraction=0.05, grad_clip=10.0, device="cpu", checkpoint_path=args.checkpoint,
        checkpoint_every=100, max_seconds=None if args.max_minutes is None else 60 * args.max_minutes,
        meta=vars(args), verbose=0 if args.quiet else 1, desc="pretrain pointcloud",
    )
    losses = history["loss"]
    print(f"step {history['step']}/{args.steps}: loss {np.mean(losses[-50:]):.5f} (first 50: "
          f"{np.mean(losses[:50]):.5f}), {history['seconds'] / 60:.1f} min")
    if history["step"] < args.steps:
        print("stopped before the last step; run the same command again to continue")
        return 0
    probe_clouds = args.probe_clouds
    scores = probe_report(model.backbone, n_train=probe_clouds, n_test=probe_clouds // 2, n_points=args.n_points)
    with seeded(args.seed):
        random_backbone = PointMAEBackbone(args.trans_dim, args.depth, args.heads, args.n_groups,
                                           args.group_size)
    random_scores = probe_report(random_backbone, n_train=probe_clouds, n_test=probe_clouds // 2,
                                 n_points=args.n_points)
    for variant in scores:
        print(f"linear probe {variant}: pretrained {scores[variant]:.3f}, random weights "
              f"{random_scores[variant]:.3f}")
    if args.export:
        config = {k: v for k, v in model.backbone.config.items() if k not in ("num_group", "group_size")}
        provenance = {
            "recipe": recipe_command(RECIPE_NAME, sys.argv[3:] if argv is None else argv),
            "data": dict(generator="make_point_clouds", variant=args.variant, rotation=args.rotation,
                         n_points=args.n_points, clouds=history["items"]),
            "grouping": dict(num_group=args.n_groups, group_size=args.group_size),
            "steps": history["step"], "batch_size": args.batch_size, "seed": args.seed,
            "final_loss": round(float(np.mean(losses[-50:])), 5),
            "train_minutes": round(history["seconds"] / 60, 1),
            "threads": torch.get_num_threads(), "torch": str(torch.__version__),
            "linear_probe": {"pretrained": scores, "random_weights": random_scores},
            "wall_minutes_this_call": round((time.perf_counter() - start) / 60, 1),
        }
        digest = save_module(args.export, model.backbone, config, provenance, dtype=torch.float16)
        print(f"wrote {args.export} (sha256 {digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
