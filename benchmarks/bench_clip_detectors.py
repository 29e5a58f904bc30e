"""Outlier detectors on tiny-CLIP embeddings: whitened likelihood vs scikit-learn's.

The shipped tiny CLIP (``tiny-clip-shapes``) embeds shape scenes. Every
detector is fitted on the embeddings of clean training scenes and scores
held-out scenes: clean ones (inliers) against corrupted images (noise, blur,
occlusion at severity 3, one third each) or against ill-formed captions
(scrambled word order, unseen words, half each). Contenders, all on the same
embeddings:

- ``whitened``: :class:`~skicml.clip.WhitenedLikelihoodOutlierDetector`, the
  W-CLIP log-likelihood;
- ``isolation_forest``, ``lof`` (``novelty=True``), ``elliptic_envelope``:
  scikit-learn's detectors with their defaults.

Prints AUROC (higher is better; ``score_samples`` or ``decision_function``,
higher = more normal) and fit / score time.

    python benchmarks/bench_clip_detectors.py            # the recorded run
    python benchmarks/bench_clip_detectors.py --quick    # smoke test
"""

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from sklearn.covariance import EllipticEnvelope
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import LocalOutlierFactor

from skicml.clip import CLIPEmbedder, WhitenedLikelihoodOutlierDetector
from skicml.datasets import corrupt_images, make_shape_scenes, perturb_captions


def detectors(seed):
    return {
        "whitened": WhitenedLikelihoodOutlierDetector(),
        "isolation_forest": IsolationForest(random_state=seed),
        "lof": LocalOutlierFactor(novelty=True),
        "elliptic_envelope": EllipticEnvelope(random_state=seed),
    }


def compare(train, inliers, outliers, modality, seed):
    rows = []
    truth = np.r_[np.ones(len(inliers)), np.zeros(len(outliers))]
    test = np.vstack([inliers, outliers])
    for name, detector in detectors(seed).items():
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            detector.fit(train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        scores = detector.score_samples(test)
        score_s = time.perf_counter() - start
        rows.append({"modality": modality, "detector": name, "auroc": roc_auc_score(truth, scores),
                     "fit_ms": 1000 * fit_s, "score_ms": 1000 * score_s})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-test", type=int, default=600)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args()
    if args.quick:
        args.n_train, args.n_test = 200, 60
    torch.set_num_threads(args.threads)
    seed = 0
    images, captions, _ = make_shape_scenes(args.n_train + args.n_test, random_state=12345)
    train_images, test_images = images[: args.n_train], images[args.n_train:]
    train_captions, test_captions = list(captions[: args.n_train]), list(captions[args.n_train:])
    third = args.n_test // 3
    corrupted = np.concatenate([
        corrupt_images(test_images[:third], "gaussian_noise", 3, random_state=seed),
        corrupt_images(test_images[third: 2 * third], "blur", 3, random_state=seed),
        corrupt_images(test_images[2 * third:], "occlusion", 3, random_state=seed),
    ])
    half = args.n_test // 2
    bad_captions = (list(perturb_captions(test_captions[:half], "scramble", random_state=seed))
                    + list(perturb_captions(test_captions[half:], "unseen_words", random_state=seed)))

    image_encoder = CLIPEmbedder(modality="image").fit()
    text_encoder = CLIPEmbedder(modality="text").fit()
    start = time.perf_counter()
    image_train = image_encoder.transform(train_images)
    image_clean, image_bad = image_encoder.transform(test_images), image_encoder.transform(corrupted)
    text_train = text_encoder.transform(train_captions)
    text_clean, text_bad = text_encoder.transform(test_captions), text_encoder.transform(bad_captions)
    encode_s = time.perf_counter() - start

    rows = compare(image_train, image_clean, image_bad, "images (noise/blur/occlusion s3)", seed)
    rows += compare(text_train, text_clean, text_bad, "captions (scrambled/unseen words)", seed)
    table = pd.DataFrame(rows)
    print(f"tiny-clip-shapes embeddings (dim {image_train.shape[1]}), {args.n_train} training scenes, "
          f"{args.n_test} clean + {args.n_test} anomalous test items per modality; "
          f"encoding all of them took {encode_s:.1f} s")
    print(table.round({"auroc": 4, "fit_ms": 1, "score_ms": 1}).to_string(index=False))


if __name__ == "__main__":
    main()
