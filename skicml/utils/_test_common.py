"""Test-time settings of every estimator, in one place.

Like scikit-learn's instance generator: the common tests build each estimator
with :data:`TEST_PARAMS` (tiny models, few epochs) and the data of
:data:`TEST_DATA` when the estimator's 2-D path needs a particular layout.
Checks an estimator cannot pass are declared in its tags
(``expected_failed_checks``), not here.
"""

import importlib

from sklearn.utils import get_tags

from .discovery import all_estimators

__all__ = [
    "CLIP_TEST_CONFIG",
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
    "CLIPEmbedder": dict(pretrained=None, model_config=CLIP_TEST_CONFIG, precision="fp64", random_state=0,
                         device="cpu"),
}

#: Optional modules an estimator cannot run without, by class name: the
#: common tests leave the estimator out where they do not import (the
#: ``clip`` extra is not part of every test environment).
REQUIRED_MODULES = {"CLIPEmbedder": ("open_clip",)}

#: ``(random_state) -> (X, y)`` for estimators whose 2-D path needs more than
#: a generic feature matrix, by class name.
TEST_DATA = {}


def construct_instance(cls):
    """An instance of ``cls`` with its test-time parameters."""
    return cls(**TEST_PARAMS.get(cls.__name__, {}))


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
        if _importable(REQUIRED_MODULES.get(name, ()))
    ]
    if include_self_test:
        from ._testing import _TinyMLPClassifier

        estimators.append(construct_instance(_TinyMLPClassifier))
    return estimators


def expected_failed_checks(estimator):
    """The checks ``estimator`` declares it cannot pass, with reasons."""
    return dict(getattr(get_tags(estimator), "expected_failed_checks", {}) or {})
