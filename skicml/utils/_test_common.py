"""Test-time settings of every estimator, in one place.

Like scikit-learn's instance generator: the common tests build each estimator
with :data:`TEST_PARAMS` (tiny models, few epochs) and the data of
:data:`TEST_DATA` when the estimator's 2-D path needs a particular layout.
Checks an estimator cannot pass are declared in its tags
(``expected_failed_checks``), not here.
"""

import importlib

import numpy as np
from sklearn.utils import get_tags

from .discovery import all_estimators

__all__ = [
    "CLIP_TEST_CONFIG",
    "NOT_COMMON_TESTED",
    "REQUIRED_MODULES",
    "TEST_DATA",
    "TEST_PARAMS",
    "construct_instance",
    "expected_failed_checks",
    "estimators_under_test",
]

#: A tiny open_clip architecture (random weights) for tests of the CLIP
#: encoders: 8-d embeddings, 32x32 images in 8x8 patches, 16-token captions.
CLIP_TEST_CONFIG = {
    "embed_dim": 8,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 16, "patch_size": 8, "head_width": 8, "mlp_ratio": 2.0},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 16, "heads": 2, "layers": 1, "mlp_ratio": 2.0},
}

#: Constructor arguments used by the tests, by class name.
TEST_PARAMS = {
    "_TinyMLPClassifier": dict(max_epochs=40, random_state=0, device="cpu"),
    # float64 so that scikit-learn's batch-invariance checks (1e-7) hold; the
    # float32 default is tested to 1e-6 in tests/tabicl. Four members: two on
    # the raw columns, two on the principal-component view.
    "TabICLClassifier": dict(n_estimators=4, inference_precision="float64", random_state=0, device="cpu"),
    "TabICLEmbedder": dict(n_estimators=2, random_state=0, device="cpu"),
    # float64 for the batch-invariance checks, as the classifier.
    "TabICLRegressor": dict(n_estimators=2, inference_precision="float64", pretrained=None, random_state=0,
                            device="cpu"),
    # One member per conditional (two column orders for the detector), the
    # shipped small networks; float64 for the batch-invariance checks, as the regressor.
    "TabICLImputer": dict(n_estimators=1, inference_precision="float64", random_state=0, device="cpu"),
    "TabICLOutlierDetector": dict(n_permutations=2, n_estimators=1, inference_precision="float64",
                                  random_state=0, device="cpu"),
    # float64 for the same batch-invariance checks; the float32 default is
    # tested in tests/wearable.
    "WearableEncoder": dict(d_model=8, n_layers=1, head_dim=8, tokenizer_hidden=8, proj_dim=4,
                            max_epochs=1, batch_size=16, dtype="float64", random_state=0, device="cpu"),
    # float64 for the batch-invariance checks; the classifier needs enough
    # epochs to clear check_classifiers_train's accuracy bar.
    "EulerTokenizer": dict(random_state=0),
    "GraphGPTEncoder": dict(hidden_size=8, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, max_epochs=1,
                            dtype="float64", random_state=0, device="cpu"),
    "GraphGPTRegressor": dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, max_epochs=30,
                              lr=3e-3, dtype="float64", random_state=0, device="cpu"),
    "GraphGPTClassifier": dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, max_epochs=30,
                               lr=3e-3, dtype="float64", random_state=0, device="cpu"),
    # float64 for the batch-invariance checks; random weights, no file.
    # float64 for the batch-invariance checks; the classifier trains long
    # enough on the k-NN graph of the checks' rows to clear their accuracy bar.
    "GITEncoder": dict(hidden_dim=8, max_epochs=1, n_neighbors=5, dtype="float64", random_state=0, device="cpu"),
    "GITClassifier": dict(hidden_dim=16, max_epochs=40, lr=1e-2, n_neighbors=5, dtype="float64", random_state=0,
                          device="cpu"),
    "CLIPEmbedder": dict(pretrained=None, model_config=CLIP_TEST_CONFIG, precision="fp64", random_state=0,
                         device="cpu"),
    # The checks fit on 10-30 rows: contexts small enough for them.
    "ContextureEmbedding": dict(context="knn_test", n_components=2, max_components=8),
    "KNNContext": dict(n_neighbors=5),
    "LabelContext": dict(teacher="logistic_regression"),
    "MaskedContext": dict(base="knn_test", n_masks=3, random_state=0),
    "MixtureContext": dict(contexts=["knn_test", "rbf"]),
    "ConvolutionContext": dict(first="knn_test", second="knn_test"),
    # The default (sampling) context with averaged views; tests/contexture/test_neural.py
    # also runs check_estimator with an exact context.
    "NeuralContexture": dict(n_components=2, hidden_sizes=(16,), max_epochs=2, n_eval_views=2, dtype="float64",
                             random_state=0, device="cpu"),
    # One-frame videos (the degenerate 2-D layout): a small head, trained
    # long enough for check_classifiers_train's accuracy bar.
    # tests/video/test_estimators.py trains the transformer head and the learnable merge.
    "ViLAMPClassifier": dict(d_model=16, n_heads=2, max_epochs=20, batch_size=32, lr=2e-2, random_state=0,
                             device="cpu"),
    "CLIPVideoEncoder": dict(embedder="clip_test"),
    # A random two-block backbone (built in construct_instance) on clouds of
    # 16 points: rows of the checks' feature matrices read as a few points
    # each, not normalised, so that their positions carry the classes.
    # float64 for the batch-invariance checks.
    "GAPromptClassifier": dict(pretrained="pointmae_test", n_points=16, n_groups=4, group_size=4,
                               n_point_prompts=2, n_token_prompts=2, adapter_dim=4, head_hidden=0,
                               normalize=False, augment=None, max_epochs=8, batch_size=100, lr=5e-2,
                               validation_fraction=None, dtype="float64", random_state=0, device="cpu"),
    # Generic rows are one "frame" of features; float64 for the batch-invariance checks.
    # tests/video/test_physics_world_model.py trains on rendered videos.
    "VideoWorldModel": dict(d_model=8, depth=1, n_heads=2, max_epochs=2, n_sampling_steps=2, dtype="float64",
                            random_state=0, device="cpu"),
    "RaceDiTGenerator": dict(hidden_dim=8, depth=1, n_heads=2, n_experts=2, top_k=1.0, n_timesteps=10,
                             max_epochs=2, batch_size=64, random_state=0, device="cpu"),
    # A random three-layer TinyVLM (written to a file in construct_instance):
    # rows of the checks' feature matrices are read as grey strips, resized
    # to its 48 x 48 images.
    "VisualSteeringVector": dict(backbone="tiny_vlm_test", batch_size=16),
    "VISTASteerer": dict(backbone="tiny_vlm_test", sla_window=1, max_new_tokens=4, batch_size=16,
                         random_state=0),
    # No teacher in the checks: align_weight=0 is plain fine-tuning through the same loop
    # (the alignment itself is tested in tests/vlm/test_lavender.py).
    # A one-block pixel DDPM on 24 x 24 scenes; its skicml checks fit on the scenes' captions.
    "TinyDiffusionTeacher": dict(d_model=8, n_layers=1, n_heads=2, image_size=24, n_steps=10, max_epochs=1,
                                 batch_size=16, random_state=0, device="cpu"),
    "LavenderTuner": dict(backbone="tiny_vlm_test", align_weight=0.0, max_epochs=1, batch_size=16,
                          max_new_tokens=3, random_state=0),
    "PointMAEPretrainer": dict(trans_dim=8, depth=1, num_heads=2, n_points=16, n_groups=4, group_size=4,
                               decoder_depth=1, decoder_heads=2, normalize=False, augment=None, max_epochs=1,
                               batch_size=16, dtype="float64", random_state=0, device="cpu"),
}

