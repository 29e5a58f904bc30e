"""Tests of WhitenedCLIPScorer: embeddings without open_clip, images and captions with a tiny CLIP."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from skicml import WhitenedCLIPScorer
from skicml.clip import WhitenedLikelihoodOutlierDetector
from skicml.datasets import make_shape_scenes
from skicml.utils._test_common import CLIP_TEST_CONFIG


def embeddings(seed=0, n=300, d=6):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


@pytest.mark.parametrize("params", [{}, dict(contamination="auto", method="zca"),
                                    dict(n_components=3, include_log_det=True, shrinkage=0.1)])
def test_embedding_path_is_the_detector(params):
    X, X_new = embeddings(0), embeddings(1)
    scorer = WhitenedCLIPScorer(**params).fit(X)
    detector = WhitenedLikelihoodOutlierDetector(**params).fit(X)
    for method in ("score_samples", "decision_function", "predict", "transform"):
        np.testing.assert_array_equal(getattr(scorer, method)(X_new), getattr(detector, method)(X_new))
    assert scorer.offset_ == detector.offset_ and scorer.score(X_new) == detector.score(X_new)
    np.testing.assert_array_equal(scorer.fit_predict(X), detector.fit_predict(X))
    assert scorer.input_modality_ == "embedding" and scorer.model_fingerprint_ is None
    assert not hasattr(scorer, "embedder_")


def test_embedding_path_never_imports_open_clip():
    code = textwrap.dedent("""
        import sys
        sys.modules["open_clip"] = None  # any import of it fails
        import numpy as np
        from skicml import WhitenedCLIPScorer
        X = np.random.default_rng(0).normal(size=(200, 5))
        scorer = WhitenedCLIPScorer(contamination="auto").fit(X)
        print(scorer.score_samples(X[:3]).shape, scorer.predict(X).shape)
        try:
            scorer.score_samples(["a red circle"])
        except ValueError as exc:
            print("refused:", "embeddings" in str(exc))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "(3,) (200,)" in result.stdout and "refused: True" in result.stdout


def test_single_string_and_wrong_width_are_refused():
    scorer = WhitenedCLIPScorer().fit(embeddings())
    with pytest.raises(ValueError, match="single string"):
        scorer.score_samples("a red circle")
    with pytest.raises(ValueError, match="features"):
        scorer.score_samples(embeddings()[:, :4])
    with pytest.raises(ValueError, match="modality"):
        WhitenedCLIPScorer(modality="audio").fit(embeddings())


# ----------------------------------------------------------------------------
# with a tiny random CLIP
# ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clip_parts():
    pytest.importorskip("open_clip")
    from skicml.clip import CLIPEmbedder

    images, captions, _ = make_shape_scenes(60, random_state=0)
    embedder = CLIPEmbedder(model_config=CLIP_TEST_CONFIG, random_state=0, device="cpu")
    return embedder, images, list(captions)


def test_images_equal_their_embeddings(clip_parts):
    embedder, images, _ = clip_parts
    scorer = WhitenedCLIPScorer(embedder=embedder, shrinkage=0.05).fit(images)
    assert scorer.input_modality_ == "image" and scorer.embedder_.modality == "image"
    assert scorer.n_features_in_ == CLIP_TEST_CONFIG["embed_dim"]
    assert scorer.model_fingerprint_ == scorer.embedder_.model_fingerprint_
    Z = scorer.embedder_.transform(images)
    plain = WhitenedLikelihoodOutlierDetector(shrinkage=0.05).fit(Z)
    np.testing.assert_allclose(scorer.score_samples(images[:7]), plain.score_samples(Z[:7]))
    np.testing.assert_allclose(scorer.transform(list(images[:3])), plain.transform(Z[:3]))
    np.testing.assert_array_equal(scorer.predict(images), plain.predict(Z))
    # embeddings of the same encoder are accepted too
    np.testing.assert_allclose(scorer.score_samples(Z[:7]), plain.score_samples(Z[:7]))
    assert np.isfinite(scorer.score(images))


def test_captions_are_read_as_text_and_modalities_stay_apart(clip_parts):
    embedder, images, captions = clip_parts
    scorer = WhitenedCLIPScorer(embedder=embedder, shrinkage=0.05).fit(captions)
    assert scorer.input_modality_ == "text" and scorer.embedder_.modality == "text"
    assert scorer.score_samples(captions[:4]).shape == (4,)
    assert scorer.score_samples(np.array(captions[:4], dtype=object)).shape == (4,)
    with pytest.raises(ValueError, match="separately"):
        scorer.score_samples(images[:2])
    image_scorer = WhitenedCLIPScorer(embedder=embedder, shrinkage=0.05).fit(images)
    with pytest.raises(FileNotFoundError, match="does not exist"):  # strings are image paths here
        image_scorer.score_samples(["not a file, a caption"])
    with pytest.raises(ValueError, match="holds images"):
        WhitenedCLIPScorer(embedder=embedder, modality="text").fit(images)


def test_image_paths_with_modality_image(clip_parts, tmp_path):
    from PIL import Image

    embedder, images, _ = clip_parts
    paths = []
    for i, image in enumerate(images[:20]):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(image).save(paths[-1])
    scorer = WhitenedCLIPScorer(embedder=embedder, modality="image", shrinkage=0.1).fit(paths)
    assert scorer.input_modality_ == "image"
    np.testing.assert_allclose(scorer.score_samples(paths[:3]), scorer.score_samples(images[:3]), rtol=1e-6)


