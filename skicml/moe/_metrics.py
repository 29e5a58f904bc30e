"""Sample quality without Inception weights: a Fréchet distance in a digit classifier's features.

FID compares the mean and covariance of Inception features of real and
generated images; Inception's weights cannot be downloaded here, and they
know nothing of 8x8 digits anyway. The same measurement is made in the
hidden layer of a small MLP classifier trained on the real images at
evaluation time (seeded, so the features are fixed for a given reference
set), and that classifier also scores whether class-conditional samples
show the class they were asked for.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np
from sklearn.neural_network import MLPClassifier
from sklearn.utils.validation import check_array

__all__ = ["frechet_distance", "sample_quality"]


def frechet_distance(features_a, features_b):
    """Fréchet distance between Gaussians fitted to two feature sets.

    ``|mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))``, the formula of
    FID, with the matrix square root of the (symmetrised) product.

    Parameters
    ----------
    features_a, features_b : array-like of shape (n_a, d), (n_b, d)

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.moe import frechet_distance
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=(2000, 3))
    >>> round(frechet_distance(a, a + [2.0, 0.0, 0.0]), 6)
    4.0
    """
    a = check_array(features_a, dtype=np.float64, input_name="features_a")
    b = check_array(features_b, dtype=np.float64, input_name="features_b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"features have {a.shape[1]} and {b.shape[1]} columns; expected the same.")
    if len(a) < 2 or len(b) < 2:
        raise ValueError("frechet_distance needs at least two rows in each feature set.")
    mean_a, mean_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    # sqrt(S_a) S_b sqrt(S_a) is symmetric PSD with the trace of (S_a S_b)^(1/2): eigh is exact and stable.
    values, vectors = np.linalg.eigh(cov_a)
    root_a = (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T
    product = root_a @ cov_b @ root_a
    eigenvalues = np.linalg.eigvalsh((product + product.T) / 2)
    trace_root = np.sqrt(np.clip(eigenvalues, 0, None)).sum()
    return float(np.sum((mean_a - mean_b) ** 2) + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_root)


# Fitted reference classifiers by a digest of their data: evaluations during training and over the
# contenders of a benchmark ask for the same one again, and fitting it costs seconds (28 x 28 MNIST: ~20 s).
_CLASSIFIERS = OrderedDict()
_CLASSIFIERS_KEPT = 4


def _reference_classifier(real, labels, hidden_units, random_state):
    digest = hashlib.sha256(real.tobytes() + np.asarray(labels).astype(str).tobytes()).hexdigest()
    key = (digest, real.shape, hidden_units, random_state)
    if key not in _CLASSIFIERS:
        classifier = MLPClassifier(hidden_layer_sizes=(hidden_units,), max_iter=400, random_state=random_state)
        _CLASSIFIERS[key] = classifier.fit(real, labels)
        if len(_CLASSIFIERS) > _CLASSIFIERS_KEPT:
            _CLASSIFIERS.popitem(last=False)
    _CLASSIFIERS.move_to_end(key)
    return _CLASSIFIERS[key]


def sample_quality(samples, sample_labels, images, labels, *, hidden_units=64, random_state=0):
    """Fréchet distance and class accuracy of generated images, in a classifier trained on real ones.

    Parameters
    ----------
    samples : array-like of shape (n_samples, ...)
        Generated images in the pixel range of ``images`` (any layout that
        flattens to the same width).
    sample_labels : array-like of shape (n_samples,) or None
        The classes the samples were drawn for (None: no accuracy).
    images : array-like of shape (n_images, ...)
        Real images: the classifier's training data and the reference set.
    labels : array-like of shape (n_images,)
    hidden_units : int, default=64
        Width of the classifier's hidden layer, whose ReLU features the
        distance compares.
    random_state : int, default=0

    Returns
    -------
    dict
        ``frechet_distance`` (lower is better), ``classifier_accuracy``
        (the share of samples the classifier assigns to their class; NaN
        without ``sample_labels``) and ``real_accuracy`` (the classifier on
        its own training images, for scale).
    """
    real = check_array(np.asarray(images).reshape(len(images), -1), dtype=np.float64, input_name="images")
    fake = check_array(np.asarray(samples).reshape(len(samples), -1), dtype=np.float64, input_name="samples")
    if fake.shape[1] != real.shape[1]:
        raise ValueError(f"samples have {fake.shape[1]} pixels, the real images {real.shape[1]}.")
    scale = max(float(np.abs(real).max()), 1e-12)
    classifier = _reference_classifier(real / scale, labels, hidden_units, random_state)

    def features(x):
        return np.maximum(x / scale @ classifier.coefs_[0] + classifier.intercepts_[0], 0)

    accuracy = float("nan") if sample_labels is None else float(classifier.score(fake / scale, sample_labels))
    return {"frechet_distance": frechet_distance(features(real), features(fake)),
            "classifier_accuracy": accuracy, "real_accuracy": float(classifier.score(real / scale, labels))}
