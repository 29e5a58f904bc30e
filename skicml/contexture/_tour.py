"""The contexture family's row of ``skicml tour``."""

import time

from ..utils.tour import TourEntry

_N_LABELLED = 100


def _run():
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.semi_supervised import LabelSpreading

    from ._contexts import KNNContext
    from ._embedding import ContextureEmbedding

    # Semi-supervised: the embedding sees every training image without its
    # label, the probe only 100 labels; test images are embedded out of sample.
    X, y = load_digits(return_X_y=True)
    pool, test, y_pool, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    labelled = np.random.default_rng(0).choice(len(pool), _N_LABELLED, replace=False)

    def accuracy(embedding):
        start = time.perf_counter()
        embedding.fit(pool)
        probe = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000))
        probe.fit(embedding.transform(pool[labelled]), y_pool[labelled])
        return probe.score(embedding.transform(test), y_test), time.perf_counter() - start

    score, seconds = accuracy(ContextureEmbedding(KNNContext(n_neighbors=10), n_components=32, max_components=64))
    # The baseline a user would try on the same task: scikit-learn's label
    # spreading over the same 10-neighbour graph of the training images,
    # with the same 100 labels (the others marked -1).
    partial = np.full(len(pool), -1)
    partial[labelled] = y_pool[labelled]
    spreading = LabelSpreading(kernel="knn", n_neighbors=10, max_iter=1000).fit(pool, partial)
    return {"score": score, "baseline_score": spreading.score(test, y_test), "seconds": seconds}


def tour_entries():
    return [TourEntry("ContextureEmbedding", f"digits, {_N_LABELLED} labels, held-out images",
                      "accuracy (higher is better)", "LabelSpreading (kNN 10)", _run)]
