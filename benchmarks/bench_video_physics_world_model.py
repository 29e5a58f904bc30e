"""Does a video diffusion model learn a physical law, or copy its nearest training case?

The central experiment of Kang et al. (ICML 2025) at CPU scale: train
:class:`~skicml.video.VideoWorldModel` in distribution at two or three
training-set sizes with the same number of optimiser steps, and measure the
errors of its generated frames on the official evaluation grid, per bucket
(``id``, ``r_out``, ``v_out``, ``rv_out``, ``zero``), beside the
law-abiding oracle, the nearest-neighbour memoriser and "copy the last
conditioning frame". Two scenarios (``--scenario``):

- ``uniform``: one ball, speed in [1, 4], radius in [0.7, 1.4], 3 + 5
  frames; the velocity error, and whether the generated speed follows the
  given one (correlation and slope over the in-distribution clips);
- ``collision``: a red ball moving right meets a blue one moving left,
  elastically with masses ``r^2``, speeds in [1, 4], radii in [0.5, 1.5],
  3 + 13 frames (8 before the contact and 8 after it); the errors of the
  parsed velocities before and after the collision and of the momentum and
  kinetic energy after it, and whether the generated velocities follow the
  true ones before and after the contact.

- ``parabola``: one ball thrown horizontally under gravity 2.5, 3 + 5
  frames; the horizontal velocity error and the height error.

Then, for uniform motion:

- the case-based analysis: for the clips whose speed is out of
  distribution, the speed the model generated against the true speed and
  the speed of the nearest training case (in (v, r));
- the attribute-priority experiment (``--priority``): train on red slow and
  blue fast balls (colour vs velocity; also size vs velocity), test on the
  swapped cells, and count which attribute the generations keep;
- the interpolation experiment (``--gap two three``): train on speeds
  in ``[1, 1.25] U [3.75, 4]`` (and with the middle band ``[2.375,
  2.625]``), test over ``[1, 4]`` and beyond; for clips whose speed lies
  in the gap, the histogram of generated speeds and the share within
  0.125 of a training band (snapping to a case) against the share between
  (interpolating);
- timing: seconds per training step and per sampled video.

The model's options are those of the recipe ``skicml pretrain
physics-world-model`` (``skicml/video/_physics/_pretrain.py``), which
trains the shipped network with them. Run (CPU, one thread each, on a
shared 2-core machine; see doc/video.rst for the dates and what was
running beside them)::

    python benchmarks/bench_video_physics_world_model.py --sizes 300 3000 --steps 1000 --n-eval 30
    python benchmarks/bench_video_physics_world_model.py --scenario collision --sizes 300 3000 --steps 1000 --n-eval 30
    python benchmarks/bench_video_physics_world_model.py --sizes --priority color,velocity --priority-train 600
    python benchmarks/bench_video_physics_world_model.py --sizes --priority size,velocity --priority-train 600

The reruns at the shipped network's 3,200 steps (each fit 12-45 minutes on one
thread, 0.27-0.45 s a step by load; seeds 0 and 1)::

    python benchmarks/bench_video_physics_world_model.py --sizes --steps 3200 --seed 0 \
        --priority color,velocity size,velocity color,size velocity,shape --json priority_s0.json
    python benchmarks/bench_video_physics_world_model.py --sizes --steps 3200 --seed 0 --gap two three --json gap_s0.json
    python benchmarks/bench_video_physics_world_model.py --scenario collision --sizes 3000 --steps 3200 --n-eval 30
    python benchmarks/bench_video_physics_world_model.py --scenario parabola --sizes 3000 --steps 3200 --n-eval 30

``--time-sampling uniform`` trains with the uniform flow times of the
first version (the table of 2026-12-05).

GPU (at most 10 minutes on one H100; writes the JSON and the models to
``$OUT``)::

    python benchmarks/bench_video_physics_world_model.py --gpu

``--gpu`` is uniform motion in 32-px, 16-frame clips, patch 4, width 128,
depth 4, the spec's 300 / 3,000 / 30,000 ladder and the colour-velocity
split at 2,500 steps of 64 clips each (not run yet: no GPU was at hand).
"""

