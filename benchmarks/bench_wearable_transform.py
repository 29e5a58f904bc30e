"""WearableEncoder.transform throughput of the shipped encoder, in weeks per second.

The user guide's cohort (500 people, 4 weeks each, the 12 core variables)
goes through ``WearableEncoder(pretrained="wearable-core-small")``; every
setting is timed by the shared ``median_times`` helper (interleaved rounds,
median), with 1 and 2 torch threads and several batch sizes. The
``summary-statistics`` row is the baseline a user would otherwise compute,
:class:`~skicml.wearable.WeeklySummaryFeatures` on the same weeks.

    python benchmarks/bench_wearable_transform.py
    python benchmarks/bench_wearable_transform.py --threads 1 --clock process   # on a busy machine

``--clock process`` times CPU seconds of this process instead of wall time:
with one thread it is what the wall time would be on an idle core, and it
does not count the time other jobs hold the cores.
"""

import argparse
import time

import torch
from _common import median_times

from skicml.datasets import make_wearable_cohort
from skicml.wearable import WearableEncoder, WeeklySummaryFeatures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=500)
    parser.add_argument("--weeks", type=int, default=4)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=["wall", "process"], default="wall")
    args = parser.parse_args()

    X, *_ = make_wearable_cohort(n_people=args.people, n_weeks=args.weeks, random_state=0)
    n_weeks = len(X)
    summary = WeeklySummaryFeatures().fit(X)
    print(f"{n_weeks} weeks of shape {X.shape[1:]} ({X.dtype}), torch {torch.__version__}, {args.clock} clock")
    print(f"{'threads':>7s} {'setting':28s} {'seconds':>8s} {'weeks/s':>8s} {'vs summary':>11s}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        callables = {"summary-statistics": lambda: summary.transform(X)}
        for batch_size in args.batch_sizes:
            encoder = WearableEncoder(pretrained="wearable-core-small", batch_size=batch_size, random_state=0).fit(X)
            callables[f"encoder batch_size={batch_size}"] = lambda encoder=encoder: encoder.transform(X)
        clock = time.perf_counter if args.clock == "wall" else time.process_time
        times = median_times(callables, repeats=args.repeats, warmup=1, clock=clock)
        baseline = times["summary-statistics"][0]
        for name, (seconds, _) in times.items():
            print(f"{threads:7d} {name:28s} {seconds:8.2f} {n_weeks / seconds:8.0f} {seconds / baseline:10.1f}x")


if __name__ == "__main__":
    main()
