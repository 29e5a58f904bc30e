"""The paper's downstream protocol: frozen embeddings, linear probes, person-level splits."""

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import mean_absolute_error, r2_score, roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

__all__ = ["evaluate_probes"]


def evaluate_probes(embeddings, labels, groups, *, baseline=None, n_splits=5, static="auto",
                    classifier=None, regressor=None, n_bootstraps=0, confidence=0.95, random_state=0):
    """Linear probes of each label on frozen week embeddings, split by person.

    Binary labels get a logistic-regression probe scored by AUROC; numeric
    labels get a ridge probe scored by MAE (and R²). Splits are
    :class:`~sklearn.model_selection.GroupKFold` over ``groups``, so no person
    is in both the training and the test fold. Static labels (one value per
    person) are probed at the person level on the mean of the person's week
    embeddings, as in the paper; weekly labels are probed per week.

    Parameters
    ----------
    embeddings : array-like of shape (n_weeks, n_features)
        One row per week, e.g. from :class:`WearableEncoder` or
        :class:`WeeklySummaryFeatures`.
    labels : DataFrame, dict of arrays, or array-like of shape (n_weeks,)
        One column per task, aligned with ``embeddings``; NaN marks a week
        without that label (it is left out of that task).
    groups : array-like of shape (n_weeks,)
        The person of each week.
    baseline : array-like of shape (n_weeks, n_baseline_features), default=None
        Features to compare against, e.g. :class:`WeeklySummaryFeatures`.
        They go through the same probes on the same folds, and the report
        gains the baseline's score and the paired ``gain`` of ``embeddings``
        over it.
    n_splits : int, default=5
        Folds of the person-level cross-validation.
    static : "auto" or list of str, default="auto"
        Tasks probed at the person level. ``"auto"`` takes every label that is
        constant within each person.
    classifier, regressor : estimator or None, default=None
        The probes of binary and numeric labels (cloned per fold). ``None``
        is the paper's linear probe: standardisation then
        LogisticRegression, or RidgeCV.
    n_bootstraps : int, default=0
        Draws of the person-level bootstrap behind the confidence intervals
        (0: no intervals). Each draw resamples the people of every test fold
        with replacement, keeping all of a person's weeks together, and
        recomputes the mean score over folds from the same out-of-fold
        predictions; with ``baseline``, the same people are drawn for both,
        so the interval of ``gain`` is paired.
    confidence : float, default=0.95
        Coverage of the percentile intervals.
    random_state : int, default=0
        Shuffles the assignment of people to folds and seeds the bootstrap.

    Returns
    -------
    DataFrame
        One row per task with ``task``, ``level`` ("person" or "week"),
        ``metric`` ("roc_auc" or "mae"), ``score`` and ``score_std`` (mean and
        standard deviation over folds), ``ci_low`` and ``ci_high`` (the
        bootstrap interval of ``score``, NaN without bootstrap), ``r2``
        (numeric tasks), ``n_people``, ``n_samples`` and ``prevalence``
        (binary tasks), which the paper's reviewers asked for. With
        ``baseline`` also ``baseline_score``, ``gain`` (how much better
        ``embeddings`` score: AUROC above the baseline's, or MAE below it)
        and ``gain_ci_low``, ``gain_ci_high``.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.wearable import evaluate_probes
    >>> rng = np.random.default_rng(0)
    >>> groups = np.repeat(np.arange(40), 3)
    >>> y = (groups % 2).astype(float)
    >>> embeddings = y[:, None] + rng.normal(size=(120, 4))
    >>> evaluate_probes(embeddings, {"label": y}, groups)[["task", "level", "metric"]]
        task   level   metric
    0  label  person  roc_auc
    >>> report = evaluate_probes(embeddings, {"label": y}, groups, baseline=rng.normal(size=(120, 4)),
    ...                          n_bootstraps=200)
    >>> bool(report.loc[0, "gain_ci_low"] > 0)
    True
    """
    embeddings = check_array(embeddings, dtype=np.float64, input_name="embeddings")
    groups = np.asarray(groups)
    if groups.shape != (len(embeddings),):
        raise ValueError(f"groups must have one entry per embedding row ({len(embeddings)}); got {groups.shape}.")
    if baseline is not None:
        baseline = check_array(baseline, dtype=np.float64, input_name="baseline")
        if len(baseline) != len(embeddings):
            raise ValueError(f"baseline has {len(baseline)} rows for {len(embeddings)} embeddings.")
    if isinstance(labels, dict):
        labels = pd.DataFrame(labels)
    elif not isinstance(labels, pd.DataFrame):
        labels = pd.DataFrame({"label": np.asarray(labels)})
    if len(labels) != len(embeddings):
        raise ValueError(f"labels have {len(labels)} rows for {len(embeddings)} embeddings.")
    if int(n_bootstraps) != n_bootstraps or n_bootstraps < 0:
        raise ValueError(f"n_bootstraps={n_bootstraps!r}; expected a whole number of draws >= 0.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r}; expected a coverage in (0, 1).")
    labels = labels.reset_index(drop=True)
    rng = check_random_state(random_state)

    rows = []
    for task in labels.columns:
        y = pd.to_numeric(labels[task], errors="raise").to_numpy(dtype=float)
        keep = ~np.isnan(y)
        frame = pd.DataFrame({"group": groups[keep], "y": y[keep]})
        is_static = (
            frame.groupby("group")["y"].nunique().max() <= 1 if static == "auto" else task in static
        )
        features = [embeddings] if baseline is None else [embeddings, baseline]
        if is_static:
            features = [pd.DataFrame(F[keep]).groupby(groups[keep], sort=True).mean() for F in features]
            g_task = features[0].index.to_numpy()
            features = [F.to_numpy() for F in features]
            y_task = frame.groupby("group", sort=True)["y"].first().to_numpy()
        else:
            features, y_task, g_task = [F[keep] for F in features], y[keep], groups[keep]
        level = "person" if is_static else "week"
        rows.append(_probe(task, features, y_task, g_task, level, n_splits, classifier, regressor,
                           random_state, int(n_bootstraps), confidence, rng))
    return pd.DataFrame(rows)


