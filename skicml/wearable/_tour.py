"""The wearable family's row of ``skicml tour``."""

import time

from ..utils.tour import TourEntry


def _run():
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupShuffleSplit
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from ..datasets import make_wearable_cohort
    from ._encoder import WearableEncoder
    from ._features import WeeklySummaryFeatures

    X, meta, y_static, _ = make_wearable_cohort(n_people=300, n_weeks=2, random_state=7)
    y = y_static.loc[meta["person_id"], "age_group"].to_numpy()
    train, test = next(GroupShuffleSplit(test_size=0.4, random_state=0).split(X, y, meta["person_id"]))

    def auroc(features):
        model = make_pipeline(features, StandardScaler(), LogisticRegression(max_iter=2000))
        start = time.perf_counter()
        model.fit(X[train], y[train])
        score = roc_auc_score(y[test], model.predict_proba(X[test])[:, 1])
        return score, time.perf_counter() - start

    score, seconds = auroc(WearableEncoder(pretrained="wearable-core-small"))
    baseline, _ = auroc(WeeklySummaryFeatures())
    return {"score": score, "baseline_score": baseline, "seconds": seconds}


def tour_entries():
    return [TourEntry("WearableEncoder", "synthetic cohort, age >= 50 per week", "AUROC (higher is better)",
                      "summary statistics + LR", _run)]