#: Estimators scikit-learn's checks cannot exercise at all, with the reason
#: and where their contract is tested instead; the common tests leave them out.
NOT_COMMON_TESTED = {
    "GraphContext": (
        "its rows are node identifiers of the graph it is given, not features, so no generic data fits it; "
        "tests/contexture/test_contexts.py checks its clone, pickle, parameters and grid search"
    ),
}

_PIXEL_ROWS = ("its rows are flattened images, read like images (uint8 pixels, floats in [0, 1]); the checks "
               "that feed floats outside [0, 1] are its declared failures (utils.images.OUT_OF_RANGE_ROW_CHECKS), "
               "and tests/utils/test_images_rows.py covers them on rows of pixels")

#: Estimators whose targets are texts (scikit-learn's checks fit on numeric labels) or whose
#: rows are images (the checks feed floats outside [0, 1]): those checks are declared failures
#: and fewer than ``MIN_CHECKS`` can pass. The floor each must still reach, with the reason.
FEWER_CHECKS = {
    "LavenderTuner": (15, "fit reads y as target texts; the checks that fit on numeric labels are its "
                          "declared failures, and tests/vlm/test_lavender.py covers them on captions"),
    "CLIPEmbedder": (20, _PIXEL_ROWS),
    "CLIPVideoEncoder": (20, _PIXEL_ROWS),
    "VisualSteeringVector": (20, _PIXEL_ROWS),
    "VISTASteerer": (20, _PIXEL_ROWS),
    "TinyDiffusionTeacher": (20, _PIXEL_ROWS),
}

#: Optional modules an estimator cannot run without, by class name: the
#: common tests leave the estimator out where they do not import (the
#: ``clip`` extra is not part of every test environment).
REQUIRED_MODULES = {"CLIPEmbedder": ("open_clip",), "CLIPVideoEncoder": ("open_clip",)}

#: ``(random_state) -> (X, y)`` for estimators whose 2-D path needs more than
#: a generic feature matrix, by class name.
def _labelled_blobs(random_state):
    from sklearn.datasets import make_blobs

    return make_blobs(n_samples=60, n_features=5, centers=3, random_state=random_state)


