"""Torch's intra-op threads for skicml's small-op models, on a quiet machine and beside a busy process.

::

    python benchmarks/bench_threads.py [--repeats 3]

The thread policy (:func:`skicml.set_config`, ``torch_threads``) defaults to
one thread per process. This benchmark is its evidence: each workload (a
short Race-DiT fine-tune, a GAPrompt epoch, a TabICL prediction) runs with
``torch_threads`` 1 and 2, first alone and then while one competing process
spins on a core (as another job on a shared 2-core machine does). It prints
the median wall and CPU seconds of each, and the ratio of two threads to
one: above 1 means the second thread costs time.
"""

import argparse
import multiprocessing
import os
import statistics
import time

import numpy as np

import skicml


def _spin(stop):
    # A competing process: pure-Python work that keeps one core busy.
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _race_dit():
    from sklearn.datasets import load_digits

    from skicml.moe import RaceDiTGenerator

    digits = load_digits()
    model = RaceDiTGenerator(pretrained="race-dit-digits", max_epochs=1, lr=1e-4, random_state=0, device="cpu")
    model.fit(digits.images[:1500], digits.target[:1500]).sample(50, y=np.arange(50) % 10, guidance_scale=3.0,
                                                                 n_steps=25, random_state=0)


def _gaprompt():
    from skicml.datasets import make_point_clouds
    from skicml.pointcloud import GAPromptClassifier

    data = make_point_clouds(200, n_points=256, variant="hardest", random_state=0)
    GAPromptClassifier(pretrained="tiny-pointmae", n_points=256, n_groups=16, max_epochs=1, warmup_epochs=0,
                       device="cpu", random_state=0).fit(data.points, data.target)


def _tabicl():
    from sklearn.datasets import load_breast_cancer

    from skicml import TabICLClassifier

    X, y = load_breast_cancer(return_X_y=True)
    TabICLClassifier(random_state=0, device="cpu").fit(X[:256], y[:256]).predict_proba(X[256:])


WORKLOADS = {"Race-DiT fine-tune + 50 samples": _race_dit, "GAPrompt, 1 epoch of 200 clouds": _gaprompt,
             "TabICL, 256 rows, predict 313": _tabicl}


def _measure(workload, threads, repeats):
    walls, cpus = [], []
    for _ in range(repeats):
        with skicml.config_context(torch_threads=threads):
            wall, cpu = time.perf_counter(), time.process_time()
            workload()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average before: {os.getloadavg()[0]:.2f}")
    for workload in WORKLOADS.values():
        workload()  # warm: imports, weights read, kernels compiled
    rows = []
    for condition in ("alone", "beside a busy process"):
        stop = multiprocessing.Event()
        rival = None
        if condition != "alone":
            rival = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
            rival.start()
        try:
            for name, workload in WORKLOADS.items():
                one = _measure(workload, 1, args.repeats)
                two = _measure(workload, 2, args.repeats)
                rows.append((condition, name, *one, *two, two[0] / one[0]))
        finally:
            stop.set()
            if rival is not None:
                rival.join()
    header = ("condition", "workload", "1 thread wall s", "1 thread CPU s", "2 threads wall s", "2 threads CPU s",
              "wall ratio 2/1")
    widths = [max(len(h), 30 if i == 1 else 0) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for condition, name, w1, c1, w2, c2, ratio in rows:
        cells = (condition, name, f"{w1:.2f}", f"{c1:.2f}", f"{w2:.2f}", f"{c2:.2f}", f"{ratio:.2f}x")
        print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))


if __name__ == "__main__":
    main()
