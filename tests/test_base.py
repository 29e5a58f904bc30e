import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils import get_tags

from skicml.base import (
    SkicmlTags,
    progress,
    resolve_device,
    resolve_dtype,
    seed_from_random_state,
    seeded,
    to_tensor,
)
from skicml.utils._testing import _TinyMLPClassifier


def test_resolve_device():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not a device"):
        resolve_device("gpu-please")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no GPU"):
            resolve_device("cuda")


def test_seed_from_random_state():
    assert seed_from_random_state(3) == seed_from_random_state(3)
    rng = np.random.RandomState(0)
    assert seed_from_random_state(rng) != seed_from_random_state(rng)


def test_seeded_is_reproducible_and_restores_global_state():
    before = torch.random.get_rng_state()
    np_before = np.random.get_state()[1].copy()
    with seeded(5):
        first = torch.rand(3)
        np.random.rand()
    with seeded(5):
        second = torch.rand(3)
    torch.testing.assert_close(first, second)
    assert torch.equal(torch.random.get_rng_state(), before)
    np.testing.assert_array_equal(np.random.get_state()[1], np_before)


@pytest.mark.parametrize("spec, expected", [
    ("float32", torch.float32), (np.float64, torch.float64),
    (torch.bfloat16, torch.bfloat16), ("float16", torch.float16),
])
def test_resolve_dtype(spec, expected):
    assert resolve_dtype(spec) is expected


def test_resolve_dtype_rejects_integers():
    with pytest.raises(ValueError, match="not supported"):
        resolve_dtype("int64")


def test_to_tensor_copies_readonly_input():
    array = np.arange(6, dtype=np.float64).reshape(2, 3)
    array.setflags(write=False)
    tensor = to_tensor(array, dtype="float32")
    assert tensor.dtype == torch.float32 and tensor.shape == (2, 3)
    tensors = to_tensor({"a": array, "b": np.arange(2)}, dtype="float32")
    assert tensors["b"].dtype == torch.int64  # integer inputs keep their dtype


def test_tags_carry_expected_failed_checks():
    tags = get_tags(_TinyMLPClassifier())
    assert isinstance(tags, SkicmlTags)
    assert tags.expected_failed_checks == {}
    assert tags.estimator_type == "classifier"


def test_progress_is_silent_at_verbose_zero(capsys):
    assert list(progress(range(3), verbose=0)) == [0, 1, 2]
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_progress_shows_at_verbose_one(capsys):
    list(progress(range(3), verbose=1, desc="work"))
    assert "work" in capsys.readouterr().err


def test_progress_auto_appears_only_for_slow_steps(capsys, monkeypatch):
    import time

    from skicml.utils import _runtime

    monkeypatch.setattr(_runtime, "AUTO_PROGRESS_DELAY", 0.2)
    list(progress(range(3), verbose="auto", desc="quick"))
    assert "quick" not in capsys.readouterr().err
    for _ in progress(range(3), verbose="auto", desc="slow"):
        time.sleep(0.15)
    assert "slow" in capsys.readouterr().err


def test_estimators_default_to_auto_progress():
    from skicml.utils import all_estimators

    defaults = {name: cls().get_params().get("verbose") for name, cls in all_estimators()
                if "verbose" in cls().get_params()}
    assert defaults and all(value == "auto" for value in defaults.values()), defaults


def test_warn_user_points_at_the_callers_line_through_estimator_wrappers():
    import warnings

    from sklearn.pipeline import make_pipeline

    from skicml import TabICLClassifier

    X = np.array([["1.5", "a"], ["2.0", "b"], ["0.5", "a"], ["3.0", "b"]] * 4, dtype=object)
    y = np.array([0, 1, 0, 1] * 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Pipeline -> fit_context -> the thread policy -> TabICL's encoder: the warning names this line.
        make_pipeline(TabICLClassifier(n_estimators=1, random_state=0)).fit(X, y)
    numeric = [w for w in caught if "written as strings" in str(w.message)]
    assert numeric and numeric[0].filename == __file__
    assert "make_pipeline(" in open(__file__).read().splitlines()[numeric[0].lineno - 1]


def _blobs(n=200, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, 4).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    return torch.from_numpy(X), torch.from_numpy(y)


def test_pickled_modules_live_on_cpu():
    X, y = _blobs(60)
    est = _TinyMLPClassifier(max_epochs=2, random_state=0, device="cpu").fit(X.numpy(), y.numpy())
    state = est.__getstate__()
    assert all(p.device.type == "cpu" for p in state["module_"].parameters())
    clone = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(clone.predict_proba(X.numpy()), est.predict_proba(X.numpy()))


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(2, 40), d=st.integers(1, 6),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_to_tensor_round_trip(n, d, dtype):
    array = np.random.RandomState(n * d).randn(n, d).astype(dtype)
    tensor = to_tensor(array)
    assert tensor.shape == (n, d) and tensor.numpy().dtype == dtype
    np.testing.assert_array_equal(tensor.numpy(), array)
