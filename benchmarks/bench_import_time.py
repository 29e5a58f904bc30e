"""Import cost: ``import skicml`` and each family against ``import torch``.

Every statement runs in a fresh interpreter, interleaved round by round so a
slow spell of the machine falls on all of them alike; the median of
``--repeats`` wall times is reported, with its ratio to ``import torch``
(the floor any torch-backed family pays). ``python -c pass`` is the
interpreter's own start, included in every row.

    python benchmarks/bench_import_time.py
"""

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS = {
    "python -c pass": "pass",
    "import torch": "import torch",
    "import skicml": "import skicml",
    "from skicml import TabICLClassifier": "from skicml import TabICLClassifier",
    "from skicml import WearableEncoder": "from skicml import WearableEncoder",
    "from skicml import GraphGPTRegressor": "from skicml import GraphGPTRegressor",
    "from skicml import WhitenedCLIPScorer": "from skicml import WhitenedCLIPScorer",
}


def wall_time(statement):
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for statement in STATEMENTS.values():
        wall_time(statement)  # warm the file cache
    times = {name: [] for name in STATEMENTS}
    for _ in range(args.repeats):
        for name, statement in STATEMENTS.items():
            times[name].append(wall_time(statement))
    torch_s = statistics.median(times["import torch"])
    print(f"median of {args.repeats} fresh processes")
    print(f"{'statement':40s} {'seconds':>8s} {'vs import torch':>16s}")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"{name:40s} {median:8.3f} {median / torch_s:15.2f}x")


if __name__ == "__main__":
    main()
