"""Fine-tuning TabICLClassifier and TabICLRegressor on the user's table (``finetune_epochs``)."""

import hashlib
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone

from skicml import TabICLClassifier, TabICLRegressor
from skicml.tabicl import TabICLModel, TabICLv2Model
from skicml.utils.param_validation import InvalidParameterError

TINY_V1 = dict(max_classes=4, embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1,
               row_nhead=2, row_num_cls=2, icl_num_blocks=2, icl_nhead=2)
TINY_V2_REGRESSION = dict(max_classes=0, num_quantiles=32, embed_dim=16, col_num_blocks=1, col_nhead=2,
                          col_num_inds=8, col_affine=True, col_feature_group=False, col_ssmax="none",
                          row_num_blocks=1, row_nhead=2, row_num_cls=2, icl_num_blocks=2, icl_nhead=2,
                          icl_ssmax="none")


def _checkpoint(path, network, config):
    torch.manual_seed(0)
    model = network(**config)
    with torch.no_grad():  # away from the zero initialisation, so that every block matters
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    torch.save({"config": model.config, "state_dict": model.state_dict()}, path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finetune")
    return {"classifier": _checkpoint(folder / "v1.ckpt", TabICLModel, TINY_V1),
            "regressor": _checkpoint(folder / "v2.ckpt", TabICLv2Model, TINY_V2_REGRESSION)}


def _table(task, n=160, seed=0):
    """A learnable table: the target is a simple function of the first two columns."""
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, 4))
    signal = 2 * X[:, 0] - X[:, 1]
    if task == "classifier":
        return X, (signal > 0).astype(int)
    return X, signal + 0.1 * rng.normal(size=n)


def _estimator(task, files, **params):
    cls = TabICLClassifier if task == "classifier" else TabICLRegressor
    options = dict(n_estimators=2, pretrained=str(files[task]), random_state=0, device="cpu", verbose=0)
    if task == "classifier":
        options.update(softmax_temperature=0.9, pca_components=None)
    return cls(**{**options, **params})


def _predict(estimator, X):
    return estimator.predict_proba(X) if hasattr(estimator, "predict_proba") else estimator.predict(X)


def _state(estimator):
    return {name: value.detach().clone() for name, value in estimator.model_.state_dict().items()}


def _same_state(a, b):
    return all(torch.equal(a[name], b[name]) for name in a)


@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_finetuning_lowers_the_held_out_loss_of_a_tiny_model(task, files):
    X, y = _table(task)
    frozen = _estimator(task, files).fit(X, y)
    tuned = _estimator(task, files, finetune_epochs=8, finetune_lr=3e-3, finetune_patience=None).fit(X, y)
    history = tuned.finetune_history_
    assert tuned.n_finetune_steps_ == 8  # one episode (one optimiser step) per epoch under 10,000 rows
    assert len(history["train_loss"]) == len(history["valid_loss"]) == 8
    assert history["best_epoch"] > 0
    assert history["kept_valid_loss"] < 0.9 * history["pretrained_valid_loss"]
    assert not _same_state(_state(frozen), _state(tuned))
    # Inference is the ordinary one: the fitted estimator predicts every row as the frozen one does.
    assert _predict(tuned, X[:5]).shape == _predict(frozen, X[:5]).shape


@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_finetuning_off_is_the_frozen_model_exactly(task, files):
    X, y = _table(task)
    digest = hashlib.sha256(files[task].read_bytes()).hexdigest()
    frozen = _estimator(task, files).fit(X, y)
    before = _predict(frozen, X)
    assert frozen.n_finetune_steps_ == 0 and frozen.finetune_history_ is None
    # The fine-tuning options do nothing while finetune_epochs is 0.
    off = _estimator(task, files, finetune_epochs=0, finetune_lr=1.0, finetune_patience=1).fit(X, y)
    np.testing.assert_array_equal(_predict(off, X), before)
    # Fine-tuning one estimator changes neither the file nor the network a later estimator loads.
    _estimator(task, files, finetune_epochs=2, finetune_lr=1e-2, finetune_patience=None).fit(X, y)
    np.testing.assert_array_equal(_predict(_estimator(task, files).fit(X, y), X), before)
    assert hashlib.sha256(files[task].read_bytes()).hexdigest() == digest


def test_finetuning_off_leaves_the_shipped_models_predictions_unchanged():
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    params = dict(n_estimators=2, random_state=0, device="cpu", verbose=0)
    frozen = TabICLClassifier(**params).fit(X, y)
    off = TabICLClassifier(**params, finetune_epochs=0, finetune_lr=0.5).fit(X, y)
    np.testing.assert_array_equal(off.predict_proba(X), frozen.predict_proba(X))


