"""Whitened CLIP's row of ``skicml tour``.

The task of ``benchmarks/bench_clip_detectors.py`` at tour size: the shipped
tiny CLIP embeds clean shape scenes, and corrupted ones (noise, blur,
occlusion at severity 3) must score as less likely. The baseline is
scikit-learn's IsolationForest on the same raw embeddings.
"""

import time

from ..utils.tour import TourEntry

N_TRAIN, N_TEST = 600, 150


def _run():
    import numpy as np
    from sklearn.ensemble import IsolationForest
    from sklearn.metrics import roc_auc_score

    from ..datasets import corrupt_images, make_shape_scenes
    from ._clip_scorer import WhitenedCLIPScorer
    from ._embedder import CLIPEmbedder

    images, _, _ = make_shape_scenes(N_TRAIN + N_TEST, random_state=12345)
    train, clean = images[:N_TRAIN], images[N_TRAIN:]
    third = N_TEST // 3
    corrupted = np.concatenate([
        corrupt_images(clean[:third], "gaussian_noise", 3, random_state=0),
        corrupt_images(clean[third: 2 * third], "blur", 3, random_state=0),
        corrupt_images(clean[2 * third:], "occlusion", 3, random_state=0),
    ])
    test = np.concatenate([clean, corrupted])
    inlier = np.r_[np.ones(len(clean)), np.zeros(len(corrupted))]

    start = time.perf_counter()
    scorer = WhitenedCLIPScorer(embedder=CLIPEmbedder(modality="image")).fit(train)
    score = roc_auc_score(inlier, scorer.score_samples(test))
    seconds = time.perf_counter() - start
    embedder = CLIPEmbedder(modality="image").fit()
    forest = IsolationForest(random_state=0).fit(embedder.transform(train))
    baseline = roc_auc_score(inlier, forest.score_samples(embedder.transform(test)))
    return {"score": score, "baseline_score": baseline, "seconds": seconds}


def tour_entries():
    return [TourEntry("WhitenedCLIPScorer", f"tiny CLIP, clean vs corrupted shape scenes, {N_TRAIN} train",
                      "AUROC (higher is better)", "IsolationForest on the embeddings", _run,
                      requires=("open_clip",), extra="clip")]
