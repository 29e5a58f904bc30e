"""skicml's TabICLImputer / TabICLOutlierDetector against the official ``tabicl`` 2.2.0 ``TabICLUnsupervised``.

Both sides load one random TabICL v2 regression network of the official
shape (28.6M parameters, 999 quantiles; weights drawn with seed 0 and moved
away from the zero initialisation) from one checkpoint file, and work on the
same 1,000 x 10 numeric table (correlated Gaussian columns; 20% of the cells
removed completely at random for imputation). Each side runs in its own
process (``--side official`` / ``--side ours``) on one thread and writes its
times and outputs to a JSON file; ``--side report`` compares them.

What is timed, in seconds of one thread:

* official ``score_samples(X, n_permutations=1)`` (the identity order: 10
  conditionals). Its default (``n_permutations=4``) runs one order per column
  whatever it is asked, 10 orders with the same conditioning-set sizes
  0..9 each, so it costs 10 times that: the default is extrapolated, not run
  (about 13 CPU-minutes on two threads per the spec);
* official ``impute(X_missing)`` (defaults: two rounds, the median);
* ours: ``fit`` and ``score_samples`` with the official members (8) on the
  identity order (like for like), and with the defaults (4 orders of 4
  members); ``fit`` and ``transform`` of the imputer with the official
  settings (8 members, two rounds, ``estimate="median"``, contexts cached).

Outputs compared where the algorithms agree: each factor
``log p(x_k | x_0..x_{k-1})`` of the identity order for k >= 1 (ours minus
``log std`` of the column, the official raw units), and the imputed cells.

Run (the two sides may run at the same time, one core each)::

    OMP_NUM_THREADS=1 python benchmarks/bench_tabicl_unsupervised_speed.py --side official
    OMP_NUM_THREADS=1 python benchmarks/bench_tabicl_unsupervised_speed.py --side ours
    python benchmarks/bench_tabicl_unsupervised_speed.py --side report
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFICIAL = os.environ.get("SKICML_TABICL2_PATH") or os.path.join(ROOT, ".venv", "tabicl-2.2.0")
CHECKPOINT = os.environ.get("SKICML_BENCH_NETWORK") or os.path.join(
    os.environ.get("TMPDIR", "/tmp"), "skicml-random-v2-regressor-official-shape.ckpt")
N, D, SEED = 1000, 10, 0


def network_file():
    """The random v2 regression network of the official shape, written once."""
    if not os.path.exists(CHECKPOINT):
        from skicml.tabicl import TabICLv2Model

        torch.manual_seed(SEED)
        # the official constructor defaults, the v2 shape (SKICML_BENCH_SMALL: a tiny one to try the script)
        small = dict(embed_dim=32, col_nhead=4, row_nhead=4, icl_nhead=4, col_num_inds=8, icl_num_blocks=2) if os.environ.get("SKICML_BENCH_SMALL") else {}
        model = TabICLv2Model(max_classes=0, **small)
        with torch.no_grad():
            for parameter in model.parameters():  # away from the zero initialisation
                parameter.add_(0.02 * torch.randn_like(parameter))
        torch.save({"config": model.config, "state_dict": model.state_dict()}, CHECKPOINT + ".part")
        os.replace(CHECKPOINT + ".part", CHECKPOINT)
    return CHECKPOINT


def table():
    N = int(os.environ.get("SKICML_BENCH_ROWS", 1000))  # a smaller table only to try the script
    rng = np.random.RandomState(SEED)
    X = rng.normal(size=(N, D)) @ rng.normal(size=(D, D)) / np.sqrt(D)
    X_missing = X.copy()
    X_missing[rng.rand(N, D) < 0.2] = np.nan
    return X.astype(np.float32).astype(np.float64), X_missing.astype(np.float32).astype(np.float64)


def official_side(out):
    sys.path.insert(0, OFFICIAL)
    from tabicl import TabICLUnsupervised

    X, X_missing = table()
    params = dict(n_estimators=8, random_state=42, device="cpu", estimator_params=dict(
        model_path=network_file(), allow_auto_download=False, use_amp=False, use_fa3=False))
    model = TabICLUnsupervised(**params).fit(X)
    terms = []
    original = model._log_prob_numerical

    def recorded(*args, **kwargs):
        value = original(*args, **kwargs)
        terms.append(np.asarray(value, dtype=np.float64).tolist())
        return value

    model._log_prob_numerical = recorded
    start = time.perf_counter()
    log_scores = np.log(model.score_samples(X, n_permutations=1))
    score_time = time.perf_counter() - start
    print(f"official score_samples, identity order: {score_time:.1f} s", flush=True)
    imputer = TabICLUnsupervised(**params).fit(X_missing)
    start = time.perf_counter()
    imputed = imputer.impute(X_missing)
    impute_time = time.perf_counter() - start
    print(f"official impute: {impute_time:.1f} s", flush=True)
    with open(out, "w") as f:
        json.dump(dict(score_time=score_time, terms=terms, log_scores=log_scores.tolist(),
                       impute_time=impute_time, imputed=imputed.tolist(), threads=torch.get_num_threads()), f)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def ours_side(out):
    from skicml.tabicl import TabICLImputer, TabICLOutlierDetector

    X, X_missing = table()
    common = dict(pretrained_regressor=network_file(), random_state=42, device="cpu")
    result = {}

    # like for like: the official members on the identity order
    detector, result["identity_fit"] = timed(
        lambda: TabICLOutlierDetector(n_permutations=1, n_estimators=8, **common).fit(X))
    _, result["identity_score"] = timed(lambda: detector.score_samples(X))
    result["terms"] = [(detector.conditionals_[k, tuple(range(k))].log_density(X, X[:, k])
                        - np.log(X[:, k].std())).tolist() for k in range(1, X.shape[1])]
    print("ours, identity order: done", flush=True)

    # the defaults: 4 orders of 4 members
    detector, result["default_fit"] = timed(lambda: TabICLOutlierDetector(**common).fit(X))
    _, result["default_score"] = timed(lambda: detector.score_samples(X))
    print("ours, defaults: done", flush=True)

    imputer, result["impute_fit"] = timed(lambda: TabICLImputer(estimate="median", cache=True, **common).fit(X_missing))
    imputed, result["impute_transform"] = timed(lambda: imputer.transform(X_missing))
    result["imputed"] = imputed.tolist()
    with open(out, "w") as f:
        json.dump(result, f)


def report(official_file, ours_file):
    with open(official_file) as f:
        official = json.load(f)
    with open(ours_file) as f:
        ours = json.load(f)
    X, X_missing = table()
    N, D = X.shape
    rows = [("score_samples, identity order, 8 members", official["score_time"], ours["identity_fit"],
             ours["identity_score"]),
            ("score_samples, defaults (official: x10, extrapolated)", D * official["score_time"], ours["default_fit"],
             ours["default_score"]),
            ("impute / transform, 8 members, 2 rounds", official["impute_time"], ours["impute_fit"],
             ours["impute_transform"])]
    gaps = np.concatenate([np.abs(np.asarray(official["terms"][k]) - np.asarray(ours["terms"][k - 1]))
                           for k in range(1, D)])
    missing = np.isnan(X_missing)
    impute_gap = np.abs(np.asarray(ours["imputed"]) - np.asarray(official["imputed"]))[missing] / X.std(0).min()
    print(f"\n{N} x {D}, one thread each; seconds\n")
    print("| call | official 2.2.0 | ours: fit | ours: call | ratio, call | ratio, fit + call |")
    print("|---|---|---|---|---|---|")
    for name, theirs_time, fit, call in rows:
        print(f"| {name} | {theirs_time:.1f} | {fit:.1f} | {call:.1f} | {theirs_time / call:.1f}x "
              f"| {theirs_time / (fit + call):.1f}x |")
    print(f"\ngap of a factor log p(x_k | x_<k), k = 1..{D - 1}, over the {N} rows (nats): median "
          f"{np.median(gaps):.1e}, 99th percentile {np.percentile(gaps, 99):.1e}, largest {gaps.max():.1e}")
    print(f"largest gap of an imputed cell: {impute_gap.max():.1e} column standard deviations")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", choices=["official", "ours", "report"], required=True)
    folder = os.environ.get("TMPDIR", "/tmp")
    parser.add_argument("--official", default=os.path.join(folder, "tabicl-official.json"))
    parser.add_argument("--ours", default=os.path.join(folder, "tabicl-ours.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    network_file()
    if args.side == "report":
        report(args.official, args.ours)
    else:
        (official_side if args.side == "official" else ours_side)(
            args.official if args.side == "official" else args.ours)


if __name__ == "__main__":
    main()
