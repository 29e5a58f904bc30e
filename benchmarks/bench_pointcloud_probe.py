"""Does a pretrained point-cloud backbone beat random weights, and why do two probes disagree?

::

    python benchmarks/bench_pointcloud_probe.py                          # the shipped backbone
    python benchmarks/bench_pointcloud_probe.py --backbones tiny-pointmae run/pc_hardest_pointmae.pt

Each backbone (shipped names or files) and three random initialisations of
the shipped architecture (``--random-seeds``) are read by the linear probes
that judge a backbone, from the pretraining recipe's to what a user runs:

- ``recipe``: the recipe's probe (:func:`skicml.pointcloud._pretrain.probe_report`:
  512 points, 64 groups, 1,000 training and 500 test clouds, the tokens'
  max and mean, standardised, a converged logistic regression);
- ``head features``: the same converged, standardised probe on the
  features GAPromptClassifier's head reads (the class token after the
  frozen blocks and the tokens' max), on the fine-tuning benchmark's data
  (256 points, 32 groups of 16, 600 training and 500 test clouds);
- ``raw``: the same features and logistic regression, not standardised;
- ``peft=linear``: ``GAPromptClassifier(peft="linear")``, the head trained
  by AdamW for ``--epochs`` epochs as the estimator does (the best epoch on
  a 10% validation split).

The columns step from one protocol to the next, so the one that changes
the order of pretrained and random weights is the one that explains why
they disagree. Printed per backbone and variant, and the pretrained minus
the random mean.
"""

import argparse
import time

import numpy as np


def head_features(network, clouds, batch_size=64):
    """The frozen network's head input ``[CLS, max over tokens]`` (the shape vector is zero for ``linear``)."""
    import torch

    out = []
    network.eval()
    with torch.inference_mode():
        for start in range(0, len(clouds), batch_size):
            batch = torch.as_tensor(clouds[start:start + batch_size], dtype=torch.float32)
            out.append(network.features(batch)[:, :2 * network.backbone.trans_dim].double())
    return torch.cat(out).numpy()


def logistic_probe(train_x, train_y, test_x, test_y, standardise):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    steps = [StandardScaler()] if standardise else []
    probe = make_pipeline(*steps, LogisticRegression(max_iter=5000, C=0.5))
    return float(probe.fit(train_x, train_y).score(test_x, test_y))


def measure(name, pretrained, seed, data, args):
    """Every protocol on one backbone; ``pretrained=None`` is random weights drawn under ``seed``."""
    import torch

    from skicml.base import seeded
    from skicml.pointcloud import GAPromptClassifier, GAPromptNetwork, normalize_point_clouds
    from skicml.pointcloud._backbone import resolve_backbone
    from skicml.pointcloud._pretrain import probe_report

    row = {"backbone": name}
    start = time.perf_counter()
    with seeded(seed):
        backbone, _ = resolve_backbone(pretrained, num_group=64, group_size=16)
    row["recipe"] = probe_report(backbone, n_train=1000, n_test=500, n_points=512)

    with seeded(seed):
        backbone, _ = resolve_backbone(pretrained, num_group=args.n_groups, group_size=args.group_size)
        network = GAPromptNetwork(backbone, 10, peft="linear")
    for variant, (train, test) in data.items():
        train_x = head_features(network, normalize_point_clouds(train.points))
        test_x = head_features(network, normalize_point_clouds(test.points))
        row[f"head {variant}"] = logistic_probe(train_x, train.target, test_x, test.target, standardise=True)
        row[f"raw {variant}"] = logistic_probe(train_x, train.target, test_x, test.target, standardise=False)
        model = GAPromptClassifier(
            pretrained=pretrained, peft="linear", n_points=args.n_points, n_groups=args.n_groups,
            group_size=args.group_size, max_epochs=args.epochs, batch_size=32, lr=1e-3,
            warmup_epochs=max(1, args.epochs // 10), validation_fraction=0.1, device="cpu", random_state=seed,
        )
        row[f"peft {variant}"] = float(model.fit(train.points, train.target).score(test.points, test.target))
    row["seconds"] = time.perf_counter() - start
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbones", nargs="+", default=["tiny-pointmae"], help="shipped names or files")
    parser.add_argument("--random-seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=["hardest", "obj_only"], choices=["obj_only", "hardest"])
    parser.add_argument("--train-per-class", type=int, default=60)
    parser.add_argument("--test-per-class", type=int, default=50)
    parser.add_argument("--n-points", type=int, default=256)
    parser.add_argument("--n-groups", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from skicml.datasets import make_point_clouds

    torch.set_num_threads(args.threads)
    data = {variant: (make_point_clouds(10 * args.train_per_class, n_points=args.n_points, variant=variant,
                                        random_state=1000),
                      make_point_clouds(10 * args.test_per_class, n_points=args.n_points, variant=variant,
                                        random_state=2000))
            for variant in args.variants}
    runs = [(name, name, 0) for name in args.backbones]
    runs += [(f"random {seed}", None, seed) for seed in args.random_seeds]
    rows = []
    for name, pretrained, seed in runs:
        row = measure(name, pretrained, seed, data, args)
        rows.append(row)
        print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in _flat(row).items()),
              flush=True)

    columns = [f"recipe {v}" for v in args.variants]
    for kind in ("head", "raw", "peft"):
        columns += [f"{kind} {v}" for v in args.variants]
    print(f"\nlinear probes; benchmark data {args.n_points} points, {args.n_groups} groups, {args.train_per_class} "
          f"training / {args.test_per_class} test clouds per class; peft=linear {args.epochs} epochs")
    print(f"{'backbone':32s} " + " ".join(f"{c:>16s}" for c in columns))
    flat = [_flat(row) for row in rows]
    for row in flat:
        print(f"{row['backbone'][-32:]:32s} " + " ".join(f"{row[c]:16.3f}" for c in columns))
    random_rows = [row for row in flat if row["backbone"].startswith("random ")]
    if random_rows:
        mean = {c: np.mean([row[c] for row in random_rows]) for c in columns}
        print(f"{'random weights, mean':32s} " + " ".join(f"{mean[c]:16.3f}" for c in columns))
        for row in flat:
            if row in random_rows:
                continue
            print(f"{('minus random: ' + row['backbone'])[-32:]:32s} "
                  + " ".join(f"{row[c] - mean[c]:+16.3f}" for c in columns))


def _flat(row):
    flat = {k: v for k, v in row.items() if k != "recipe"}
    flat.update({f"recipe {variant}": score for variant, score in row["recipe"].items()})
    return flat


if __name__ == "__main__":
    main()
