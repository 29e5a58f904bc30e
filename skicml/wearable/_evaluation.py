"""The paper's downstream protocol: frozen embeddings, linear probes, person-level splits."""

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import mean_absolute_error, r2_score, roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_array

__all__ = ["evaluate_probes"]


def evaluate_probes(embeddings, labels, groups, *, n_splits=5, static="auto", classifier=None,
                    regressor=None, random_state=0):
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
    n_splits : int, default=5
        Folds of the person-level cross-validation.
    static : "auto" or list of str, default="auto"
        Tasks probed at the person level. ``"auto"`` takes every label that is
        constant within each person.
    classifier, regressor : estimator or None, default=None
        The probes of binary and numeric labels (cloned per fold). ``None``
        is the paper's linear probe: standardisation then
        LogisticRegression, or RidgeCV.
    random_state : int, default=0
        Shuffles the assignment of people to folds.

    Returns
    -------
    DataFrame
        One row per task with ``task``, ``level`` ("person" or "week"),
        ``metric`` ("roc_auc" or "mae"), ``score`` and ``score_std`` (mean and
        standard deviation over folds), ``r2`` (numeric tasks), ``n_people``,
        ``n_samples`` and ``prevalence`` (binary tasks), which the paper's
        reviewers asked for.

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
    """
    embeddings = check_array(embeddings, dtype=np.float64, input_name="embeddings")
    groups = np.asarray(groups)
    if groups.shape != (len(embeddings),):
        raise ValueError(f"groups must have one entry per embedding row ({len(embeddings)}); got {groups.shape}.")
    if isinstance(labels, dict):
        labels = pd.DataFrame(labels)
    elif not isinstance(labels, pd.DataFrame):
        labels = pd.DataFrame({"label": np.asarray(labels)})
    if len(labels) != len(embeddings):
        raise ValueError(f"labels have {len(labels)} rows for {len(embeddings)} embeddings.")
    labels = labels.reset_index(drop=True)

    rows = []
    for task in labels.columns:
        y = pd.to_numeric(labels[task], errors="raise").to_numpy(dtype=float)
        keep = ~np.isnan(y)
        frame = pd.DataFrame({"group": groups[keep], "y": y[keep]})
        is_static = (
            frame.groupby("group")["y"].nunique().max() <= 1 if static == "auto" else task in static
        )
        if is_static:
            pooled = pd.DataFrame(embeddings[keep]).groupby(groups[keep], sort=True).mean()
            X_task = pooled.to_numpy()
            y_task = frame.groupby("group", sort=True)["y"].first().to_numpy()
            g_task = pooled.index.to_numpy()
        else:
            X_task, y_task, g_task = embeddings[keep], y[keep], groups[keep]
        rows.append(_probe(task, X_task, y_task, g_task, "person" if is_static else "week",
                           n_splits, classifier, regressor, random_state))
    return pd.DataFrame(rows)


def _probe(task, X, y, groups, level, n_splits, classifier, regressor, random_state):
    binary = set(np.unique(y)) <= {0.0, 1.0}
    n_people = len(np.unique(groups))
    if n_people < n_splits:
        raise ValueError(f"Task {task!r} has {n_people} people with labels, fewer than n_splits={n_splits}.")
    if binary:
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)) if classifier is None else classifier
    else:
        probe = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))) if regressor is None else regressor
    probe = clone(probe)
    splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    scores, r2 = [], []
    for train, test in splitter.split(X, y, groups):
        if binary and (len(np.unique(y[train])) < 2 or len(np.unique(y[test])) < 2):
            continue  # a fold without both classes has no AUROC
        probe.fit(X[train], y[train])
        if binary:
            scores.append(roc_auc_score(y[test], probe.predict_proba(X[test])[:, 1]))
        else:
            prediction = probe.predict(X[test])
            scores.append(mean_absolute_error(y[test], prediction))
            r2.append(r2_score(y[test], prediction))
    if not scores:
        raise ValueError(f"Task {task!r}: no fold has both classes; it has too few positive people.")
    return {
        "task": task, "level": level, "metric": "roc_auc" if binary else "mae",
        "score": float(np.mean(scores)), "score_std": float(np.std(scores)),
        "r2": float(np.mean(r2)) if r2 else np.nan,
        "n_people": n_people, "n_samples": len(y),
        "prevalence": float(np.mean(y)) if binary else np.nan,
    }
