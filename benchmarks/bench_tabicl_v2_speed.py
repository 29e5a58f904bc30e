"""Speed and agreement of skicml's TabICL v2 estimators against the official ``tabicl==2.2.0`` ones.

Both sides load the same random-weight v2 network from one checkpoint file
(``{"config", "state_dict"}``, the format both read), so the comparison is of
the inference machinery alone: preprocessing, ensembling, caching, batching.
The official estimators run with their fit-time KV cache (``kv_cache=True``,
its fastest repeated-prediction mode) and AMP off (float32 on the CPU, as
ours); ours with their cache, the official temperature 0.9 and no principal
view. For each training size: the time of ``fit``, of the first ``predict``
and the median of three more on the same fit (the two implementations take
turns, so that a change in the load of a shared machine falls on both), the
load average while it ran, and the largest difference of the predictions
(regression: the mean, relative to the target's standard deviation;
classification: the probabilities). ``--profile`` adds, per size, the
operators that take most of one repeated prediction of each.

``tabicl`` 2.2.0 has the import name of the 0.1.4 the test suite uses, so it
is read from its own folder (``pip install --no-deps --target
.venv/tabicl-2.2.0 tabicl==2.2.0``, the test command's), put first on the
path of this process only.

    python benchmarks/bench_tabicl_v2_speed.py --sizes 1000 10000 50000 --threads 2
"""

import argparse
import os
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from _common import timed

ROOT = Path(__file__).resolve().parents[1]

#: A mid-sized v2 network: big enough that the network, not Python, dominates.
CONFIG = dict(embed_dim=64, col_num_blocks=2, col_nhead=4, col_num_inds=32, row_num_blocks=2, row_nhead=4,
              row_num_cls=4, icl_num_blocks=4, icl_nhead=4)


def _official_tabicl(path):
    sys.path.insert(0, str(path))
    import tabicl
    from tabicl.__about__ import __version__

    if not str(tabicl.__file__).startswith(str(path)):
        raise SystemExit(f"tabicl was imported from {tabicl.__file__}, not from {path}")
    return tabicl, __version__


def _checkpoint(folder, task):
    from skicml.tabicl import TabICLv2Model

    config = dict(CONFIG, max_classes=0 if task == "regression" else 10)
    torch.manual_seed(0)
    model = TabICLv2Model(**config)
    with torch.no_grad():  # away from the zero initialisation: every block matters
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    path = Path(folder) / f"{task}.ckpt"
    torch.save({"config": model.config, "state_dict": model.state_dict()}, path)
    return path


def _table(n_train, n_test, n_features, task, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n_train + n_test, n_features)).astype(np.float32)
    signal = X @ rng.normal(size=n_features) + np.sin(X[:, 0] * 2)
    y = signal + 0.3 * rng.normal(size=len(X))
    if task == "classification":
        y = np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75]))
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def _top_operators(function, count=4):
    """The operators taking most of one call of ``function``: [(name, seconds), ...]."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        function()
    events = sorted(prof.key_averages(), key=lambda event: event.self_cpu_time_total, reverse=True)
    return [(event.key, event.self_cpu_time_total / 1e6) for event in events[:count]]


def measure(task, official, path, n_train, n_test, n_features, n_estimators, repeats, profile=False):
    from skicml import TabICLClassifier, TabICLRegressor

    X_train, X_test, y_train, _ = _table(n_train, n_test, n_features, task)
    if task == "regression":
        theirs = official.TabICLRegressor(model_path=path, allow_auto_download=False, n_estimators=n_estimators,
                                          kv_cache=True, device="cpu", use_amp=False, use_fa3=False,
                                          random_state=0)
        ours = TabICLRegressor(pretrained=path, n_estimators=n_estimators, cache=True, device="cpu",
                               random_state=0)
        predict = {"official": lambda: theirs.predict(X_test), "skicml": lambda: ours.predict(X_test)}
    else:
        theirs = official.TabICLClassifier(model_path=path, allow_auto_download=False, n_estimators=n_estimators,
                                           kv_cache=True, device="cpu", use_amp=False, use_fa3=False,
                                           random_state=0)
        ours = TabICLClassifier(pretrained=path, n_estimators=n_estimators, cache=True, device="cpu",
                                random_state=0, softmax_temperature=0.9, pca_components=None)
        predict = {"official": lambda: theirs.predict_proba(X_test), "skicml": lambda: ours.predict_proba(X_test)}
    load = [os.getloadavg()[0]]
    row = {}
    for name, estimator in (("official", theirs), ("skicml", ours)):
        fit_seconds, _ = timed(lambda: estimator.fit(X_train, y_train))
        first, out = timed(predict[name])
        row[name] = dict(fit=fit_seconds, first=first, again=[], out=out)
        load.append(os.getloadavg()[0])
    for _ in range(repeats):  # taking turns: a changing load falls on both
        for name in row:
            row[name]["again"].append(timed(predict[name])[0])
        load.append(os.getloadavg()[0])
    for name in row:
        row[name]["again"] = statistics.median(row[name]["again"]) if repeats else np.nan
        row[name]["top"] = _top_operators(predict[name]) if profile else []
    difference = np.abs(row["official"]["out"] - row["skicml"]["out"]).max()
    if task == "regression":
        difference /= np.std(y_train)
    return row, difference, float(np.mean(load))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--n-features", type=int, default=10)
    parser.add_argument("--n-estimators", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", default=["regression", "classification"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true",
                        help="print the operators taking most of one repeated prediction of each")
    parser.add_argument("--official-path", default=os.environ.get("SKICML_TABICL2_PATH",
                                                                  ROOT / ".venv" / "tabicl-2.2.0"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    official, version = _official_tabicl(args.official_path)
    print(f"tabicl {version} from {args.official_path}; torch {torch.__version__}, {args.threads} threads, "
          f"{args.n_estimators} members, {args.n_features} features, {args.n_test} test rows, network {CONFIG}")
    header = (f"{'task':<15}{'n_train':>8}  {'fit off':>8}{'fit ours':>9}  {'pred1 off':>10}{'pred1 ours':>11}"
              f"  {'predN off':>10}{'predN ours':>11}  {'fit+pred x':>11}{'predN x':>8}  {'max diff':>9}{'load':>6}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as folder:
        for task in args.tasks:
            path = _checkpoint(folder, task)
            for n_train in args.sizes:
                row, difference, load = measure(task, official, path, n_train, args.n_test, args.n_features,
                                                args.n_estimators, args.repeats, args.profile)
                off, ours = row["official"], row["skicml"]
                total = (off["fit"] + off["first"]) / (ours["fit"] + ours["first"])
                print(f"{task:<15}{n_train:>8}  {off['fit']:8.2f}{ours['fit']:9.2f}  {off['first']:10.2f}"
                      f"{ours['first']:11.2f}  {off['again']:10.2f}{ours['again']:11.2f}  {total:10.2f}x"
                      f"{off['again'] / ours['again']:7.2f}x  {difference:9.1e}{load:6.1f}", flush=True)
                for name in row:
                    if row[name]["top"]:
                        top = ", ".join(f"{op} {seconds:.2f} s" for op, seconds in row[name]["top"])
                        print(f"    {name} predict: {top}", flush=True)


if __name__ == "__main__":
    main()
