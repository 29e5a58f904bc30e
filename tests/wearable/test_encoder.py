"""WearableEncoder: the estimator's contract beyond scikit-learn's checks."""

import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import FeatureUnion, make_pipeline

from skicml.datasets import make_wearable_cohort
from skicml.wearable import WearableEncoder, WearableModel, WeeklySummaryFeatures

TINY = dict(d_model=16, n_layers=1, head_dim=8, tokenizer_hidden=16, proj_dim=8, batch_size=32,
            max_epochs=2, random_state=0, device="cpu")


@pytest.fixture(scope="module")
def cohort():
    X, meta, y_static, y_weekly = make_wearable_cohort(n_people=24, n_weeks=2, random_state=0)
    return X, meta, y_static, y_weekly


@pytest.fixture(scope="module")
def fitted(cohort):
    return WearableEncoder(**TINY).fit(cohort[0])


def test_embeddings_shape_and_finite(cohort, fitted):
    X = cohort[0]
    Z = fitted.transform(X)
    assert Z.shape == (len(X), 16) and Z.dtype == np.float32
    assert np.isfinite(Z).all()
    assert fitted.n_channels_ == X.shape[2] and fitted.n_timesteps_ == 168
    assert fitted.n_features_in_ == 168 * X.shape[2]
    assert list(fitted.get_feature_names_out()) == [f"wearableencoder{i}" for i in range(16)]


def test_flattened_weeks_give_the_same_embeddings(cohort, fitted):
    X = cohort[0]
    flat = X.reshape(len(X), -1)
    encoder = WearableEncoder(n_channels=X.shape[2], **TINY).fit(flat)
    np.testing.assert_allclose(encoder.transform(flat), fitted.transform(X), rtol=1e-5, atol=1e-6)


def test_same_seed_same_embeddings(cohort, fitted):
    torch.use_deterministic_algorithms(True)
    try:
        again = WearableEncoder(**TINY).fit(cohort[0])
    finally:
        torch.use_deterministic_algorithms(False)
    np.testing.assert_array_equal(again.transform(cohort[0]), fitted.transform(cohort[0]))


def test_all_missing_week_and_variable(cohort):
    X = cohort[0].copy()
    X[0] = np.nan            # a week with nothing recorded
    X[:, :, 1] = np.nan      # a variable never recorded
    encoder = WearableEncoder(**TINY).fit(X)
    assert encoder.channel_mean_[1] == 0 and encoder.channel_std_[1] == 1
    assert np.isfinite(encoder.channel_mean_).all() and np.isfinite(encoder.channel_std_).all()
    Z = encoder.transform(X)
    assert np.isfinite(Z).all()


def test_all_missing_data_is_an_error(cohort):
    with pytest.raises(ValueError, match="every value of X is missing"):
        WearableEncoder(**TINY).fit(np.full((4, 168, 3), np.nan))


def test_shape_errors(cohort, fitted):
    X = cohort[0]
    with pytest.raises(ValueError, match="168 hours x"):
        fitted.transform(X[:, :100])
    with pytest.raises(ValueError, match="168 hours x 12 variables; got 168 x 3"):
        fitted.transform(X[:, :, :3])
    with pytest.raises(ValueError, match="expecting 2016 features"):
        fitted.transform(X.reshape(len(X), -1)[:, :100])
    with pytest.raises(ValueError, match="not a whole number of hours"):
        WearableEncoder(n_channels=5, **TINY).fit(np.zeros((4, 12)))
    with pytest.raises(ValueError, match="n_channels=4"):
        WearableEncoder(n_channels=4, **TINY).fit(X)
    with pytest.raises(ValueError, match="infinity|inf"):
        WearableEncoder(**TINY).fit(np.full((4, 24, 2), np.inf))


def test_integer_input_is_cast():
    X = np.random.default_rng(0).integers(0, 100, size=(6, 24, 2))
    Z = WearableEncoder(**TINY).fit_transform(X)
    assert Z.dtype == np.float64 and np.isfinite(Z).all()  # integers become float64, as in scikit-learn


def test_participant_pairs(cohort):
    X, meta = cohort[0], cohort[1]
    encoder = WearableEncoder(positive_pairs="participant", **TINY)
    encoder.fit(X, groups=meta["person_id"])
    assert np.isfinite(encoder.history_).all()
    with pytest.warns(UserWarning, match="needs groups"):
        WearableEncoder(positive_pairs="participant", **TINY).fit(X)
    with pytest.raises(ValueError, match="groups must have shape"):
        WearableEncoder(positive_pairs="participant", **TINY).fit(X, groups=[0, 1])


def test_partner_is_another_week_of_the_same_person():
    groups = np.array([0, 0, 1, 2, 2, 2, 1])
    partner = WearableEncoder(**TINY)._partner_index(groups, len(groups), seed=0)
    assert (groups[partner] == groups).all()
    assert (partner != np.arange(len(groups))).all()


