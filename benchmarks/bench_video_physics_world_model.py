"""Does a video diffusion model learn uniform motion, or copy its nearest training case?

The central experiment of Kang et al. (ICML 2025) at CPU scale: train
:class:`~skicml.video.VideoWorldModel` on uniform motion in distribution
(speed in [1, 4], radius in [0.7, 1.4]) at two or three training-set sizes
with the same number of optimiser steps, and measure the velocity error of
its generated frames on the official evaluation grid, per bucket (``id``,
``r_out``, ``v_out``, ``rv_out``, ``zero``), beside the law-abiding oracle,
the nearest-neighbour memoriser and "copy the last conditioning frame".
Then:

- the case-based analysis: for the clips whose speed is out of
  distribution, the speed the model generated against the true speed and
  the speed of the nearest training case (in (v, r));
- the attribute-priority experiment (``--priority``): train on red slow and
  blue fast balls (colour vs velocity; also size vs velocity), test on the
  swapped cells, and count which attribute the generations keep;
- timing: seconds per training step and per sampled video.

Run (CPU, one thread; each fit of 1,000 steps took 21-23 minutes on a
shared 2-core machine; the recorded numbers come from the three commands in
three processes)::

    python benchmarks/bench_video_physics_world_model.py --sizes 300 3000 --steps 1000 --n-eval 30
    python benchmarks/bench_video_physics_world_model.py --sizes --priority color,velocity --priority-train 600
    python benchmarks/bench_video_physics_world_model.py --sizes --priority size,velocity --priority-train 600

GPU (at most 10 minutes on one H100; writes the JSON and the models to
``$OUT``)::

    python benchmarks/bench_video_physics_world_model.py --gpu

``--gpu`` is 32-px, 16-frame clips, patch 4, width 128, depth 4, the
spec's 300 / 3,000 / 30,000 ladder and the colour-velocity split at 2,500
steps of 64 clips each (not run yet: no GPU was at hand).
"""

import argparse
import json
import math
import os
import pickle
import time
import warnings

import numpy as np
import pandas as pd
import torch

from skicml.datasets import make_attribute_pair_split, make_physics_eval, make_physics_videos
from skicml.video import (
    CaseBasedVideoPredictor,
    PhysicsOraclePredictor,
    VideoWorldModel,
    attribute_priority_report,
    infer_attributes,
    nearest_training_case,
    summarize_by_bucket,
    velocity_error,
)

N_COND = 3
BUCKETS = ["id", "r_out", "v_out", "rv_out", "zero"]


def world_model(args, n_train, **extra):
    steps_per_epoch = math.ceil(n_train / args.batch_size)
    return VideoWorldModel(patch_size=args.patch_size, d_model=args.d_model, depth=args.depth,
                           n_heads=args.n_heads, n_sampling_steps=args.sampling_steps, ema_decay=args.ema_decay,
                           max_epochs=max(1, round(args.steps / steps_per_epoch)), batch_size=args.batch_size,
                           lr=args.lr, device=args.device, random_state=args.seed, **extra)


def uniform_videos(n, args, seed, **kwargs):
    return make_physics_videos("uniform", n, n_frames=args.n_frames, min_frames_in_view=args.n_frames,
                               random_state=seed, **kwargs)


def bucket_errors(name, future, test, size=None):
    errors = velocity_error(future, test.params, "uniform", n_cond_frames=N_COND, states_true=test.states)
    summary = summarize_by_bucket(errors, columns=["vel_error"])["vel_error"]["mean"]
    row = {"method": name, "n_train": size, **{b: float(summary.get(b, np.nan)) for b in BUCKETS}}
    print(f"{name:<22} {'' if size is None else size:>6} " + " ".join(f"{row[b]:>7.3f}" for b in BUCKETS),
          flush=True)
    return row


def case_based_analysis(model, train, test, args):
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


