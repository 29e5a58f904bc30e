"""GAPrompt against full fine-tuning and the parameter-efficient baselines, on held-out synthetic clouds.

::

    python benchmarks/bench_pointcloud_peft.py                       # the recorded run
    python benchmarks/bench_pointcloud_peft.py --seeds 0 --epochs 2  # a quick look

Every method fine-tunes the same backbone (``--pretrained``, the shipped
``tiny-pointmae`` by default, pretrained without labels on clean clouds)
through :class:`skicml.pointcloud.GAPromptClassifier`'s one code path
(``peft=``): GAPrompt, full fine-tuning, the head alone on the frozen
backbone ("linear"), deep token prompts alone (VPT-deep, the token half of
IDPT) and bottleneck adapters alone. Training clouds are the "hardest"
variant of :func:`skicml.datasets.make_point_clouds` (background, a
half-space cut, holes, uneven density, shifted and scaled objects) with
rotations about the vertical axis; test clouds are fresh draws of it, so
every test cloud has a rotation, a cut and holes no training cloud had.
The best epoch is chosen on a validation split of the training clouds,
never on the test clouds. Printed: accuracy mean and standard deviation
over seeds, the trainable share of the parameters, and each method's
accuracy minus full fine-tuning's. ``--random-backbone`` adds every method
of ``--methods`` on a backbone with random weights, drawn under the run's
seed (what pretraining gives each fine-tuning method).

``--head-hidden``, ``--adapter-dim`` and ``--shift-net-width`` set the new
modules' widths (default: the estimator's, which follow the backbone's
width); ``--head-hidden 128 --adapter-dim 16 --shift-net-width 64`` is the
budget before they did (7.65% of the parameters trained instead of 2.55%).

``--ladder`` runs GAPrompt's components one step at a time instead of the
methods: adapters alone, + deep token prompts, + prompt propagation, + point
prompts and the Shift Prompter (GAPrompt), and prints each step's gain with
its sign per seed.

``--few-shot N_WAY K_SHOT`` runs the official few-shot protocol
(``cfgs/fewshot.yaml``: n-way k-shot, 10 folds, 20 test clouds per class) on
the synthetic clouds: per fold, ``N_WAY`` of the ten classes drawn at random,
``K_SHOT`` training clouds and 20 test clouds of each; no validation split
(the last epoch is kept; the official runner keeps the best test epoch).
Printed: accuracy mean and standard deviation over the folds.

``--speed`` times instead one training step (forward, backward, AdamW on the
trainable parameters) and one eval forward of each method's network on a
batch of 32 clouds at the default size (512 points, 64 groups of 16), as
ratios to the head-only method.
"""

import argparse
import time

import numpy as np

from skicml.datasets import make_point_clouds
from skicml.pointcloud import GAPromptClassifier

METHODS = ("gaprompt", "full", "linear", "prompt", "adapter")

#: GAPrompt's components one at a time, as public parameters of the estimator.
LADDER = {
    "adapters": dict(peft="adapter"),
    "+ deep prompts": dict(shift_net=False, n_point_prompts=0, propagation=None),
    "+ propagation": dict(shift_net=False, n_point_prompts=0),
    "+ point prompts, shift": dict(),
}


def widths(args):
    """The widths asked for on the command line (the others follow the backbone's width)."""
    asked = {"head_hidden": args.head_hidden, "adapter_dim": args.adapter_dim,
             "shift_net_width": args.shift_net_width}
    return {name: value for name, value in asked.items() if value is not None}