@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_early_stopping_restores_the_best_weights(task, files):
    X, y = _table(task)
    # A large step makes the held-out loss rise after a few epochs.
    tuned = _estimator(task, files, finetune_epochs=20, finetune_lr=3e-2, finetune_patience=2).fit(X, y)
    history = tuned.finetune_history_
    n_epochs = len(history["valid_loss"])
    assert n_epochs < 20  # stopped early
    assert tuned.n_finetune_steps_ == n_epochs
    best = history["best_epoch"]
    # The kept weights, scored again after training, are those of the best epoch (or the pretrained ones).
    expected = history["valid_loss"][best - 1] if best else history["pretrained_valid_loss"]
    assert history["kept_valid_loss"] == pytest.approx(expected, rel=1e-4)
    assert history["kept_valid_loss"] <= min(history["valid_loss"]) + 1e-4
    assert n_epochs - best == 2 or best == 0
    if task == "regressor":  # here the best epoch is neither the first nor the last
        assert 1 < best < n_epochs


@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_a_fine_tuning_that_only_hurts_keeps_the_pretrained_weights(task, files):
    X, y = _table(task)
    frozen = _estimator(task, files).fit(X, y)
    tuned = _estimator(task, files, finetune_epochs=2, finetune_lr=5.0, finetune_patience=None).fit(X, y)
    assert tuned.finetune_history_["best_epoch"] == 0
    assert _same_state(_state(frozen), _state(tuned))
    np.testing.assert_array_equal(_predict(tuned, X), _predict(frozen, X))


@pytest.mark.parametrize("task", ["classifier", "regressor"])
def test_finetuning_is_reproducible_and_survives_pickle_and_clone(task, files):
    X, y = _table(task)
    params = dict(finetune_epochs=3, finetune_lr=3e-3)
    first = _estimator(task, files, **params).fit(X, y)
    second = _estimator(task, files, **params).fit(X, y)
    assert _same_state(_state(first), _state(second))
    assert first.finetune_history_ == second.finetune_history_
    np.testing.assert_array_equal(_predict(first, X), _predict(second, X))
    restored = pickle.loads(pickle.dumps(first))
    np.testing.assert_array_equal(_predict(restored, X), _predict(first, X))
    assert restored.n_finetune_steps_ == first.n_finetune_steps_
    copy = clone(first)
    assert copy.get_params()["finetune_epochs"] == 3 and not hasattr(copy, "model_")
    # Another seed draws other episodes.
    other = _estimator(task, files, **params, random_state=1).fit(X, y)
    assert other.finetune_history_["train_loss"] != first.finetune_history_["train_loss"]


@pytest.mark.parametrize("cls", [TabICLClassifier, TabICLRegressor])
@pytest.mark.parametrize("name, value", [("finetune_epochs", -1), ("finetune_epochs", 1.5),
                                         ("finetune_lr", 0.0), ("finetune_validation_fraction", 1.0),
                                         ("finetune_validation_fraction", 0.0), ("finetune_patience", 0)])
def test_bad_finetuning_arguments_are_named(cls, name, value):
    X, y = _table("classifier", n=20)
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of {cls.__name__} must be"):
        cls(**{name: value}, pretrained=None, device="cpu").fit(X, y)


def test_finetuning_refuses_tables_it_cannot_learn_from(files):
    X, y = _table("classifier", n=40)
    with pytest.raises(ValueError, match="2 rows are too few"):
        _estimator("classifier", files, finetune_epochs=1).fit(X[:2], [0, 1])
    # More classes than the network's own head (the class tree serves them only at inference).
    many = np.arange(40) % 6
    with pytest.raises(ValueError, match="4-class head, and y has 6 classes"):
        _estimator("classifier", files, finetune_epochs=1).fit(X, many)
    # Nothing to learn (a single class): no fine-tuning, the prior answers.
    single = _estimator("classifier", files, finetune_epochs=1).fit(X, np.zeros(40, dtype=int))
    assert single.n_finetune_steps_ == 0 and single.finetune_history_ is None


@pytest.mark.slow
@pytest.mark.parametrize("cls", [TabICLClassifier, TabICLRegressor])
def test_check_estimator_with_finetuning(cls):
    """scikit-learn's checks with fine-tuning on (the common tests run it off); about 10 CPU-seconds each."""
    from sklearn.utils.estimator_checks import check_estimator

    from skicml.utils._test_common import TEST_PARAMS

    params = {**TEST_PARAMS[cls.__name__], "finetune_epochs": 1}
    params.pop("pretrained", None)  # the shipped network: random weights fail the checks' accuracy bars
    estimator = cls(**params)
    check_estimator(estimator, expected_failed_checks=estimator.__sklearn_tags__().expected_failed_checks)
