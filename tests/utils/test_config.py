"""The thread policy: skicml's settings and the estimators' thread count."""

import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

import skicml
from skicml.base import TorchEstimatorMixin
from skicml.utils._runtime import torch_threads


class _ThreadRecorder(TorchEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Records torch's thread count inside its methods."""

    def __init__(self, device="cpu", random_state=None):
        self.device = device
        self.random_state = random_state

    def fit(self, X, y):
        if len(X) != len(y):
            raise ValueError("X and y differ in length")
        self.fit_threads_ = torch.get_num_threads()
        self.classes_ = np.unique(y)
        # An estimator called inside another keeps the outer count.
        self.inner_threads_ = _Inner().predict(X)
        return self

    def predict(self, X):
        if torch.get_num_threads() != 1 and skicml.get_config()["torch_threads"] == 1:
            raise AssertionError("predict ran with more than one thread")
        return np.full(len(X), torch.get_num_threads())


class _Inner(_ThreadRecorder):
    def predict(self, X):
        return torch.get_num_threads()


class _Sub(_ThreadRecorder):
    """Inherits fit and predict: they are wrapped once, not twice."""


@pytest.fixture
def two_threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(previous)


def test_estimators_work_with_the_configured_threads_and_restore_the_callers(two_threads):
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    model = _ThreadRecorder().fit(X, y)
    assert model.fit_threads_ == 1 and model.inner_threads_ == 1
    assert torch.get_num_threads() == 2
    with skicml.config_context(torch_threads=2):
        assert _ThreadRecorder().fit(X, y).fit_threads_ == 2
    with skicml.config_context(torch_threads=None):
        assert _ThreadRecorder().fit(X, y).fit_threads_ == 2
    assert skicml.get_config()["torch_threads"] == 1
    assert torch.get_num_threads() == 2


def test_errors_restore_the_callers_threads(two_threads):
    with pytest.raises(ValueError):
        _ThreadRecorder().fit(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError
    assert torch.get_num_threads() == 2


def test_inherited_methods_are_wrapped_once_and_keep_their_names():
    assert _Sub.fit._skicml_threaded and _Sub.fit.__wrapped__ is _ThreadRecorder.fit.__wrapped__
    assert _ThreadRecorder.fit.__name__ == "fit"


def test_the_settings_are_checked_and_per_thread():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="torch_threads"):
            skicml.set_config(torch_threads=bad)
    seen = []
    with skicml.config_context(torch_threads=3):
        worker = threading.Thread(target=lambda: seen.append(skicml.get_config()["torch_threads"]))
        worker.start()
        worker.join()
        assert skicml.get_config()["torch_threads"] == 3
    assert seen == [1]


def test_the_environment_sets_the_default():
    code = "import skicml; print(skicml.get_config()['torch_threads'])"
    for value, expected in (("3", "3"), ("none", "None")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"SKICML_TORCH_THREADS": value, "PATH": ""}, check=True).stdout.strip()
        assert out == expected
    failed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"SKICML_TORCH_THREADS": "zero", "PATH": ""})
    assert failed.returncode != 0 and "SKICML_TORCH_THREADS='zero'" in failed.stderr
