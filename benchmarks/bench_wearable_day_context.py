"""Does day context let the encoder read sleep-onset regularity? Wearable probes with and without it.

Sleep disorder is the one label of the synthetic cohort with a temporal
signal the summary statistics lack: an irregular sleep onset, a change from
one night to the next (``bench_wearable_ceiling.py`` measures that headroom
with hand-made features). A mean over hourly tokens can only hold such a
change if single tokens do. ``WearableEncoder(day_context=True)`` gives each
hour's token the same hour a day before and after. Columns, all width 128
with two bidirectional Mamba-2 layers:

- ``summary``: :class:`WeeklySummaryFeatures`;
- ``untrained`` and ``untrained-day``: random networks without and with day
  context (``max_epochs=0``);
- ``masked`` and ``masked-day``: both pretrained by masked reconstruction
  with ``visible_weight=1`` (the shipped objective) for ``--epochs`` epochs;
- ``masked-day-frozen``: as ``masked-day``, with the tokenizer frozen at its
  random initialisation, so that pretraining can only change the backbone
  (``--frozen-epochs``; 0 leaves the column out);
- ``masked-day-layers``: the ``masked-day`` encoder read out differently,
  its embedding the mean over hours of the tokenizer output and of every
  backbone layer's output, side by side (3 x 128 values), what
  ``pooling="layer_mean"`` computes. Pooling is not part of the masked
  loss, so one pretrained network gives both columns.

Pretraining on ``make_wearable_cohort(n_people=--people, n_weeks=4,
random_state=0)``; probes with :func:`evaluate_probes` on 1,000 other people
x 4 weeks drawn with ``random_state=777`` (the validation seed, not the
benchmark's 2024) at each ``--effect-size``. The encoders are pretrained
once, on effect size 1.

    python benchmarks/bench_wearable_day_context.py            # about 20 minutes on 2 cores
"""

import argparse
import time

import pandas as pd
import torch

from skicml.datasets import make_wearable_cohort, wearable_week_labels
from skicml.wearable import WearableEncoder, WearableModel, WeeklySummaryFeatures, evaluate_probes


class FrozenTokenizerModel(WearableModel):
    """The wearable network with its tokenizer left at the random initialisation."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tokenizer.requires_grad_(False)


class FrozenTokenizerEncoder(WearableEncoder):
    """``WearableEncoder`` that pretrains :class:`FrozenTokenizerModel`."""

    module_class = FrozenTokenizerModel


def pretrain(X, frozen_tokenizer=False, **params):
    start = time.perf_counter()
    encoder_class = FrozenTokenizerEncoder if frozen_tokenizer else WearableEncoder
    encoder = encoder_class(d_model=128, n_layers=2, objective="masked", visible_weight=1.0,
                            random_state=0, **params).fit(X)
    print(f"{params} frozen_tokenizer={frozen_tokenizer}: {time.perf_counter() - start:.0f} s, "
          f"loss {[round(loss, 3) for loss in encoder.history_]}", flush=True)
    return encoder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1000, help="people in the pretraining cohort")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--frozen-epochs", type=int, default=2)
    parser.add_argument("--effect-size", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--probe-people", type=int, default=1000, help="people in each probe cohort")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    X_pretrain, *_ = make_wearable_cohort(n_people=args.people, n_weeks=4, random_state=0)
    encoders = {
        "untrained": pretrain(X_pretrain, max_epochs=0),
        "untrained-day": pretrain(X_pretrain, max_epochs=0, day_context=True),
        "masked": pretrain(X_pretrain, max_epochs=args.epochs),
        # Read out from every layer; its last d_model columns are the mean-pooled embedding.
        "masked-day-layers": pretrain(X_pretrain, max_epochs=args.epochs, day_context=True,
                                      pooling="layer_mean"),
    }
    if args.frozen_epochs:
        encoders["masked-day-frozen"] = pretrain(
            X_pretrain, True, max_epochs=args.frozen_epochs, day_context=True
        )
    summary = WeeklySummaryFeatures().fit(X_pretrain)

    for effect_size in args.effect_size:
        X, meta, y_static, y_weekly = make_wearable_cohort(
            n_people=args.probe_people, n_weeks=4, effect_size=effect_size, random_state=777
        )
        labels, groups = wearable_week_labels(meta, y_static, y_weekly), meta["person_id"].to_numpy()
        features = {"summary": summary.transform(X)}
        features.update({name: encoder.transform(X) for name, encoder in encoders.items()})
        d_model = encoders["masked-day-layers"].config_["d_model"]
        features["masked-day"] = features["masked-day-layers"][:, -d_model:]
        features["masked-day-layers"] = features.pop("masked-day-layers")  # last column, as recorded
        table = pd.DataFrame({
            name: evaluate_probes(F, labels, groups).set_index("task")["score"] for name, F in features.items()
        })
        print(f"\neffect_size={effect_size}: AUROC (sleep_duration: MAE in hours) on "
              f"{args.probe_people} held-out people x 4 weeks")
        print(table.round(3).to_string(), flush=True)


if __name__ == "__main__":
    main()
