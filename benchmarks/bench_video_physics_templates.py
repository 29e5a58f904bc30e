"""Combinatorial generalization: does the world model's error on unseen templates fall with more templates?

The paper's third scenario (Kang et al., ICML 2025, Table 1) at CPU scale,
on :func:`skicml.datasets.make_template_split`: scenes of a red ball dropped
among three of six object types (20 templates, 5 never trained on). For
each number of training templates (``--templates``), the same number of
training videos (``--n-train``) is spread over them, and
:class:`~skicml.video.VideoWorldModel` learns to continue a scene from its
first frame (the paper's c = 1). It is scored on fresh layouts of its
training templates (in-template) and on the five held-out templates
(out-of-template), as the official evaluation does: pixel MSE, PSNR and
SSIM of the generated frames (FVD and LPIPS need downloaded networks) and
the abnormal-rollout rate of :func:`~skicml.video.abnormal_rollouts` (the
automatic stand-in for the paper's human label). Two references without a
model: "copy the given frame" (nothing moves) and the pixel 1-nearest
neighbour of the first frame among the training videos
(:class:`~skicml.video.CaseBasedVideoPredictor`, a pure copier). Each over
``--seeds``; the summary gives the out-of-template numbers against the
number of templates, per seed, and out-of-template over in-template.

The paper's finding: with more templates at a fixed budget of videos, the
out-of-template error falls towards the in-template one (abnormal 67% with
6 templates, 18% with 30, 10% with 60), while the in-template error stays
flat.

Run (CPU, one thread; about 12 minutes a fit of 1,000 steps on a quiet
2-core machine)::

    OMP_NUM_THREADS=1 python benchmarks/bench_video_physics_templates.py --templates 2 6 15 \\
        --n-train 600 --steps 1000 --seeds 0 1 --json templates.json

GPU (at most 10 minutes on one H100; writes the JSON to ``$OUT``)::

    python benchmarks/bench_video_physics_templates.py --gpu
"""

import argparse
import json
import os
import time
import warnings

import numpy as np
import torch
from _common import fit_predict_timed

from skicml.datasets import make_template_split
from skicml.video import CaseBasedVideoPredictor, abnormal_rollouts, video_similarity
from skicml.video._physics._evaluation import GPU_MODEL_OPTIONS, add_model_options, recipe_model

N_COND = 1  # the paper conditions PHYRE rollouts on one frame


def scores(name, count, part, future, scenes):
    """The official measures of generated future frames against the simulation's."""
    true = scenes.videos[:, N_COND:]
    full = np.concatenate([scenes.videos[:, :N_COND], future], axis=1)
    similarity = video_similarity(future, true)
    abnormal = abnormal_rollouts(full, scenes, n_cond_frames=N_COND)
    row = {"method": name, "templates": count, "split": part,
           "mse": float((((future.astype(float) - true) / 255.0) ** 2).mean()),
           "psnr": float(similarity["psnr"].replace(np.inf, np.nan).mean()),
           "ssim": float(similarity["ssim"].mean()), "abnormal": float(abnormal["abnormal"].mean()),
           "vanished": float(abnormal["vanished"].mean()), "drift": float(abnormal["drift"].mean())}
    print(f"{name:<22} {count:>9} {part:<4} {row['mse']:8.4f} {row['psnr']:7.2f} {row['ssim']:7.3f} "
          f"{100 * row['abnormal']:9.1f} {100 * row['vanished']:9.1f} {row['drift']:7.2f}", flush=True)
    return row


