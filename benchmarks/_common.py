"""Scaffolding the benchmarks share: the one timing helper.

The benchmarks run as scripts (``python benchmarks/bench_ops_rms_norm.py``),
so Python puts this folder first on the path and ``from _common import
median_times`` finds this file.
"""

import statistics
import time

import torch

__all__ = ["median_times"]


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