import argparse
import json
import os
import pickle
import time
import warnings

import numpy as np
import pandas as pd
import torch
from _common import fit_predict_timed

from skicml.datasets import make_attribute_pair_split, make_gap_split, make_physics_eval, make_physics_videos
from skicml.video import (
    CaseBasedVideoPredictor,
    PhysicsOraclePredictor,
    attribute_priority_report,
    infer_attributes,
    nearest_training_case,
    velocity_error,
)
from skicml.video._physics._evaluation import BUCKETS, GPU_MODEL_OPTIONS, N_COND, add_model_options, bucket_means, \
    pretrained_model, recipe_model, speed_following

#: The errors reported per scenario (the first is the headline).
ERRORS = {"uniform": ["vel_error"], "parabola": ["vel_error", "y_err"],
          "collision": ["post_vel_err", "pre_vel_err", "momentum_err", "energy_err"]}
#: Frames per clip by default: a collision needs 8 before the contact and 8 after it.
N_FRAMES = {"uniform": 8, "parabola": 8, "collision": 16}
#: The interpolation experiment's training bands of speed (``--gap``): the
#: paper's widest gap, and the same with a middle band put back.
GAP_BANDS = {"two": ((1.0, 1.25), (3.75, 4.0)), "three": ((1.0, 1.25), (2.375, 2.625), (3.75, 4.0))}


def scenario_videos(n, args, seed):
    if args.scenario in ("collision", "parabola"):
        return make_physics_videos(args.scenario, n, n_frames=args.n_frames, random_state=seed)
    return make_physics_videos("uniform", n, n_frames=args.n_frames, min_frames_in_view=args.n_frames,
                               random_state=seed)


def bucket_errors(name, future, test, args, size=None):
    rows = []
    for column in ERRORS[args.scenario]:
        means = bucket_means(future, test, args.scenario, column)
        rows.append({"method": name, "n_train": size, "error": column, **means})
        print(f"{name:<36} {'' if size is None else size:>6} {column:<13}"
              + " ".join(f"{means[b]:>7.3f}" for b in BUCKETS), flush=True)
    return rows


