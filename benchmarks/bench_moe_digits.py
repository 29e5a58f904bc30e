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

On the 297 held-out digits: the negative denoising loss of
:meth:`~skicml.moe.RaceDiTGenerator.score_samples` (ten timesteps, fixed
noise; the spec's primary metric, higher is better), the denoising MSE of
whole batches at one timestep (t = 5, 50, 100, 150, 195: how sampling sees
the model, where a batch holds one timestep), the experts per token at
those timesteps, and from 200 conditional samples (20 a class, 50 DDIM
steps, no guidance) the Fréchet distance in a digit classifier's features
and that classifier's accuracy on them (:func:`skicml.moe.sample_quality`; the classifier
and the reference are the 1,500 training digits).
Each over ``--seeds``, with the mean and standard deviation, and each
contender's score minus dense's.

    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py                   # the recorded run
    OMP_NUM_THREADS=1 python benchmarks/bench_moe_digits.py --quick           # a smoke test

The larger run prepared for a GPU (about 10 minutes on one; not yet run):
digits upsampled to 16x16 (64 tokens), width 256, depth 8, 16 experts::

    python benchmarks/bench_moe_digits.py --device cuda --upsample 2 --width 256 --depth 8 \
        --experts 16 --epochs 400 --seeds 0 1 2 --contenders race token dense
"""

import argparse
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
}
TIMESTEPS = (5, 50, 100, 150, 195)


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


def run(name, seed, args, data):
    settings = dict(hidden_dim=args.width, depth=args.depth, n_heads=4, n_experts=args.experts, top_k=2.0,
                    max_epochs=args.epochs, lr=args.lr, random_state=seed, device=args.device) | CONTENDERS[name]
    model = RaceDiTGenerator(**settings)
    start = time.perf_counter()
    model.fit(data["train_x"], data["train_y"])
    seconds = time.perf_counter() - start
    row = {"score": model.score(data["test_x"], data["test_y"]), "seconds": seconds}
    for t in TIMESTEPS:
        row[f"mse@{t}"], row[f"k@{t}"] = single_t_mse(model, data["test_x"], data["test_y"], t)
    labels = np.repeat(np.arange(10), args.samples_per_class)
    samples = model.sample(len(labels), y=labels, n_steps=50, random_state=seed)
    quality = sample_quality(samples, labels, data["train_x"], data["train_y"], random_state=0)
    row["fd"], row["accuracy"] = quality["frechet_distance"], quality["classifier_accuracy"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=list(CONTENDERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=125, help="125 epochs of 1,500 digits: 1,500 steps")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--samples-per-class", type=int, default=20)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--upsample", type=int, default=1, help="repeat each pixel this many times per side")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.epochs, args.width, args.depth, args.samples_per_class = [0], 1, 16, 1, 2
    torch.set_num_threads(args.threads)
    digits = load_digits()
    pixels = np.kron(digits.images, np.ones((args.upsample, args.upsample)))
    data = {"train_x": pixels[:1500], "train_y": digits.target[:1500],
            "test_x": pixels[1500:], "test_y": digits.target[1500:]}
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{args.threads} thread(s)"
    print(f"torch {torch.__version__}, {where}; {pixels.shape[1]}x{pixels.shape[2]} digits, width {args.width}, "
          f"depth {args.depth}, {args.experts} experts, {args.epochs} epochs at lr {args.lr}, seeds {args.seeds}")
    results = {}
    for name in args.contenders:
        results[name] = []
        for seed in args.seeds:
            row = run(name, seed, args, data)
            results[name].append(row)
            print(f"{name:13s} seed {seed}: score {row['score']:.4f}  fd {row['fd']:.3f}  accuracy "
                  f"{row['accuracy']:.3f}  " + "  ".join(f"mse@{t} {row[f'mse@{t}']:.4f}" for t in TIMESTEPS)
                  + f"  {row['seconds']:.0f} s", flush=True)

    columns = ["score", "fd", "accuracy"] + [f"mse@{t}" for t in TIMESTEPS] + [f"k@{t}" for t in TIMESTEPS]
    print("\nmean (std) over seeds; score = -denoising loss (higher is better), fd lower is better, "
          "k@t = experts per token")
    print(f"{'contender':13s} " + " ".join(f"{c:>15s}" for c in columns) + f" {'s / fit':>8s}")
    for name, rows in results.items():
        cells = []
        for column in columns:
            values = np.array([r[column] for r in rows])
            cells.append(f"{values.mean():8.4f} ({values.std():.4f})" if np.isfinite(values).all() else f"{'-':>15s}")
        print(f"{name:13s} " + " ".join(f"{c:>15s}" for c in cells)
              + f" {np.mean([r['seconds'] for r in rows]):8.0f}")
    if "dense" in results:
        print("\ndifference from dense (mean over seeds; positive is better for score and accuracy, "
              "negative for fd and mse):")
        base = {c: np.mean([r[c] for r in results["dense"]]) for c in columns[:8]}
        for name, rows in results.items():
            if name != "dense":
                print(f"{name:13s} " + "  ".join(
                    f"{c} {np.mean([r[c] for r in rows]) - base[c]:+.4f}" for c in columns[:8]))


if __name__ == "__main__":
    main()