def test_save_and_load_roundtrip(cohort, fitted, tmp_path):
    path = tmp_path / "encoder.pt"
    digest = fitted.save(path)
    assert len(digest) == 64
    loaded = WearableEncoder(pretrained=str(path), device="cpu").fit(cohort[0])
    np.testing.assert_array_equal(loaded.transform(cohort[0]), fitted.transform(cohort[0]))
    assert loaded.history_ == []
    with pytest.raises(ValueError, match="reads weeks of"):
        WearableEncoder(pretrained=str(path)).fit(cohort[0][:, :, :2])
    with pytest.raises(FileNotFoundError, match="never downloads"):
        WearableEncoder(pretrained=str(tmp_path / "missing.pt")).fit(cohort[0])


def test_pickle_keeps_embeddings(cohort, fitted):
    clone = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(clone.transform(cohort[0]), fitted.transform(cohort[0]))


def test_training_reduces_the_loss_without_collapse():
    X, *_ = make_wearable_cohort(n_people=64, n_weeks=2, random_state=1)
    encoder = WearableEncoder(**dict(TINY, proj_dim=16, dropout=0.0, max_epochs=8, lr=2e-3)).fit(X)
    assert encoder.history_[-1] < 0.8 * encoder.history_[0]
    Z = encoder.transform(X)
    assert (Z.std(axis=0) > 1e-3).all()
    singular = np.linalg.svd(Z - Z.mean(0), compute_uv=False)
    effective_rank = np.exp(-np.sum((p := singular / singular.sum()) * np.log(p + 1e-12)))
    assert effective_rank > Z.shape[1] / 4


@pytest.mark.parametrize("visible_weight, day_context, pooling",
                         [(0.0, False, "mean"), (1.0, True, "layer_mean")])
def test_masked_objective_trains_and_round_trips(tmp_path, visible_weight, day_context, pooling):
    X, *_ = make_wearable_cohort(n_people=32, n_weeks=2, random_state=1)
    encoder = WearableEncoder(**dict(TINY, objective="masked", visible_weight=visible_weight,
                                     day_context=day_context, pooling=pooling, max_epochs=6, lr=3e-3)).fit(X)
    assert encoder.module_.visible_weight == visible_weight
    assert encoder.module_.tokenizer.day_context == day_context
    assert encoder.history_[-1] < 0.9 * encoder.history_[0]
    Z = encoder.transform(X)
    width = 16 * (2 if pooling == "layer_mean" else 1)  # tokenizer + one layer
    assert Z.shape == (len(X), width) == (len(X), encoder.embedding_dim_)
    assert len(encoder.get_feature_names_out()) == width
    assert np.isfinite(Z).all() and (Z.std(axis=0) > 1e-3).all()
    encoder.save(tmp_path / "masked.pt")
    loaded = WearableEncoder(pretrained=str(tmp_path / "masked.pt")).fit(X)
    assert loaded.config_["objective"] == "masked"
    assert loaded.config_["visible_weight"] == visible_weight
    assert loaded.config_["day_context"] == day_context
    assert loaded.config_["pooling"] == pooling and loaded.embedding_dim_ == width
    np.testing.assert_array_equal(loaded.transform(X), Z)


def test_pooling_is_not_part_of_the_masked_objective(cohort):
    # The recipe of a shipped layer_mean encoder relies on this: the same
    # seed trains the same weights whatever the readout.
    params = dict(TINY, objective="masked", visible_weight=1.0, max_epochs=1)
    mean = WearableEncoder(**params).fit(cohort[0])
    layers = WearableEncoder(**dict(params, pooling="layer_mean")).fit(cohort[0])
    assert mean.history_ == layers.history_
    for name, tensor in mean.module_.state_dict().items():
        torch.testing.assert_close(layers.module_.state_dict()[name], tensor, rtol=0, atol=0)
    np.testing.assert_array_equal(layers.transform(cohort[0])[:, -16:], mean.transform(cohort[0]))


def test_masked_objective_has_no_positive_pairs(cohort):
    with pytest.raises(ValueError, match="objective='masked'"):
        WearableEncoder(**dict(TINY, objective="masked", positive_pairs="participant")).fit(
            cohort[0], groups=cohort[1]["person_id"])


@pytest.mark.parametrize("backbone", ["mamba2", "transformer"])
def test_pipelines(cohort, backbone):
    X, meta, y_static = cohort[0], cohort[1], cohort[2]
    y = y_static.loc[meta["person_id"], "age_group"].to_numpy()
    encoder = WearableEncoder(backbone=backbone, **TINY)
    model = make_pipeline(encoder, LogisticRegression(max_iter=500)).fit(X, y)
    assert model.predict_proba(X).shape == (len(X), 2)
    union = FeatureUnion([("wbm", WearableEncoder(**TINY)), ("summary", WeeklySummaryFeatures())])
    assert union.fit_transform(X).shape == (len(X), 16 + 9 * X.shape[2])


def test_unknown_options(cohort):
    with pytest.raises(ValueError, match="positive_pairs"):
        WearableEncoder(positive_pairs="nearby").fit(cohort[0])
    with pytest.raises(ValueError, match="dtype"):
        WearableEncoder(dtype="float16").fit(cohort[0])
    with pytest.raises(ValueError, match="objective"):
        WearableEncoder(**dict(TINY, objective="simclr")).fit(cohort[0])