def test_embeddings_with_an_explicit_embedder_read_raw_inputs(clip_parts):
    embedder, images, _ = clip_parts
    Z = embedder.fit().transform(images)
    scorer = WhitenedCLIPScorer(embedder=embedder).fit(Z)
    assert scorer.input_modality_ == "embedding" and scorer.embedder_ is not None
    np.testing.assert_allclose(scorer.score_samples(images[:5]), scorer.score_samples(Z[:5]))
    with pytest.raises(ValueError, match="not made by this embedder"):
        WhitenedCLIPScorer(embedder=embedder).fit(embeddings(d=5))
    bare = WhitenedCLIPScorer().fit(Z)
    with pytest.raises(ValueError, match="without an encoder"):
        bare.score_samples(images[:2])


def test_fit_predict_encodes_once(clip_parts, monkeypatch):
    from skicml.clip import CLIPEmbedder

    embedder, images, _ = clip_parts
    calls = []
    original = CLIPEmbedder._encode
    monkeypatch.setattr(CLIPEmbedder, "_encode",
                        lambda self, kind, data: calls.append(kind) or original(self, kind, data))
    scorer = WhitenedCLIPScorer(embedder=embedder, contamination=0.1)
    labels = scorer.fit_predict(images)
    assert len(calls) == 1
    np.testing.assert_array_equal(labels, scorer.predict(images))
    assert abs(np.mean(labels == -1) - 0.1) <= 1.5 / len(images)


def test_from_precomputed_with_an_embedder(clip_parts):
    embedder, images, _ = clip_parts
    d = CLIP_TEST_CONFIG["embed_dim"]
    scorer = WhitenedCLIPScorer.from_precomputed(np.zeros(d), np.eye(d), embedder=embedder, contamination="auto")
    Z = scorer.embedder_.transform(images[:4])
    expected = -0.5 * (d * np.log(2 * np.pi) + (Z.astype(np.float64) ** 2).sum(axis=1))
    np.testing.assert_allclose(scorer.score_samples(images[:4]), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="not made by this embedder"):
        WhitenedCLIPScorer.from_precomputed(np.zeros(3), np.eye(3), embedder=embedder, contamination="auto")


def test_default_embedder_is_the_shipped_clip(monkeypatch):
    pytest.importorskip("open_clip")
    from skicml import _weights

    monkeypatch.setattr(_weights, "_REGISTRY", {})
    with pytest.raises(FileNotFoundError, match="tiny-clip"):
        WhitenedCLIPScorer().fit(["a small red circle on the left", "a large blue square at the top"])


def test_shipped_tiny_clip_shows_the_papers_claims():
    """The shipped model, on fresh scenes: likelihood falls with every
    corruption's severity, ill-formed captions score lower, and the caption
    likelihood given the image flags captions of other scenes."""
    pytest.importorskip("open_clip")
    from sklearn.metrics import roc_auc_score

    from skicml.clip import CLIPEmbedder
    from skicml.datasets import corrupt_images, perturb_captions

    def auroc(inlier, outlier):
        return roc_auc_score(np.r_[np.ones(len(inlier)), np.zeros(len(outlier))], np.r_[inlier, outlier])

    images, captions, _ = make_shape_scenes(1000, random_state=11)
    test_images, test_captions, _ = make_shape_scenes(300, random_state=12)
    image_embedder = CLIPEmbedder(device="cpu", batch_size=256).fit()
    text_embedder = CLIPEmbedder(modality="text", device="cpu", batch_size=256).fit()
    image_fit, image_test = image_embedder.transform(images), image_embedder.transform(test_images)
    scorer = WhitenedCLIPScorer().fit(image_fit)
    clean = scorer.score_samples(image_test)
    for kind in ("gaussian_noise", "blur", "occlusion"):
        curve = [auroc(clean, scorer.score_samples(image_embedder.transform(
            corrupt_images(test_images, kind, severity, random_state=severity)))) for severity in (1, 3, 5)]
        assert curve[0] < curve[1] < curve[2] and curve[2] > 0.65, (kind, curve)
        # the lightest blur (0.5 pixel) also smooths the background's pixel noise: not detected
        assert curve[0] > (0.4 if kind == "blur" else 0.55), (kind, curve)

    text_fit = text_embedder.transform(list(captions))
    text_test = text_embedder.transform(list(test_captions))
    captions_scorer = WhitenedCLIPScorer().fit(text_fit)
    clean_text = captions_scorer.score_samples(text_test)
    for kind in ("scramble", "drop_attributes", "unseen_words"):
        perturbed = text_embedder.transform(list(perturb_captions(test_captions, kind, random_state=0)))
        assert auroc(clean_text, captions_scorer.score_samples(perturbed)) > 0.75, kind

    pairs = WhitenedCLIPScorer(include_log_det=True).fit(np.hstack([image_fit, text_fit]))
    image_density = WhitenedCLIPScorer(include_log_det=True).fit(image_fit).score_samples(image_test)
    mismatched = text_embedder.transform(list(perturb_captions(test_captions, "mismatch", random_state=0)))
    own = pairs.score_samples(np.hstack([image_test, text_test])) - image_density
    other = pairs.score_samples(np.hstack([image_test, mismatched])) - image_density
    assert auroc(own, other) > 0.95
