"""The 2-D path of the image estimators on rows of pixels (issue 64).

Rows of a 2-D array are flattened images, read like images: uint8 rows as
0..255 pixels, float rows as intensities in [0, 1], anything else refused.
scikit-learn's checks that feed float rows outside [0, 1] are therefore
declared expected failures of these estimators
(:data:`skicml.utils.images.OUT_OF_RANGE_ROW_CHECKS`); the properties they
check are checked here on rows of pixels.
"""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import get_tags

from skicml.utils._test_common import construct_instance
from skicml.utils.images import OUT_OF_RANGE_ROW_CHECKS

pytest.importorskip("PIL")


def _estimator_classes():
    from skicml.vlm import TinyDiffusionTeacher, VISTASteerer, VisualSteeringVector

    classes = [VisualSteeringVector, VISTASteerer, TinyDiffusionTeacher]
    try:
        import open_clip  # noqa: F401
    except ImportError:
        return classes
    from skicml.clip import CLIPEmbedder
    from skicml.video import CLIPVideoEncoder

    return [CLIPEmbedder, CLIPVideoEncoder] + classes


CLASSES = _estimator_classes()


@pytest.fixture(scope="module")
def pixels():
    return np.random.default_rng(0).integers(0, 256, (10, 12)).astype(np.uint8)


def _out(estimator, X):
    method = next(m for m in ("predict", "transform", "score_samples") if hasattr(estimator, m))
    return np.asarray(getattr(estimator, method)(X))


def _captions(estimator, n):
    """A caption per row where ``estimator`` learns from captions (the diffusion teacher), else None."""
    return ["a red circle", "a blue square"] * (n // 2) + ["a red circle"] * (n % 2) \
        if get_tags(estimator).target_tags.required else None


def _fit(estimator, X):
    return estimator.fit(X, _captions(estimator, len(X)))


def _same(a, b):
    if a.dtype.kind == "O":
        assert list(a) == list(b)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module", params=CLASSES, ids=lambda cls: cls.__name__)
def fitted(request, pixels):
    return _fit(construct_instance(request.param), pixels)


def test_the_declared_failures_are_the_out_of_range_checks_only(fitted):
    declared = get_tags(fitted).expected_failed_checks
    assert set(OUT_OF_RANGE_ROW_CHECKS) <= set(declared)
    for name in OUT_OF_RANGE_ROW_CHECKS:
        assert "outside [0, 1]" in declared[name] or "captions" in declared[name]


def test_uint8_and_float_rows_of_one_picture_agree(fitted, pixels):
    expected = _out(fitted, pixels)
    for X in (pixels / 255.0, (pixels / np.float32(255)).astype(np.float32), pixels.astype(np.int64)):
        _same(_out(fitted, X), expected)
    assert fitted.n_features_in_ == pixels.shape[1]


def test_float_rows_outside_the_unit_range_are_refused_at_fit_and_after(fitted, pixels):
    for bad in (pixels.astype(np.float64), pixels / 127.5 - 1.0, np.full((2, 12), 100.0)):
        with pytest.raises(ValueError, match=r"(?s)flattened images.*floats in \[0, 1\].*divide by 255"):
            _fit(clone(fitted), bad)
        with pytest.raises(ValueError, match=r"(?s)flattened images.*floats in \[0, 1\]"):
            _out(fitted, bad)


def test_fit_returns_self_and_changes_no_parameter(fitted, pixels):
    fresh = clone(fitted)
    params = fresh.get_params(deep=False)
    assert _fit(fresh, pixels) is fresh
    after = fresh.get_params(deep=False)
    assert params.keys() == after.keys()
    assert all(after[key] is params[key] or after[key] == params[key] for key in params)


def test_predicting_leaves_the_estimator_unchanged(fitted, pixels):
    before = {k: v for k, v in vars(fitted).items() if not k.startswith("_")}
    _out(fitted, pixels)
    after = {k: v for k, v in vars(fitted).items() if not k.startswith("_")}
    assert before.keys() == after.keys()
    assert all(after[k] is before[k] for k in before)


def test_outputs_do_not_depend_on_the_batch_or_its_order(fitted, pixels):
    full = _out(fitted, pixels)
    for part in (slice(0, 3), slice(3, 10)):
        _same(_out(fitted, pixels[part]), full[part])
    order = np.random.default_rng(1).permutation(len(pixels))
    _same(_out(fitted, pixels[order]), full[order])


def test_pickle_refit_and_pipeline_give_the_same_outputs(fitted, pixels):
    expected = _out(fitted, pixels)
    _same(_out(pickle.loads(pickle.dumps(fitted)), pixels), expected)
    _same(_out(_fit(clone(fitted), pixels), pixels), expected)
    _same(_out(_fit(fitted, pixels), pixels), expected)
    pipeline = make_pipeline(FunctionTransformer(), clone(fitted)).fit(pixels, _captions(fitted, len(pixels)))
    _same(_out(pipeline, pixels), expected)


def test_memory_layouts_and_containers_are_read_alike(fitted, pixels, tmp_path):
    expected = _out(fitted, pixels)
    path = tmp_path / "rows.npy"
    np.save(path, pixels)
    readonly = np.load(path, mmap_mode="r")
    for X in (np.asfortranarray(pixels), readonly, pixels.tolist()):
        _same(_out(_fit(clone(fitted), X), X), expected)


def test_unfitted_bad_shapes_and_small_inputs(fitted, pixels):
    with pytest.raises(NotFittedError):
        _out(clone(fitted), pixels)
    with pytest.raises(ValueError, match="features"):
        _out(fitted, pixels[:, :-1])
    with pytest.raises(ValueError, match="2D"):
        _out(fitted, pixels[0])
    assert len(_out(_fit(clone(fitted), pixels[:1]), pixels[:1])) == 1
    assert len(_out(_fit(clone(fitted), pixels[:, :1]), pixels[:, :1])) == len(pixels)