def collision_following(model, test):
    """Do the generated velocities follow the given ones before the contact, and the law after it?

    Over the in-distribution clips: the correlation and slope of the parsed
    velocities of both balls against the true ones, before and after the
    collision, and the share of balls sent the right way after it.
    """
    inside = (test.params["bucket"] == "id").to_numpy()
    full = model.predict(test.videos[inside, :N_COND], return_full=True)
    parsed = velocity_error(full, test.params[inside], "collision", n_cond_frames=N_COND,
                            states_true=test.states[inside])
    states = test.states[inside, :, :, 0]
    true = {"pre": test.params.loc[inside, ["vx1", "vx2"]].to_numpy(),
            "post": (states[:, -1] - states[:, -2]) / 0.1}
    result = {}
    for phase in ("pre", "post"):
        generated = parsed[[f"{phase}_vx1", f"{phase}_vx2"]].to_numpy().ravel()
        target = true[phase].ravel()
        found = np.isfinite(generated)
        result[f"{phase}: correlation"] = float(np.corrcoef(target[found], generated[found])[0, 1])
        result[f"{phase}: slope"] = float(np.polyfit(target[found], generated[found], 1)[0])
        result[f"{phase}: parsed"] = float(found.mean())
    post = parsed[["post_vx1", "post_vx2"]].to_numpy()
    result["post: right direction"] = float(np.nanmean(np.sign(post) == np.sign(true["post"])))
    print("in distribution, generated against true velocities:",
          json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
    return result


def motion_following(model, test, args):
    """Whether the rollouts follow the given motion (and, for collisions, the law after the contact)."""
    if args.scenario == "collision":
        return collision_following(model, test)
    if args.scenario == "parabola":
        return {}
    result = speed_following(model, test)
    print("in distribution, generated against given speed:",
          json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
    return result


def case_based_analysis(model, train, test):
    """For speed-OOD clips: the generated speed against the true one and the nearest training case's."""
    out = test.params["bucket"].isin(["v_out", "rv_out"]).to_numpy() & (test.params["v1"] > 0).to_numpy()
    cond = test.videos[out, :N_COND]
    full = model.predict(cond, return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND, colors=["red"])
    true = test.params[out].reset_index(drop=True)
    index, _ = nearest_training_case(true, train.params, features=("v1", "r1"))
    nearest = train.params.iloc[index].reset_index(drop=True)
    table = pd.DataFrame({"v_true": true["v1"], "r_true": true["r1"], "v_generated": generated["velocity"],
                          "r_generated": generated["size"], "v_nearest": nearest["v1"], "r_nearest": nearest["r1"]})
    found = table["v_generated"].notna()
    closer = (table["v_generated"] - table["v_nearest"]).abs() < (table["v_generated"] - table["v_true"]).abs()
    side = np.where(table["v_true"] > 4, "high", "low")
    result = {"n": int(len(table)), "parsed": float(found.mean()),
              "closer_to_nearest_case": float(closer[found].mean()) if found.any() else float("nan")}
    for name in ("low", "high"):
        rows = table[found & (side == name)]
        result[f"{name}: v_true"] = float(rows["v_true"].mean())
        result[f"{name}: v_generated"] = float(rows["v_generated"].mean())
        result[f"{name}: v_nearest"] = float(rows["v_nearest"].mean())
    print("case-based analysis (speed OOD):", json.dumps({k: round(v, 3) for k, v in result.items()}), flush=True)
    return result, table


def attribute_priority(pair, args):
    split = make_attribute_pair_split(pair, grid=(args.priority_grid, 10))
    train_params = split.train.sample(n=min(args.priority_train, len(split.train)), random_state=args.seed)
    test_params = split.test.sample(n=min(args.n_eval * 2, len(split.test)), random_state=args.seed)
    train = make_physics_videos("uniform", params=train_params.reset_index(drop=True), n_frames=args.n_frames,
                                random_state=args.seed)
    test = make_physics_videos("uniform", params=test_params.reset_index(drop=True), n_frames=args.n_frames,
                               random_state=args.seed + 1)
    model = recipe_model(args, len(train.videos)).fit(train.videos[:, :N_COND], train.videos[:, N_COND:])
    full = model.predict(test.videos[:, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND)
    report = attribute_priority_report(generated, test.params, split.pair, split.levels)
    print(f"attribute priority {pair[0]} vs {pair[1]} ({len(train.videos)} training clips):")
    print(report.to_string(), flush=True)
    return report


def gap_interpolation(name, args):
    """Train on speed bands with a gap; is a speed in the gap interpolated or snapped to a band's edge?

    The paper's reading: a model that interpolates lands between the bands
    (a generated speed near the true one), a case-based one snaps to the
    nearest training speed (a band's edge). Reported per region (band, gap,
    extrapolation): the velocity error, the slope of the generated speed on
    the true one, and for the gap, the histogram of generated speeds and the
    share within 0.125 of a training band against the share in the gap's
    interior.
    """
    bands = GAP_BANDS[name]
    split = make_gap_split(bands, eval_grid=(args.gap_eval_speeds, 4), n_extrapolation=6)
    train = make_physics_videos("uniform", params=split.train, n_frames=args.n_frames,
                                min_frames_in_view=args.n_frames, random_state=args.seed)
    test = make_physics_videos("uniform", params=split.test.drop(columns="region"), n_frames=args.n_frames,
                               min_frames_in_view=args.n_frames, random_state=args.seed + 1)
    model = recipe_model(args, len(train.videos)).fit(train.videos[:, :N_COND], train.videos[:, N_COND:])
    full = model.predict(test.videos[:, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND, colors=["red"])["velocity"].to_numpy()
    errors = velocity_error(full, test.params, "uniform", n_cond_frames=N_COND, states_true=test.states)
    region = split.test["region"].to_numpy()
    true = split.test["v1"].to_numpy()
    result = {"bands": [list(b) for b in bands], "n_train": len(train.videos)}
    print(f"gap split {name} {bands} ({len(train.videos)} training clips):")
    for part in ("band", "gap", "extrapolation"):
        rows = (region == part) & np.isfinite(generated)
        slope = float(np.polyfit(true[rows], generated[rows], 1)[0]) if rows.sum() > 2 else float("nan")
        result[part] = {"n": int((region == part).sum()), "parsed": float(rows.sum() / max((region == part).sum(), 1)),
                        "vel_error": float(errors["vel_error"][region == part].mean()), "slope": slope}
        print(f"  {part:<13} n {result[part]['n']:4d}  velocity error {result[part]['vel_error']:.3f}  "
              f"slope of generated on true speed {slope:.2f}", flush=True)
    in_gap = (region == "gap") & np.isfinite(generated)
    near_band = np.zeros(in_gap.sum(), dtype=bool)
    for low, high in bands:
        near_band |= (generated[in_gap] >= low - 0.125) & (generated[in_gap] <= high + 0.125)
    edges = np.arange(0.5, 4.51, 0.25)
    counts, _ = np.histogram(generated[in_gap], bins=edges)
    result["gap"] |= {"near_a_band": float(near_band.mean()), "histogram_edges": edges.tolist(),
                      "histogram": counts.tolist(), "true_mean": float(true[in_gap].mean()),
                      "generated_mean": float(generated[in_gap].mean())}
    print(f"  gap: {100 * near_band.mean():.0f}% of generated speeds within 0.125 of a training band "
          f"(snapping), {100 * (1 - near_band.mean()):.0f}% between (interpolation)")
    print("  histogram of generated speeds for gap clips: "
          + " ".join(f"[{lo:.2f},{lo + 0.25:.2f}):{c}" for lo, c in zip(edges[:-1], counts) if c), flush=True)
    return result


def timing(args):
    data = scenario_videos(64, args, args.seed)
    X, y = data.videos[:args.batch_size, :N_COND], data.videos[:args.batch_size, N_COND:]
    model = recipe_model(args, len(X))
    model.set_params(max_epochs=1).fit(X, y)  # warm-up
    model.set_params(max_epochs=4)
    start = time.perf_counter()
    model.fit(X, y)
    step = (time.perf_counter() - start) / 4
    start = time.perf_counter()
    model.predict(data.videos[:16, :N_COND])
    sample = (time.perf_counter() - start) / 16
    print(f"time per training step (batch {args.batch_size}, {args.n_frames} frames): {step:.3f} s; per sampled "
          f"video ({args.sampling_steps} Euler steps, batches of 16): {sample:.3f} s", flush=True)
    return {"seconds_per_step": step, "seconds_per_video": sample}


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="uniform", choices=sorted(ERRORS))
    parser.add_argument("--sizes", type=int, nargs="*", default=[300, 3000], help="training clips of each fit")
    add_model_options(parser)
    parser.set_defaults(n_frames=None)  # by scenario: N_FRAMES
    parser.add_argument("--pretrained", nargs="*", default=[],
                        help="also score these weights files (or shipped names) as they are")
    parser.add_argument("--pretrained-train", type=int, default=3000,
                        help="the clips they were trained on (the recipe's --n-videos), for the case-based analysis")
    parser.add_argument("--priority", nargs="*", default=[], help="pairs such as color,velocity (uniform)")
    parser.add_argument("--priority-grid", type=int, default=31)
    parser.add_argument("--priority-train", type=int, default=600)
    parser.add_argument("--gap", nargs="*", default=[], choices=sorted(GAP_BANDS),
                        help="the interpolation split(s): two bands, or three with a middle one (uniform)")
    parser.add_argument("--gap-eval-speeds", type=int, default=31, help="speeds of the gap split's grid over [1, 4]")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None)
    parser.add_argument("--save-models", default=None, help="folder for the fitted models (pickles)")
    parser.add_argument("--gpu", action="store_true", help="the prepared GPU run; writes to $OUT")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.gpu:
        out = os.environ.get("OUT", ".")
        args = parser.parse_args([
            "--sizes", "300", "3000", "30000", "--steps", "2500", "--n-frames", "16", *GPU_MODEL_OPTIONS,
            "--n-eval", "100", "--priority", "color,velocity", "--priority-train", "3000",
            "--json", os.path.join(out, "world_model_gpu.json"), "--save-models", out,
        ])
    if args.n_frames is None:
        args.n_frames = N_FRAMES[args.scenario]
    if (args.priority or args.gap) and args.scenario != "uniform":
        parser.error("--priority and --gap splits are of uniform motion; leave --scenario at uniform.")
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=FutureWarning)
    results = {"settings": {k: v for k, v in vars(args).items() if k != "gpu"}, "errors": []}
    test = make_physics_eval(args.scenario, n_per_bucket=args.n_eval, n_frames=args.n_frames,
                             random_state=args.seed + 1)
    X_test = test.videos[:, :N_COND]
    print(f"errors (units/s; momentum and energy in r^2-mass units), {args.scenario}, {args.n_frames} frames "
          f"({N_COND} given), 32 px, up to {args.n_eval} clips per bucket")
    print(f"{'method':<36} {'train':>6} {'error':<13}" + " ".join(f"{b:>7}" for b in BUCKETS))
    copy_last = np.repeat(X_test[:, -1:], args.n_frames - N_COND, axis=1)
    results["errors"] += bucket_errors("copy last frame", copy_last, test, args)
    oracle = PhysicsOraclePredictor().fit(X_test, test.videos[:, N_COND:])
    results["errors"] += bucket_errors("PhysicsOracle", oracle.predict(X_test), test, args)
    for size in args.sizes:
        train = scenario_videos(size, args, args.seed)
        X, y = train.videos[:, :N_COND], train.videos[:, N_COND:]
        case = CaseBasedVideoPredictor().fit(X, y)
        results["errors"] += bucket_errors("CaseBased (pixel 1-NN)", case.predict(X_test), test, args, size)
        model = recipe_model(args, size)
        future, fit_seconds, predict_seconds = fit_predict_timed(model, X, y, X_test)
        predict_seconds /= len(X_test)
        rows = bucket_errors("VideoWorldModel", future, test, args, size)
        for row in rows:
            row.update(fit_seconds=fit_seconds, predict_seconds_per_video=predict_seconds, epochs=model.n_iter_,
                       final_loss=model.loss_curve_[-1])
        results["errors"] += rows
        results.setdefault("following", {})[str(size)] = motion_following(model, test, args)
        table = None
        if args.scenario == "uniform":
            analysis, table = case_based_analysis(model, train, test)
            results.setdefault("case_based", {})[str(size)] = analysis
        if args.save_models:
            with open(os.path.join(args.save_models, f"world_model_{args.scenario}_{size}.pkl"), "wb") as handle:
                pickle.dump(model, handle)
            if table is not None:
                table.to_csv(os.path.join(args.save_models, f"case_based_{size}.csv"), index=False)
    # the recipe's training clips (same generator and seed), rendered once for every file
    pretrained_train = (scenario_videos(args.pretrained_train, args, args.seed)
                        if args.pretrained and args.scenario == "uniform" else None)
    for source in args.pretrained:
        model = pretrained_model(source, args, test.videos)
        name = os.path.basename(source)
        results["errors"] += bucket_errors(f"pretrained {name}", model.predict(X_test), test, args)
        results.setdefault("following", {})[name] = motion_following(model, test, args)
        if pretrained_train is not None:
            results.setdefault("case_based", {})[name] = case_based_analysis(model, pretrained_train, test)[0]
    for pair in args.priority:
        report = attribute_priority(tuple(pair.split(",")), args)
        results.setdefault("priority", {})[pair] = report.reset_index().to_dict(orient="records")
    for name in args.gap:
        results.setdefault("gap", {})[name] = gap_interpolation(name, args)
    results["timing"] = timing(args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1, default=float)


if __name__ == "__main__":
    main()
