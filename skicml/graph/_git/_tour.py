"""GIT's row of ``skicml tour``."""

import time

from ...utils.tour import TourEntry

N_NODES, LABELLED = 1000, 0.2


def _run():
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    from ...datasets import make_graph_domains
    from ._classifier import GITClassifier

    # Seed 0 is a domain the shipped backbone's pretraining never drew (its seeds start past 1,000).
    domain = make_graph_domains(1, n_nodes=N_NODES, n_features=64, noise=2.0, homophily=0.7, degree=8.0,
                                random_state=0)[0]
    nodes = np.arange(N_NODES)
    train, test = train_test_split(nodes, train_size=LABELLED, stratify=domain.target, random_state=0)

    start = time.perf_counter()
    model = GITClassifier(pretrained="git-sbm-qm9-small", graph={"x": domain.x, "edge_index": domain.edge_index},
                          mode="finetune", max_epochs=100, random_state=0, device="cpu")
    score = model.fit(train, domain.target[train]).score(test, domain.target[test])
    seconds = time.perf_counter() - start
    baseline = LogisticRegression(max_iter=2000).fit(domain.x[train], domain.target[train])
    return {"score": score, "baseline_score": baseline.score(domain.x[test], domain.target[test]),
            "seconds": seconds}


def tour_entries():
    return [TourEntry("GITClassifier", f"node classes of an unseen SBM domain, {LABELLED:.0%} labelled",
                      "accuracy", "LogisticRegression on node features", _run)]