def run_seed(seed, args):
    rows = []
    for count in args.templates:
        split = make_template_split(count, n_train=args.n_train, n_eval_per_template=args.n_eval,
                                    n_frames=args.n_frames, frame_dt=args.frame_dt, random_state=seed)
        X, y = split.train.videos[:, :N_COND], split.train.videos[:, N_COND:]
        parts = {"in": split.test_in, "out": split.test_out}
        if count == args.templates[0]:
            for part, scenes in parts.items():  # the same held-out scenes for every count
                still = np.repeat(scenes.videos[:, :N_COND], args.n_frames - N_COND, axis=1)
                rows.append(scores("copy the given frame", count, part, still, scenes) | {"seed": seed})
        case = CaseBasedVideoPredictor().fit(X, y)
        for part, scenes in parts.items():
            rows.append(scores("CaseBased (pixel 1-NN)", count, part, case.predict(scenes.videos[:, :N_COND]),
                               scenes) | {"seed": seed})
        args.seed = seed
        model = recipe_model(args, len(X), verbose=0)
        future, fit_seconds, _ = fit_predict_timed(model, X, y, split.test_out.videos[:, :N_COND])
        rows.append(scores("VideoWorldModel", count, "out", future, split.test_out)
                    | {"seed": seed, "fit_seconds": fit_seconds, "final_loss": float(model.loss_curve_[-1])})
        rows.append(scores("VideoWorldModel", count, "in", model.predict(split.test_in.videos[:, :N_COND]),
                           split.test_in) | {"seed": seed})
    return rows


def summarize(rows, counts):
    model = [r for r in rows if r["method"] == "VideoWorldModel"]
    seeds = sorted({r["seed"] for r in model})
    print(f"\nVideoWorldModel against the number of training templates (mean over seeds {seeds}; "
          "per seed in brackets)")
    print(f"{'templates':>9} {'split':<5} {'abnormal %':>24} {'SSIM':>24} {'MSE out / in':>14}")
    for count in counts:
        for part in ("in", "out"):
            cell = [r for r in model if r["templates"] == count and r["split"] == part]
            abnormal = [100 * r["abnormal"] for r in cell]
            ssim = [r["ssim"] for r in cell]
            ratio = ""
            if part == "out":
                inside = {r["seed"]: r["mse"] for r in model if r["templates"] == count and r["split"] == "in"}
                ratio = f"{np.mean([r['mse'] / inside[r['seed']] for r in cell]):14.2f}"
            print(f"{count:>9} {part:<5} {np.mean(abnormal):6.1f} ({' '.join(f'{a:.0f}' for a in abnormal)})"
                  f"{'':>4} {np.mean(ssim):7.3f} ({' '.join(f'{s:.3f}' for s in ssim)}) {ratio}")
    still = {r["seed"]: r for r in rows if r["method"] == "copy the given frame" and r["split"] == "out"}
    print("\nout-of-template MSE of the model over copying the given frame (below 1: it predicts motion)")
    for count in counts:
        cell = [r for r in model if r["templates"] == count and r["split"] == "out"]
        ratios = [r["mse"] / still[r["seed"]]["mse"] for r in cell]
        print(f"{count:>9} {np.mean(ratios):6.3f} ({' '.join(f'{v:.3f}' for v in ratios)})")


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, nargs="+", default=[2, 6, 15],
                        help="training template counts (of the 15; the first two hold every object type)")
    parser.add_argument("--n-train", type=int, default=600, help="training videos at every count")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--frame-dt", type=float, default=0.15)
    add_model_options(parser)
    parser.set_defaults(n_eval=10)  # scenes per template in each evaluation split
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--gpu", action="store_true", help="the prepared GPU run; writes to $OUT")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gpu:
        out = os.environ.get("OUT", ".")
        args = parser.parse_args([
            "--templates", "2", "6", "15", "--n-train", "3000", "--seeds", "0", "--steps", "2500",
            "--n-frames", "8", "--n-eval", "40", *GPU_MODEL_OPTIONS, "--json", os.path.join(out, "templates_gpu.json"),
        ])
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=FutureWarning)
    print(f"{args.n_train} training videos at every count, {args.n_frames} frames ({N_COND} given, "
          f"{args.frame_dt} s apart), 32 px, {args.steps} steps; {args.n_eval} evaluation scenes a template")
    print(f"{'method':<22} {'templates':>9} {'split':<4} {'MSE':>8} {'PSNR':>7} {'SSIM':>7} {'abnormal%':>9} "
          f"{'vanished%':>9} {'drift':>7}")
    start = time.perf_counter()
    rows = [row for seed in args.seeds for row in run_seed(seed, args)]
    summarize(rows, args.templates)
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "gpu"}, "rows": rows}, handle,
                      indent=1, default=float)


if __name__ == "__main__":
    main()
