"""Fit + predict time of TabICLClassifier against the official tabicl 0.1.4 code.

Both run the same network with the same weights (the shipped model, loaded
into the official module from the same checkpoint file), the same ensemble
settings and 2 CPU threads, on a synthetic 20-feature table. Each
measurement runs in its own process so that its peak memory (RSS) is
measured too; each implementation runs ``--repeats`` times (interleaved
with the others) and the median is reported, since one run on a shared
machine is noisy. Also timed: five more predict calls on the same fit (what
cross-validation, grid searches and serving do), where skicml reuses the
training context cached at fit. Both run the paper's inference (softmax
temperature 0.9, every member on the raw columns), so they do the same
work; ``--with-auto`` adds a row for skicml's defaults
(``softmax_temperature="auto"``, whose held-out calibration adds in-context
passes at fit, and ``pca_components=16``, whose principal-view members read
16 instead of 20 columns); ``--with-bf16`` adds skicml doing the same work
with ``inference_precision="bfloat16"``.

    pip install --no-deps tabicl==0.1.4
    python benchmarks/bench_tabicl_speed.py --sizes 1000 10000 50000 --n-test 1000
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time


def measure(implementation, n_train, n_test, n_estimators, threads, checkpoint, again=5):
    import numpy as np
    import torch
    from sklearn.datasets import make_classification

    torch.set_num_threads(threads)
    X, y = make_classification(n_samples=n_train + n_test, n_features=20, n_informative=10, n_classes=3,
                               random_state=0)
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    kwargs = dict(n_estimators=n_estimators, random_state=0, device="cpu")
    if implementation == "official":
        from tabicl.sklearn.classifier import TabICLClassifier

        clf = TabICLClassifier(model_path=checkpoint, allow_auto_download=False, **kwargs)
    else:
        from skicml import TabICLClassifier

        # skicml-auto: skicml's defaults; the others do the paper's inference
        # (fixed temperature, raw columns only), skicml-bf16 in bfloat16.
        paper = dict(softmax_temperature=0.9, pca_components=None)
        settings = {"skicml-auto": {}, "skicml": paper, "skicml-bf16": {**paper, "inference_precision": "bfloat16"}}
        clf = TabICLClassifier(model_path=checkpoint, **settings[implementation], **kwargs)
    start = time.perf_counter()
    clf.fit(X_train, y_train)
    proba = clf.predict_proba(X_test)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(again):
        clf.predict_proba(X_test)
    repeated = (time.perf_counter() - start) / again if again else float("nan")
    accuracy = float((clf.classes_[np.argmax(proba, 1)] == y_test).mean())
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return dict(implementation=implementation, n_train=n_train, fit_predict_s=first, predict_again_s=repeated,
                accuracy=accuracy, peak_rss_mb=peak_mb)


def _median_run(runs):
    """The run of median fit+predict time, with the median of each timing."""
    import statistics

    row = dict(sorted(runs, key=lambda run: run["fit_predict_s"])[(len(runs) - 1) // 2])
    for key in ("fit_predict_s", "predict_again_s"):
        row[key] = statistics.median(run[key] for run in runs)
    row["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    row["runs"] = len(runs)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--n-estimators", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--again", type=int, default=5,
                        help="further predict_proba calls timed on the same fit (the official code repeats "
                             "the whole in-context pass in each: lower it at 50,000 rows)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh-process runs of each implementation, interleaved; the median is reported")
    parser.add_argument("--skip-official-above", type=int, default=None,
                        help="only run skicml above this many training rows")
    parser.add_argument("--with-auto", action="store_true",
                        help="also time skicml with its default softmax_temperature='auto'")
    parser.add_argument("--with-bf16", action="store_true",
                        help="also time skicml doing the same work with inference_precision='bfloat16'")
    parser.add_argument("--_one", nargs=2, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_checkpoint", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._one:
        implementation, n_train = args._one[0], int(args._one[1])
        print(json.dumps(measure(implementation, n_train, args.n_test, args.n_estimators, args.threads,
                                 args._checkpoint, args.again)))
        return
    import torch

    from skicml._weights import load_weights

    payload = load_weights("tabicl-small")
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = os.path.join(folder, "tabicl_small.ckpt")
        # The official loader wants exactly {"config", "state_dict"}.
        torch.save({"config": payload["config"], "state_dict": payload["state_dict"]}, checkpoint)
        rows = []
        for n_train in args.sizes:
            implementations = [
                name for name in ("skicml", "skicml-auto", "skicml-bf16", "official")
                if not (name == "skicml-auto" and not args.with_auto)
                and not (name == "skicml-bf16" and not args.with_bf16)
                and not (name == "official" and args.skip_official_above and n_train > args.skip_official_above)
            ]
            runs = {name: [] for name in implementations}
            # Interleaved so that a slow spell of a shared machine hits every
            # implementation alike; the median drops a cold first run.
            for _ in range(args.repeats):
                for implementation in implementations:
                    out = subprocess.run(
                        [sys.executable, __file__, "--_one", implementation, str(n_train), "--_checkpoint",
                         checkpoint, "--n-test", str(args.n_test), "--n-estimators", str(args.n_estimators),
                         "--threads", str(args.threads), "--again", str(args.again)],
                        capture_output=True, text=True)
                    if out.returncode:
                        print(out.stderr[-2000:])
                        continue
                    runs[implementation].append(json.loads(out.stdout.strip().splitlines()[-1]))
                    print(runs[implementation][-1], flush=True)
            for implementation in implementations:
                if runs[implementation]:
                    rows.append(_median_run(runs[implementation]))
    print(f"\n{args.n_estimators} members, {args.n_test} test rows, 20 features, {args.threads} threads, "
          f"median of {args.repeats} fresh-process runs")
    header = (f"{'n_train':>8} {'impl':>11} {'fit+predict s':>14} {'predict again s':>16} {'accuracy':>9} "
              f"{'peak RSS MB':>12} {'speed-up':>9} {'again speed-up':>15}")
    print(header)
    print("-" * len(header))
    for row in rows:
        ref = next((r for r in rows if r["n_train"] == row["n_train"] and r["implementation"] == "official"), None)
        ratio = f"{ref['fit_predict_s'] / row['fit_predict_s']:8.2f}x" if ref else "       -"
        again = f"{ref['predict_again_s'] / row['predict_again_s']:14.2f}x" if ref else "             -"
        print(f"{row['n_train']:>8} {row['implementation']:>11} {row['fit_predict_s']:14.2f} "
              f"{row['predict_again_s']:16.3f} {row['accuracy']:9.4f} {row['peak_rss_mb']:12.0f} {ratio} {again}")


if __name__ == "__main__":
    main()