def test_real_actigraphy_weeks_end_to_end():
    from skicml.datasets import load_wearable_example

    X, meta = load_wearable_example()
    encoder = WearableEncoder(**dict(TINY, max_epochs=1)).fit(X)
    Z = encoder.transform(X)
    assert Z.shape == (len(X), 16) and np.isfinite(Z).all()


def test_shipped_encoder_is_frozen_and_documented(cohort):
    from skicml._weights import available_weights, load_weights

    assert "wearable-core-small" in available_weights()
    encoder = WearableEncoder(pretrained="wearable-core-small").fit(cohort[0])
    payload = load_weights("wearable-core-small")
    for name, tensor in encoder.module_.state_dict().items():
        torch.testing.assert_close(tensor, payload["state_dict"][name], rtol=0, atol=0)
    assert encoder.history_ == [] and encoder.embedding_dim_ == 3 * 128  # layer_mean over 2 layers
    assert encoder.config_["day_context"] and encoder.config_["pooling"] == "layer_mean"
    assert encoder.provenance_["epochs"] >= 1 and "probe_scores" in encoder.provenance_
    assert np.isfinite(encoder.transform(cohort[0])).all()


def test_zero_epochs_keeps_the_random_network(cohort):
    encoder = WearableEncoder(**dict(TINY, max_epochs=0)).fit(cohort[0])
    again = WearableEncoder(**dict(TINY, max_epochs=0)).fit(cohort[0])
    assert encoder.history_ == [] and encoder.n_iter_ == 0
    np.testing.assert_array_equal(encoder.transform(cohort[0]), again.transform(cohort[0]))


class _CountingModel(WearableModel):
    """The network with a frozen tokenizer that counts its training steps."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tokenizer.requires_grad_(False)
        self.n_forward = 0

    def forward(self, weeks, partner=None):
        self.n_forward += 1
        return super().forward(weeks, partner)


class _CountingEncoder(WearableEncoder):
    module_class = _CountingModel


def test_a_subclass_module_is_the_one_trained_and_kept(cohort, fitted):
    X = cohort[0]
    encoder = _CountingEncoder(**TINY).fit(X)
    assert type(encoder.module_) is _CountingModel
    assert encoder.module_.n_forward > 0 and len(encoder.history_) == TINY["max_epochs"]
    # Built as the base class builds its network, under the same seed: the frozen
    # tokenizer keeps its initial weights, the trained backbone moves away from them.
    untrained = WearableEncoder(**dict(TINY, max_epochs=0)).fit(X).module_.state_dict()
    trained = encoder.module_.state_dict()
    tokenizer = [name for name in trained if name.startswith("tokenizer.")]
    backbone = [name for name in trained if name.startswith("backbone.")]
    assert tokenizer and backbone
    for name in tokenizer:
        torch.testing.assert_close(trained[name], untrained[name])
    assert any(not torch.equal(trained[name], untrained[name]) for name in backbone)
    # The hook is a class attribute, not a parameter: clones keep it, get_params ignores it.
    assert "module_class" not in encoder.get_params()
    assert type(clone(encoder).fit(X).module_) is _CountingModel
    assert type(fitted.module_) is WearableModel


@pytest.mark.parametrize("hours", [24, 504])
def test_pretrained_encoder_refuses_weeks_of_another_length(cohort, hours):
    # Issue 28, item 5: the shipped encoder reads 168-hour weeks.
    X = cohort[0]
    other = np.resize(X, (len(X), hours, X.shape[2])).astype(X.dtype)
    with pytest.raises(ValueError, match=f"reads weeks of 168 hours; X has {hours} hours"):
        WearableEncoder(pretrained="wearable-core-small").fit(other)


def test_pretrained_encoder_transform_refuses_weeks_of_another_length(cohort):
    X = cohort[0]
    encoder = WearableEncoder(pretrained="wearable-core-small").fit(X)
    with pytest.raises(ValueError, match=r"fitted on weeks of 168 hours x \d+ variables; got 24 x"):
        encoder.transform(X[:, :24])


@pytest.mark.parametrize("params, name", [({"batch_size": 0}, "batch_size"), ({"max_epochs": -1}, "max_epochs")])
def test_degenerate_training_numbers_are_refused(cohort, params, name):
    # Issue 28, item 8: batch_size=0 was a ZeroDivisionError deep in training.
    with pytest.raises(ValueError, match=f"'{name}' parameter of WearableEncoder must be"):
        WearableEncoder(**dict(TINY, **params)).fit(cohort[0][:4])


def test_transform_shows_progress_only_when_verbose(cohort, fitted, capfd):
    # Issue 28, item 9: transform (30-110 s in the user guide) was silent at verbose=1.
    import copy

    X = cohort[0]
    encoder = copy.deepcopy(fitted)
    capfd.readouterr()
    quiet = encoder.transform(X)
    assert capfd.readouterr() == ("", "")
    encoder.set_params(verbose=1)
    np.testing.assert_array_equal(encoder.transform(X), quiet)
    err = capfd.readouterr().err
    assert "WearableEncoder transform" in err and f"/{len(X)} [" in err and "week/s" in err