def _captioned_scenes(random_state):
    from skicml.datasets import make_object_scenes

    images, captions, _ = make_object_scenes(24, min_objects=1, max_objects=2, random_state=random_state)
    return images.reshape(len(images), -1).astype(np.float64) / 255.0, captions


def _small_captioned_scenes(random_state):
    from skicml.datasets import make_object_scenes

    images, captions, _ = make_object_scenes(40, image_size=24, random_state=random_state)
    # Intensities in [0, 1]: skicml's checks cast X to float64, and 0-255 floats are refused as images.
    return images.reshape(len(images), -1) / 255.0, list(captions)


def _pixel_rows(random_state):
    """Blobs scaled to [0, 1]: rows of intensities, what the 2-D path of an image estimator reads."""
    X, _ = _labelled_blobs(random_state)
    return (X - X.min()) / (X.max() - X.min()), None


TEST_DATA = {"LabelContext": _labelled_blobs, "LavenderTuner": _captioned_scenes,
             "TinyDiffusionTeacher": _small_captioned_scenes, "CLIPEmbedder": _pixel_rows,
             "CLIPVideoEncoder": _pixel_rows, "VisualSteeringVector": _pixel_rows, "VISTASteerer": _pixel_rows}


def _test_context(name):
    from skicml.contexture import KNNContext

    if name == "logistic_regression":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression()
    return KNNContext(n_neighbors=5) if name == "knn_test" else name


def _pointmae_test_file():
    """A random two-block Point-MAE backbone in a file, written once per process.

    A file, not the module itself: scikit-learn's checks hash parameters
    before and after ``fit``, and a deep copy of a torch module hashes
    differently from the module even when nothing changed.
    """
    import os
    import tempfile

    from skicml._weights import save_module
    from skicml.base import seeded
    from skicml.pointcloud import PointMAEBackbone

    path = os.path.join(tempfile.gettempdir(), f"skicml-pointmae-test-{os.getpid()}.pt")
    if not os.path.exists(path):
        with seeded(0):
            backbone = PointMAEBackbone(trans_dim=8, depth=2, num_heads=2, num_group=4, group_size=4,
                                        encoder_channels=(8, 16, 16))
        config = {k: v for k, v in backbone.config.items() if k not in ("num_group", "group_size")}
        save_module(path, backbone, config, {"weights": "random, for the common tests"})
    return path


def _tiny_vlm_test_file():
    """A random three-layer TinyVLM over the scene vocabulary in a file, written once per process.

    A file for the reason of :func:`_pointmae_test_file`.
    """
    import os
    import tempfile

    from skicml.base import seeded
    from skicml.vlm import TinyVLM, save_tiny_vlm, scene_vocabulary

    path = os.path.join(tempfile.gettempdir(), f"skicml-tiny-vlm-test-{os.getpid()}.pt")
    if not os.path.exists(path):
        with seeded(0):
            model = TinyVLM(scene_vocabulary(), hidden_size=16, num_layers=3, head_dim=8)
        save_tiny_vlm(path, model, {"weights": "random, for the common tests"}, dtype=None)
    return path


def construct_instance(cls):
    """An instance of ``cls`` with its test-time parameters."""
    params = dict(TEST_PARAMS.get(cls.__name__, {}))
    # Contexts are estimators themselves: built fresh for every instance.
    for key in ("context", "base", "first", "second", "teacher"):
        if key in params and cls.__module__.startswith("skicml.contexture"):
            params[key] = _test_context(params[key])
    if params.get("embedder") == "clip_test":
        from skicml.clip import CLIPEmbedder

        params["embedder"] = CLIPEmbedder(**TEST_PARAMS["CLIPEmbedder"])
    if params.get("pretrained") == "pointmae_test":
        params["pretrained"] = _pointmae_test_file()
    if params.get("backbone") == "tiny_vlm_test":
        params["backbone"] = _tiny_vlm_test_file()
    if "contexts" in params:
        params["contexts"] = [_test_context(name) for name in params["contexts"]]
    return cls(**params)


def _importable(modules):
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - absent, or present but broken (torchvision mismatch)
            return False
    return True


def estimators_under_test(include_self_test=True):
    """Test instances of every public estimator whose optional modules
    import, plus the machinery's self-test."""
    estimators = [
        construct_instance(cls) for name, cls in all_estimators()
        if _importable(REQUIRED_MODULES.get(name, ())) and name not in NOT_COMMON_TESTED
    ]
    if include_self_test:
        from ._testing import _TinyMLPClassifier

        estimators.append(construct_instance(_TinyMLPClassifier))
    return estimators


def expected_failed_checks(estimator):
    """The checks ``estimator`` declares it cannot pass, with reasons."""
    return dict(getattr(get_tags(estimator), "expected_failed_checks", {}) or {})
