"""How much room is there above the summary statistics? Wearable probes at several effect sizes.

The encoder loses to :class:`WeeklySummaryFeatures` on sleep disorder and
infection in ``bench_wearable_probes.py``. This benchmark asks whether any
encoder could win there, on the same evaluation cohort (1,000 people x
4 weeks, ``random_state=2024``) drawn at several ``effect_size`` values:

- ``summary``: the summary statistics;
- ``untrained``: the shipped architecture with random weights;
- ``untrained-day``: the same with ``day_context=True``, so that each
  hour's token also reads the same hour a day before and after;
- ``shipped``: ``wearable-core-small`` with its mean pooling;
- ``shipped-ms``: the same tokens pooled by their mean and standard
  deviation over hours (statistics pooling, as in x-vectors), which gives a
  linear probe second moments over time, as the summary's spread statistics do;
- ``summary+untrained`` and ``summary+shipped``: the summary statistics
  concatenated with an embedding. What these gain over ``summary`` bounds
  what the encoder's features add for a linear probe: where they stay level
  with it, the summary has already read what the probe can use.
- ``summary+temporal``: the summary statistics plus hand-made temporal
  features that no weekly statistic of one variable holds: the spread and
  mean of the nightly sleep-onset clock time over the week, and the largest
  three daily sums of illness-direction z-scores (fever, resting heart rate,
  breathing rate and sleep up; HRV and steps down) with counts of days past
  two thresholds. What this column gains over ``summary`` is headroom that
  an encoder which learned the week's temporal structure could claim.

Every column goes through the same probes of :func:`evaluate_probes`.

    python benchmarks/bench_wearable_ceiling.py                      # effect sizes 1.0, 0.5, 0.3
    python benchmarks/bench_wearable_ceiling.py --effect-size 1.0 --people 300   # quicker
"""

import argparse
import warnings

import numpy as np
import pandas as pd
import torch

from skicml.datasets import make_wearable_cohort, wearable_variables, wearable_week_labels
from skicml.wearable import WearableEncoder, WeeklySummaryFeatures, evaluate_probes


def statistics_pooled(encoder, X, batch_size=256):
    """Mean and standard deviation over hours of the encoder's backbone tokens."""
    module = encoder.module_.eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(X), batch_size):
            weeks = torch.as_tensor(X[start:start + batch_size], dtype=torch.float32)
            tokens = module.backbone(module.tokenizer(*module.normalize(weeks)))
            out.append(torch.cat([tokens.mean(1), tokens.std(1)], -1).numpy())
    return np.concatenate(out)


# Direction in which an infection moves each variable (the generator's effects).
ILLNESS_DIRECTION = {"wrist_temp_dev_c": 1, "resting_hr_bpm": 1, "resp_rate_bpm": 1,
                     "sleep_asleep_min": 1, "hrv_sdnn_ms": -1, "steps_watch": -1}


def nights(X, channel):
    """``(n_weeks, 7, 24)`` windows from noon to noon (the last half-night is NaN)."""
    values = X[:, :, channel]
    padded = np.concatenate([values[:, 12:], np.full((len(X), 12), np.nan)], axis=1)
    return padded.reshape(len(X), 7, 24)


def temporal_features(X):
    """Sleep-onset regularity and daily illness scores of each week (see the module docstring)."""
    names = list(wearable_variables("core")["name"])
    asleep = np.nan_to_num(nights(X, names.index("sleep_asleep_min")))
    slept = asleep > 0
    first = slept.argmax(-1)
    minutes = np.take_along_axis(asleep, first[..., None], -1)[..., 0]
    onset = np.where(slept.any(-1), first + 1 - minutes / 60, np.nan)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # weeks or days with no reading
        daily = np.stack([np.nanmean(nights(X, names.index(name)), axis=-1) for name in ILLNESS_DIRECTION], -1)
        z = (daily - np.nanmean(daily, axis=(0, 1))) / np.nanstd(daily, axis=(0, 1))
        onset_sd, onset_mean = np.nanstd(onset, axis=1), np.nanmean(onset, axis=1)
    score = np.nan_to_num(z * np.array(list(ILLNESS_DIRECTION.values()))).sum(-1)
    top = np.sort(score, axis=1)[:, ::-1][:, :3]
    return np.column_stack([np.nan_to_num(onset_sd), np.nan_to_num(onset_mean, nan=12.0), top,
                            (score > 3).sum(1), (score > 5).sum(1)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--effect-size", type=float, nargs="+", default=[1.0, 0.5, 0.3])
    parser.add_argument("--people", type=int, default=1000, help="people in the evaluation cohort")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pretrained", default="wearable-core-small",
                        help="the encoder to probe: a shipped name or a file written by WearableEncoder.save")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    shipped = None
    for effect_size in args.effect_size:
        X, meta, y_static, y_weekly = make_wearable_cohort(
            n_people=args.people, n_weeks=4, effect_size=effect_size, random_state=2024
        )
        labels, groups = wearable_week_labels(meta, y_static, y_weekly), meta["person_id"].to_numpy()
        # The random network takes its normalisation from other people of the same cohort.
        X_norm, *_ = make_wearable_cohort(n_people=200, n_weeks=4, effect_size=effect_size, random_state=0)
        if shipped is None:
            shipped = WearableEncoder(pretrained=args.pretrained).fit(X)
        architecture = {k: v for k, v in shipped.config_.items() if k != "channel_names"}
        untrained = WearableEncoder(**architecture, max_epochs=0, random_state=0).fit(X_norm)
        untrained_day = WearableEncoder(
            **{**architecture, "day_context": True}, max_epochs=0, random_state=0
        ).fit(X_norm)

        features = {"summary": WeeklySummaryFeatures().fit_transform(X),
                    "untrained": untrained.transform(X),
                    "untrained-day": untrained_day.transform(X),
                    "shipped": shipped.transform(X),
                    "shipped-ms": statistics_pooled(shipped, X)}
        features["summary+untrained"] = np.hstack([features["summary"], features["untrained"]])
        features["summary+shipped"] = np.hstack([features["summary"], features["shipped"]])
        features["summary+temporal"] = np.hstack([features["summary"], temporal_features(X)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lbfgs convergence on the widest concatenations
            table = pd.DataFrame({
                name: evaluate_probes(F, labels, groups).set_index("task")["score"]
                for name, F in features.items()
            })
        print(f"\neffect_size={effect_size}: AUROC (sleep_duration: MAE in hours) on "
              f"{args.people} held-out people x 4 weeks")
        print(table.round(3).to_string(), flush=True)


if __name__ == "__main__":
    main()
