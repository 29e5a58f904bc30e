import numpy as np
import pytest
from scipy import linalg
from sklearn.datasets import load_digits

from skicml.moe import frechet_distance, sample_quality


def test_frechet_distance_matches_the_closed_form_of_two_gaussians():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(500, 4)) @ rng.normal(size=(4, 4))
    b = rng.normal(size=(400, 4)) * 2 + 1
    mean_a, mean_b, cov_a, cov_b = a.mean(0), b.mean(0), np.cov(a.T), np.cov(b.T)
    expected = np.sum((mean_a - mean_b) ** 2) + np.trace(cov_a + cov_b - 2 * linalg.sqrtm(cov_a @ cov_b).real)
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-8)
    assert frechet_distance(a, a) == pytest.approx(0, abs=1e-8)
    assert frechet_distance(a[:, :1], b[:, :1]) >= 0
    with pytest.raises(ValueError, match="same"):
        frechet_distance(a, b[:, :3])
    with pytest.raises(ValueError, match="two rows"):
        frechet_distance(a[:1], b)


def test_real_digits_score_as_real_and_noise_as_noise():
    digits = load_digits()
    images, labels = digits.images[:1000], digits.target[:1000]
    real = sample_quality(digits.images[1000:1300], digits.target[1000:1300], images, labels)
    noise = sample_quality(np.random.default_rng(0).uniform(0, 16, (300, 8, 8)), digits.target[1000:1300],
                           images, labels)
    assert real["classifier_accuracy"] > 0.9 and noise["classifier_accuracy"] < 0.3
    assert real["frechet_distance"] < 0.2 * noise["frechet_distance"]
    assert np.isnan(sample_quality(images[:50], None, images, labels)["classifier_accuracy"])
    with pytest.raises(ValueError, match="pixels"):
        sample_quality(np.zeros((5, 4, 4)), None, images, labels)


def test_the_reference_classifier_is_fitted_once_per_reference_set():
    from skicml.moe import _metrics

    digits = load_digits()
    images, labels = digits.images[:300], digits.target[:300]
    first = sample_quality(images[:50], labels[:50], images, labels)
    fitted = next(reversed(_metrics._CLASSIFIERS.values()))
    assert sample_quality(images[:50], labels[:50], images, labels) == first
    assert next(reversed(_metrics._CLASSIFIERS.values())) is fitted
    sample_quality(images[:50], labels[:50], images[:200], labels[:200])  # another reference, another classifier
    assert next(reversed(_metrics._CLASSIFIERS.values())) is not fitted
