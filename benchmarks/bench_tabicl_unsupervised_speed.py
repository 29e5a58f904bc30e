"""skicml's TabICLImputer / TabICLOutlierDetector against the official ``tabicl`` 2.2.0 ``TabICLUnsupervised``.

Both sides load one random TabICL v2 regression network of the official
shape (28.6M parameters, 999 quantiles; weights drawn with seed 0 and moved
away from the zero initialisation) from one checkpoint file, and work on the
same 1,000 x 10 numeric table (correlated Gaussian columns; 20% of the cells
removed completely at random for imputation). Each side runs in its own
process (``--side official`` / ``--side ours``) on one thread and writes its
times and outputs to a JSON file; ``--side report`` compares them.

What is timed, in CPU seconds of one thread (``time.process_time``: on an idle
machine the wall time; on a busy one, what other processes do not inflate):

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
    """Times in CPU seconds of this (one-thread) process: a busy machine does not inflate them."""
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
    log_scores, score_time = timed(lambda: np.log(model.score_samples(X, n_permutations=1)))
    print(f"official score_samples, identity order: {score_time:.1f} CPU s", flush=True)
    result = dict(score_time=score_time, terms=terms, log_scores=log_scores.tolist(), threads=torch.get_num_threads())
    with open(out, "w") as f:
        json.dump(result, f)
    imputer = TabICLUnsupervised(**params).fit(X_missing)
    imputed, result["impute_time"] = timed(lambda: imputer.impute(X_missing))
    result["imputed"] = imputed.tolist()
    print(f"official impute: {result['impute_time']:.1f} CPU s", flush=True)
    with open(out, "w") as f:
        json.dump(result, f)


def timed(fn):
    """``fn()`` and the CPU seconds it took (one thread: its wall time on an idle machine)."""
    start = time.process_time()
    value = fn()
    return value, time.process_time() - start


def _built_detector(X, **params):
    """A detector whose conditionals are built, timed without ``fit``'s scoring pass of the training rows.

    ``fit`` is ``_fit_columns`` + ``_build`` (the contexts) + one ``score_samples``
    of the training rows (for ``offset_``): its time is the build time plus
    one scoring pass, which the report adds back.
    """
    from skicml.tabicl import TabICLOutlierDetector
    from skicml.tabicl._unsupervised import _orderings

    detector = TabICLOutlierDetector(**params)
    X_num = detector._fit_columns(X)
    detector.orderings_ = _orderings(X.shape[1], detector.n_permutations, detector._fit_seed())
    plan = [(order[i], order[:i]) for order in detector.orderings_ for i in range(X.shape[1])]
    detector.conditionals_ = detector._build(X_num, plan)
    detector.offset_ = 0.0
    return detector


def ours_side(out):
    from skicml.tabicl import TabICLImputer

    X, X_missing = table()
    common = dict(pretrained_regressor=network_file(), random_state=42, device="cpu")
    result = {}

    def save():
        with open(out, "w") as f:
            json.dump(result, f)

    # like for like: the official members on the identity order
    detector, result["identity_build"] = timed(lambda: _built_detector(X, n_permutations=1, n_estimators=8,
                                                                       **common))
    _, result["identity_score"] = timed(lambda: detector.score_samples(X))
    result["terms"] = [(detector.conditionals_[k, tuple(range(k))].log_density(X, X[:, k])
                        - np.log(X[:, k].std())).tolist() for k in range(1, X.shape[1])]
    save()
    print("ours, identity order: done", flush=True)

    imputer, result["impute_fit"] = timed(lambda: TabICLImputer(estimate="median", cache=True, **common).fit(X_missing))
    imputed, result["impute_transform"] = timed(lambda: imputer.transform(X_missing))
    result["imputed"] = imputed.tolist()
    del imputer
    save()
    print("ours, imputer: done", flush=True)

    # the defaults: 4 orders of 4 members
    detector, result["default_build"] = timed(lambda: _built_detector(X, **common))
    _, result["default_score"] = timed(lambda: detector.score_samples(X))
    save()
    print("ours, defaults: done", flush=True)


def report(official_file, ours_file):
    with open(official_file) as f:
        official = json.load(f)
    with open(ours_file) as f:
        ours = json.load(f)
    X, X_missing = table()
    N, D = X.shape
    # fit = the contexts' build + one scoring pass of the training rows (offset_)
    rows = [("score_samples, identity order, 8 members", official["score_time"],
             ours["identity_build"] + ours["identity_score"], ours["identity_score"])]
    if "default_score" in ours:
        rows.append(("score_samples, defaults (official: x10, extrapolated)", D * official["score_time"],
                     ours["default_build"] + ours["default_score"], ours["default_score"]))
    else:  # not run to the end: 4 orders x 4 members is twice the identity's 1 x 8 at every position
        rows.append(("score_samples, defaults (both extrapolated: official x10, ours x2)", D * official["score_time"],
                     4 * ours["identity_build"] + 2 * ours["identity_score"], 2 * ours["identity_score"]))
    if "impute_time" in official and "impute_transform" in ours:
        rows.append(("impute / transform, 8 members, 2 rounds", official["impute_time"], ours["impute_fit"],
                     ours["impute_transform"]))
    gaps = np.concatenate([np.abs(np.asarray(official["terms"][k]) - np.asarray(ours["terms"][k - 1]))
                           for k in range(1, D)])
    print(f"\n{N} x {D}, one thread each; CPU seconds\n")
    print("| call | official 2.2.0 | ours: fit | ours: call | ratio, call | ratio, fit + call |")
    print("|---|---|---|---|---|---|")
    for name, theirs_time, fit, call in rows:
        print(f"| {name} | {theirs_time:.1f} | {fit:.1f} | {call:.1f} | {theirs_time / call:.1f}x "
              f"| {theirs_time / (fit + call):.1f}x |")
    print(f"\ngap of a factor log p(x_k | x_<k), k = 1..{D - 1}, over the {N} rows (nats): median "
          f"{np.median(gaps):.1e}, 99th percentile {np.percentile(gaps, 99):.1e}, largest {gaps.max():.1e}")
    if "imputed" in official and "imputed" in ours:
        missing = np.isnan(X_missing)
        gap = (np.abs(np.asarray(ours["imputed"]) - np.asarray(official["imputed"])) / X.std(0))[missing]
        print(f"largest gap of an imputed cell: {gap.max():.1e} column standard deviations")


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