def speed_following(model, test):
    """Does the generated speed follow the given one? In-distribution clips: correlation and means."""
    inside = (test.params["bucket"] == "id").to_numpy()
    full = model.predict(test.videos[inside, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND, colors=["red"])["velocity"].to_numpy()
    true = test.params["v1"].to_numpy()[inside]
    found = np.isfinite(generated)
    result = {"correlation": float(np.corrcoef(true[found], generated[found])[0, 1]),
              "v_true_mean": float(true.mean()), "v_generated_mean": float(generated[found].mean())}
    print("in distribution, generated vs given speed:", json.dumps({k: round(v, 3) for k, v in result.items()}),
          flush=True)
    return result


def attribute_priority(pair, args):
    split = make_attribute_pair_split(pair, grid=(args.priority_grid, 10))
    train_params = split.train.sample(n=min(args.priority_train, len(split.train)), random_state=args.seed)
    test_params = split.test.sample(n=min(args.n_eval * 2, len(split.test)), random_state=args.seed)
    train = make_physics_videos("uniform", params=train_params.reset_index(drop=True), n_frames=args.n_frames,
                                random_state=args.seed)
    test = make_physics_videos("uniform", params=test_params.reset_index(drop=True), n_frames=args.n_frames,
                               random_state=args.seed + 1)
    model = world_model(args, len(train.videos)).fit(train.videos[:, :N_COND], train.videos[:, N_COND:])
    full = model.predict(test.videos[:, :N_COND], return_full=True)
    generated = infer_attributes(full, n_cond_frames=N_COND)
    report = attribute_priority_report(generated, test.params, split.pair, split.levels)
    print(f"attribute priority {pair[0]} vs {pair[1]} ({len(train.videos)} training clips):")
    print(report.to_string(), flush=True)
    return report


def timing(args):
    data = uniform_videos(64, args, args.seed)
    model = world_model(args, 64)
    model.set_params(max_epochs=1, batch_size=args.batch_size)
    X, y = data.videos[:, :N_COND], data.videos[:, N_COND:]
    start = time.perf_counter()
    model.fit(X[:args.batch_size], y[:args.batch_size])
    model.set_params(max_epochs=4)
    start = time.perf_counter()
    model.fit(X[:args.batch_size], y[:args.batch_size])
    step = (time.perf_counter() - start) / 4
    start = time.perf_counter()
    model.predict(X[:16])
    sample = (time.perf_counter() - start) / 16
    print(f"time per training step (batch {args.batch_size}): {step:.3f} s; per sampled video "
          f"({args.sampling_steps} Euler steps, batches of 16): {sample:.3f} s", flush=True)
    return {"seconds_per_step": step, "seconds_per_video": sample}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[300, 3000])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--n-frames", type=int, default=8)
    parser.add_argument("--n-eval", type=int, default=30, help="clips per evaluation bucket")
    parser.add_argument("--patch-size", type=int, default=8)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ema-decay", type=float, default=0.99)
    parser.add_argument("--sampling-steps", type=int, default=10)
    parser.add_argument("--priority", nargs="*", default=[], help="pairs such as color,velocity")
    parser.add_argument("--priority-grid", type=int, default=31)
    parser.add_argument("--priority-train", type=int, default=600)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--save-models", default=None, help="folder for the fitted models (pickles)")
    parser.add_argument("--gpu", action="store_true", help="the prepared GPU run; writes to $OUT")
    args = parser.parse_args(argv)
    if args.gpu:
        out = os.environ.get("OUT", ".")
        args = parser.parse_args([
            "--sizes", "300", "3000", "30000", "--steps", "2500", "--n-frames", "16", "--patch-size", "4",
            "--d-model", "128", "--depth", "4", "--batch-size", "64", "--lr", "5e-4", "--ema-decay", "0.999",
            "--sampling-steps", "20", "--n-eval", "100", "--priority", "color,velocity",
            "--priority-train", "3000", "--device", "cuda", "--threads", "8",
            "--json", os.path.join(out, "world_model_gpu.json"), "--save-models", out,
        ])
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=FutureWarning)
    results = {"settings": {k: v for k, v in vars(args).items() if k != "gpu"}, "errors": []}
    test = make_physics_eval("uniform", n_per_bucket=args.n_eval, n_frames=args.n_frames,
                             random_state=args.seed + 1)
    X_test = test.videos[:, :N_COND]
    print(f"velocity error (units/s), uniform motion, {args.n_frames} frames ({N_COND} given), 32 px, "
          f"{args.n_eval} clips per bucket")
    print(f"{'method':<22} {'train':>6} " + " ".join(f"{b:>7}" for b in BUCKETS))
    copy_last = np.repeat(X_test[:, -1:], args.n_frames - N_COND, axis=1)
    results["errors"].append(bucket_errors("copy last frame", copy_last, test))
    oracle = PhysicsOraclePredictor().fit(X_test, test.videos[:, N_COND:])
    results["errors"].append(bucket_errors("PhysicsOracle", oracle.predict(X_test), test))
    for size in args.sizes:
        train = uniform_videos(size, args, args.seed)
        X, y = train.videos[:, :N_COND], train.videos[:, N_COND:]
        case = CaseBasedVideoPredictor().fit(X, y)
        results["errors"].append(bucket_errors("CaseBased (pixel 1-NN)", case.predict(X_test), test, size))
        model = world_model(args, size)
        start = time.perf_counter()
        model.fit(X, y)
        fit_seconds = time.perf_counter() - start
        start = time.perf_counter()
        future = model.predict(X_test)
        predict_seconds = (time.perf_counter() - start) / len(X_test)
        row = bucket_errors("VideoWorldModel", future, test, size)
        row.update(fit_seconds=fit_seconds, predict_seconds_per_video=predict_seconds, epochs=model.n_iter_,
                   final_loss=model.loss_curve_[-1])
        results["errors"].append(row)
        results.setdefault("speed_following", {})[str(size)] = speed_following(model, test)
        analysis, table = case_based_analysis(model, train, test, args)
        results.setdefault("case_based", {})[str(size)] = analysis
        if args.save_models:
            with open(os.path.join(args.save_models, f"world_model_{size}.pkl"), "wb") as handle:
                pickle.dump(model, handle)
            table.to_csv(os.path.join(args.save_models, f"case_based_{size}.csv"), index=False)
    for pair in args.priority:
        report = attribute_priority(tuple(pair.split(",")), args)
        results.setdefault("priority", {})[pair] = report.reset_index().to_dict(orient="records")
    results["timing"] = timing(args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1, default=float)


if __name__ == "__main__":
    main()