def run(method, seed, data, args, pretrained, validation_fraction=0.1, **params):
    model = GAPromptClassifier(
        pretrained=pretrained, **({"peft": method} | params), n_points=args.n_points, n_groups=args.n_groups,
        group_size=args.group_size, max_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        warmup_epochs=max(1, args.epochs // 10), validation_fraction=validation_fraction, device="cpu",
        random_state=seed, **widths(args),
    )
    start = time.perf_counter()
    model.fit(data["train"].points, data["train"].target)
    seconds = time.perf_counter() - start
    accuracy = model.score(data["test"].points, data["test"].target)
    return {"accuracy": accuracy, "ratio": model.trainable_ratio_, "params": model.n_trainable_params_,
            "seconds": seconds, "best_epoch": model.best_epoch_}


def speed(args):
    import torch

    from _common import median_times
    from skicml.pointcloud import GAPromptNetwork
    from skicml.pointcloud._backbone import resolve_backbone

    clouds = torch.as_tensor(make_point_clouds(32, n_points=512, variant="hardest", random_state=0).points)
    times = {}
    for method in args.methods:
        backbone, _ = resolve_backbone(args.pretrained, num_group=64, group_size=16)
        network = GAPromptNetwork(backbone, 10, peft=method, **widths(args))
        optimizer = torch.optim.AdamW(network.trainable_parameters(), lr=1e-4)

        def step(network=network, optimizer=optimizer):
            network.train()
            loss = network(clouds).logsumexp(dim=1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        def forward(network=network):
            network.eval()
            with torch.inference_mode():
                network(clouds)

        result = median_times({"step": step, "forward": forward}, repeats=3, warmup=1)
        times[method] = (result["step"][0], result["forward"][0])
    base = times.get("linear", next(iter(times.values())))
    print(f"one batch of 32 clouds, 512 points, 64 groups of 16, {torch.get_num_threads()} thread(s), CPU")
    print(f"{'method':10s} {'train step s':>12s} {'vs linear':>9s} {'forward s':>10s} {'vs linear':>9s}")
    for method, (train_s, eval_s) in times.items():
        print(f"{method:10s} {train_s:12.3f} {train_s / base[0]:8.2f}x {eval_s:10.3f} {eval_s / base[1]:8.2f}x")


def _data(args, seed, n_classes=10):
    return {
        "train": make_point_clouds(n_classes * args.train_per_class, n_points=args.n_points, variant=args.variant,
                                   random_state=1000 + seed),
        "test": make_point_clouds(n_classes * args.test_per_class, n_points=args.n_points, variant=args.variant,
                                  random_state=2000 + seed),
    }


def ladder(args):
    rows = {name: [] for name in LADDER}
    for seed in args.seeds:
        data = _data(args, seed)
        for name, params in LADDER.items():
            result = run("gaprompt", seed, data, args, args.pretrained, **params)
            rows[name].append(result)
            print(f"seed {seed} {name:24s} accuracy {result['accuracy']:.3f}  trainable {result['ratio']:.2%}  "
                  f"best epoch {result['best_epoch']} of {args.epochs}  {result['seconds']:.0f} s", flush=True)
    print(f"\nthe component ladder: {args.variant} clouds, {args.n_points} points, {args.train_per_class} training / "
          f"{args.test_per_class} test clouds per class, {args.epochs} epochs, seeds {args.seeds}, backbone "
          f"{args.pretrained}")
    print(f"{'step':24s} {'accuracy':>16s} {'trainable':>10s} {'gain':>7s}  gain per seed   best epochs")
    previous = None
    for name, results in rows.items():
        acc = np.array([r["accuracy"] for r in results])
        gains = acc - previous if previous is not None else None
        gain = f"{gains.mean():+.3f}" if gains is not None else "-"
        per_seed = " ".join(f"{g:+.3f}" for g in gains) if gains is not None else "-"
        epochs = " ".join(str(r["best_epoch"]) for r in results)
        print(f"{name:24s} {acc.mean():8.3f} +- {acc.std():.3f} {results[0]['ratio']:10.2%} {gain:>7s}  "
              f"{per_seed:14s}  {epochs}")
        previous = acc


def few_shot(args):
    n_way, k_shot = args.few_shot
    n_classes, n_test = 10, 20
    if not 2 <= n_way <= n_classes:
        raise SystemExit(f"--few-shot: N_WAY must lie in [2, {n_classes}], got {n_way}.")
    pool = {
        "train": make_point_clouds(n_classes * max(k_shot, 1) * 4, n_points=args.n_points, variant=args.variant,
                                   random_state=3000),
        "test": make_point_clouds(n_classes * n_test * 4, n_points=args.n_points, variant=args.variant,
                                  random_state=4000),
    }
    results = {method: [] for method in args.methods}
    for fold in range(args.folds):
        rng = np.random.default_rng(fold)
        classes = np.sort(rng.choice(n_classes, n_way, replace=False))
        fold_data = {}
        for split, per_class in (("train", k_shot), ("test", n_test)):
            index = np.concatenate([rng.choice(np.flatnonzero(pool[split].target == c), per_class, replace=False)
                                    for c in classes])
            fold_data[split] = argparse.Namespace(points=pool[split].points[index], target=pool[split].target[index])
        for method in args.methods:
            result = run(method, fold, fold_data, args, args.pretrained, validation_fraction=None)
            results[method].append(result["accuracy"])
            print(f"fold {fold} {method:10s} accuracy {result['accuracy']:.3f}  {result['seconds']:.0f} s", flush=True)
    print(f"\n{n_way}-way {k_shot}-shot, {args.folds} folds, {n_test} test clouds per class, {args.variant} clouds, "
          f"{args.n_points} points, {args.epochs} epochs, backbone {args.pretrained}")
    for method, accs in results.items():
        print(f"{method:10s} {np.mean(accs):.3f} +- {np.std(accs):.3f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--train-per-class", type=int, default=60)
    parser.add_argument("--test-per-class", type=int, default=50)
    parser.add_argument("--variant", default="hardest", choices=["obj_only", "obj_bg", "hardest"])
    parser.add_argument("--n-points", type=int, default=256)
    parser.add_argument("--n-groups", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--pretrained", default="tiny-pointmae")
    parser.add_argument("--random-backbone", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--speed", action="store_true", help="time one step per method instead")
    parser.add_argument("--head-hidden", type=int, default=None)
    parser.add_argument("--adapter-dim", type=int, default=None)
    parser.add_argument("--shift-net-width", type=int, default=None)
    parser.add_argument("--ladder", action="store_true", help="GAPrompt's components one step at a time")
    parser.add_argument("--few-shot", nargs=2, type=int, metavar=("N_WAY", "K_SHOT"))
    parser.add_argument("--folds", type=int, default=10)
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    if args.speed:
        return speed(args)
    if args.few_shot:
        return few_shot(args)
    if args.ladder:
        return ladder(args)
    n_classes = 10
    rows = []
    runs = [(m, args.pretrained) for m in args.methods]
    if args.random_backbone:
        runs += [(m, None) for m in args.methods]
    for seed in args.seeds:
        data = _data(args, seed, n_classes)
        for method, pretrained in runs:
            result = run(method, seed, data, args, pretrained)
            label = method if pretrained is not None else f"{method} (random backbone)"
            rows.append(dict(result, method=label, seed=seed))
            print(f"seed {seed} {label:28s} accuracy {result['accuracy']:.3f}  trainable "
                  f"{result['ratio']:.2%}  best epoch {result['best_epoch']}  {result['seconds']:.0f} s",
                  flush=True)

    print(f"\n{args.variant} clouds, {args.n_points} points, {n_classes} classes, {args.train_per_class} "
          f"training / {args.test_per_class} test clouds per class, {args.epochs} epochs, "
          f"seeds {args.seeds}, backbone {args.pretrained}")
    labels = list(dict.fromkeys(r["method"] for r in rows))
    full = np.mean([r["accuracy"] for r in rows if r["method"] == "full"]) if "full" in labels else None
    print(f"{'method':28s} {'accuracy':>16s} {'trainable':>10s} {'params':>9s} {'vs full FT':>10s} "
          f"{'s / fit':>8s}")
    for label in labels:
        mine = [r for r in rows if r["method"] == label]
        acc = np.array([r["accuracy"] for r in mine])
        delta = f"{acc.mean() - full:+.3f}" if full is not None else "-"
        print(f"{label:28s} {acc.mean():8.3f} +- {acc.std():.3f} {mine[0]['ratio']:10.2%} "
              f"{mine[0]['params']:9d} {delta:>10s} {np.mean([r['seconds'] for r in mine]):8.0f}")


if __name__ == "__main__":
    main()