def _probe(task, features, y, groups, level, n_splits, classifier, regressor, random_state,
           n_bootstraps, confidence, rng):
    binary = set(np.unique(y)) <= {0.0, 1.0}
    n_people = len(np.unique(groups))
    if n_people < n_splits:
        raise ValueError(f"Task {task!r} has {n_people} people with labels, fewer than n_splits={n_splits}.")
    if binary:
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)) if classifier is None else classifier
    else:
        probe = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))) if regressor is None else regressor
    splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    # A fold without both classes has no AUROC.
    folds = [(train, test) for train, test in splitter.split(y, y, groups)
             if not binary or len(np.unique(y[test])) == 2 == len(np.unique(y[train]))]
    if not folds:
        raise ValueError(f"Task {task!r}: no fold has both classes; it has too few positive people.")
    metric = roc_auc_score if binary else mean_absolute_error
    predictions = [_out_of_fold(clone(probe), X, y, folds, binary) for X in features]
    scores = [np.array([metric(y[test], p[test]) for _, test in folds]) for p in predictions]
    row = {"task": task, "level": level, "metric": "roc_auc" if binary else "mae",
           "score": float(scores[0].mean()), "score_std": float(scores[0].std()),
           "ci_low": np.nan, "ci_high": np.nan,
           "r2": float(np.mean([r2_score(y[test], predictions[0][test]) for _, test in folds])) if not binary else np.nan,
           "n_people": n_people, "n_samples": len(y), "prevalence": float(np.mean(y)) if binary else np.nan}
    sign = 1.0 if binary else -1.0
    if len(features) == 2:
        row["baseline_score"] = float(scores[1].mean())
        row["gain"] = sign * (row["score"] - row["baseline_score"])
        row["gain_ci_low"] = row["gain_ci_high"] = np.nan
    if n_bootstraps:
        draws = _bootstrap_scores(y, groups, folds, predictions, binary, n_bootstraps, rng)
        tails = 100 * np.array([(1 - confidence) / 2, (1 + confidence) / 2])
        row["ci_low"], row["ci_high"] = map(float, np.nanpercentile(draws[0], tails))
        if len(features) == 2:
            row["gain_ci_low"], row["gain_ci_high"] = map(float, np.nanpercentile(sign * (draws[0] - draws[1]), tails))
    return row


def _out_of_fold(probe, X, y, folds, binary):
    prediction = np.full(len(y), np.nan)
    for train, test in folds:
        probe.fit(X[train], y[train])
        prediction[test] = probe.predict_proba(X[test])[:, 1] if binary else probe.predict(X[test])
    return prediction


def _bootstrap_scores(y, groups, folds, predictions, binary, n_bootstraps, rng):
    """Fold-mean scores of each prediction under ``n_bootstraps`` person-level
    resamples of every test fold (``folds`` holds (train, test) pairs), shape ``(len(predictions), n_bootstraps)``.

    A draw gives each test person a count (multinomial over the fold's
    people), and every week of that person weighs that count; the same
    counts serve every prediction, which pairs the draws."""
    totals = np.zeros((len(predictions), n_bootstraps))
    n_scored = np.zeros((len(predictions), n_bootstraps))
    for _, test in folds:
        people, person_of_row = np.unique(groups[test], return_inverse=True)
        counts = rng.multinomial(len(people), np.full(len(people), 1.0 / len(people)), size=n_bootstraps)
        weights = counts[:, person_of_row].astype(float)
        for k, prediction in enumerate(predictions):
            if binary:
                score = _weighted_auroc(y[test], prediction[test], weights)
            else:
                score = weights @ np.abs(y[test] - prediction[test]) / weights.sum(1)
            finite = np.isfinite(score)
            totals[k] += np.where(finite, score, 0.0)
            n_scored[k] += finite
    with np.errstate(invalid="ignore", divide="ignore"):
        return totals / n_scored


def _weighted_auroc(y, score, weights):
    """AUROC of ``score`` for each row of sample ``weights`` (shape (n_draws, n)),
    ties counted as half; NaN for a draw without both classes."""
    order = np.argsort(score, kind="stable")
    y, score, weights = y[order], score[order], weights[:, order]
    starts = np.flatnonzero(np.r_[True, score[1:] != score[:-1]])
    positives = np.add.reduceat(weights * y, starts, axis=1)
    negatives = np.add.reduceat(weights * (1.0 - y), starts, axis=1)
    below = np.cumsum(negatives, axis=1) - negatives
    with np.errstate(invalid="ignore", divide="ignore"):
        return (positives * (below + 0.5 * negatives)).sum(1) / (positives.sum(1) * negatives.sum(1))
