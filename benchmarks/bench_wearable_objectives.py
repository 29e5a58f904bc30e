"""Which pretraining objective keeps the health signal? A small diagnostic.

Pretrains ``WearableEncoder`` on 400 synthetic people x 4 weeks with one
objective, then probes 300 other people (``evaluate_probes``) and prints
AUROC per label and sleep-duration MAE beside the untrained network and
the summary statistics. Objectives:

- ``infonce``: the shipped objective (two augmented views of a week);
- ``vicreg``: invariance, variance and covariance terms (Bardes et al.,
  2022) between the same two views, on an unnormalised expander;
- ``masked``: ``WearableEncoder(objective="masked")``; 30% of hours and
  two 6-24 h blocks are hidden, a linear head predicts their observed
  z-scores, each variable weighted equally.

VICReg is a subclass of ``WearableModel`` defined here, trained by a
subclass of ``WearableEncoder`` that builds it (``module_class``).

    python benchmarks/bench_wearable_objectives.py --d-model 128 --epochs 3 \
        --objectives untrained infonce vicreg masked
"""

import argparse
import time

import torch
import torch.nn.functional as F


def build_vicreg_encoder_class():
    from skicml.wearable import WearableEncoder, WearableModel, augment_week

    class VICRegModel(WearableModel):
        def forward(self, weeks, partner=None):
            views = [augment_week(weeks, self.augment, self.channel_std, self.scalable_channels)
                     for _ in range(2)]
            return vicreg_loss(*self.head.mlp(self.embed(torch.cat(views))).chunk(2))

    class VICRegEncoder(WearableEncoder):
        module_class = VICRegModel

    return VICRegEncoder


def vicreg_loss(z1, z2, invariance=25.0, variance=25.0, covariance=1.0):
    def spread(z):
        return F.relu(1 - torch.sqrt(z.var(0) + 1e-4)).mean()

    def decorrelation(z):
        z = z - z.mean(0)
        cov = z.T @ z / (len(z) - 1)
        return (cov - torch.diag(torch.diag(cov))).pow(2).sum() / z.shape[1]

    return (invariance * F.mse_loss(z1, z2) + variance * (spread(z1) + spread(z2))
            + covariance * (decorrelation(z1) + decorrelation(z2)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--objectives", nargs="+", default=["untrained", "infonce", "vicreg", "masked"])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from skicml.datasets import make_wearable_cohort, wearable_week_labels
    from skicml.wearable import WearableEncoder, WeeklySummaryFeatures, evaluate_probes

    X, *_ = make_wearable_cohort(n_people=400, n_weeks=4, random_state=0)
    X_probe, meta, y_static, y_weekly = make_wearable_cohort(n_people=300, n_weeks=4, random_state=2024)
    labels, people = wearable_week_labels(meta, y_static, y_weekly), meta["person_id"].to_numpy()
    columns = {"summary": WeeklySummaryFeatures().fit(X).transform(X_probe)}
    for objective in args.objectives:
        encoder_class = build_vicreg_encoder_class() if objective == "vicreg" else WearableEncoder
        encoder = encoder_class(
            d_model=args.d_model, n_layers=2, max_epochs=0 if objective == "untrained" else args.epochs,
            objective="masked" if objective == "masked" else "infonce",
            proj_dim=4 * args.d_model if objective == "vicreg" else 32, random_state=0)
        start = time.perf_counter()
        columns[objective] = encoder.fit(X).transform(X_probe)
        print(f"{objective}: {time.perf_counter() - start:.0f} s, loss per epoch "
              f"{[round(loss, 3) for loss in encoder.history_]}", flush=True)

    table = {name: evaluate_probes(features, labels, people).set_index("task")["score"]
             for name, features in columns.items()}
    print(f"\nd_model={args.d_model}, {args.epochs} epochs; AUROC, sleep_duration MAE in hours")
    print(f"{'task':<16}" + "".join(f"{name:>11}" for name in table))
    for task in next(iter(table.values())).index:
        print(f"{task:<16}" + "".join(f"{scores[task]:11.3f}" for scores in table.values()))


if __name__ == "__main__":
    main()
