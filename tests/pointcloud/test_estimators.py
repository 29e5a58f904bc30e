import hashlib
import pickle

import numpy as np
import pytest
import torch

from skicml.base import seeded
from skicml.datasets import make_point_clouds
from skicml.pointcloud import GAPromptClassifier, GAPromptNetwork, PointMAEBackbone, PointMAEPretrainer
from skicml.pointcloud._backbone import official_state_dict
from skicml.pointcloud._classifier import exempt_from_weight_decay, rotate_clouds


def _backbone(seed=0):
    with seeded(seed):
        return PointMAEBackbone(trans_dim=16, depth=2, num_heads=2, num_group=16, group_size=8)


def _classifier(**kwargs):
    params = dict(pretrained=_backbone(), n_points=64, n_groups=16, group_size=8, n_token_prompts=4,
                  head_hidden=16, max_epochs=2, batch_size=16, validation_fraction=None, random_state=0,
                  device="cpu")
    return GAPromptClassifier(**(params | kwargs))


@pytest.fixture(scope="module")
def data():
    return make_point_clouds(48, n_points=64, classes=["sphere", "cube", "torus"], random_state=0)


@pytest.fixture(scope="module")
def fitted(data):
    return _classifier().fit(data.points, data.target)


def _digest(module):
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def test_frozen_backbone_is_bit_identical_after_fit(data, fitted):
    assert _digest(fitted.module_.backbone) == _digest(_backbone())
    assert fitted.n_trainable_params_ == sum(p.numel() for p in fitted.module_.parameters() if p.requires_grad)
    total = sum(p.numel() for p in fitted.module_.parameters())
    assert fitted.trainable_ratio_ == pytest.approx(fitted.n_trainable_params_ / total)
    assert 0 < fitted.trainable_ratio_ < 0.5


def test_full_fine_tuning_moves_the_backbone(data):
    model = _classifier(peft="full", max_epochs=1).fit(data.points, data.target)
    assert _digest(model.module_.backbone) != _digest(_backbone())
    assert model.trainable_ratio_ == 1.0


def test_fit_records_history_and_predicts(data, fitted):
    assert list(fitted.history_.columns) == ["epoch", "train_loss", "valid_loss", "seconds"]
    assert len(fitted.history_) == fitted.n_iter_ == 2
    proba = fitted.predict_proba(data.points)
    assert proba.shape == (48, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert set(fitted.predict(data.points)) <= set(fitted.classes_)
    assert fitted.transform(data.points).shape == (48, 3 * 16)


def test_validation_split_keeps_the_best_epoch(data):
    model = _classifier(max_epochs=3, validation_fraction=0.25).fit(data.points, data.target)
    valid = model.history_["valid_loss"].to_numpy()
    assert np.isfinite(valid).all()
    assert model.best_epoch_ == int(np.argmin(valid)) + 1


def test_same_random_state_same_predictions(data, fitted):
    again = _classifier().fit(data.points, data.target)
    np.testing.assert_array_equal(again.predict_proba(data.points), fitted.predict_proba(data.points))


def test_random_weights_are_drawn_from_random_state_not_torch_global_state(data):
    probas = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        model = _classifier(pretrained=None, peft="linear", max_epochs=1).fit(data.points, data.target)
        probas.append(model.predict_proba(data.points))
    np.testing.assert_array_equal(probas[0], probas[1])


def test_predictions_ignore_translation_scale_and_point_order(data, fitted):
    x = data.points[:6]
    expected = fitted.predict_proba(x)
    moved = 3.0 * x + np.array([1.0, -2.0, 0.5], dtype=np.float32)
    np.testing.assert_allclose(fitted.predict_proba(moved), expected, atol=1e-5)
    perm = np.random.default_rng(0).permutation(x.shape[1])
    np.testing.assert_allclose(fitted.predict_proba(x[:, perm]), expected, atol=1e-5)


def test_a_cloud_does_not_depend_on_its_batch(data, fitted):
    together = fitted.predict_proba(data.points[:8])
    alone = np.concatenate([fitted.predict_proba(data.points[i:i + 1]) for i in range(8)])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_clouds_of_varying_size(fitted):
    clouds = make_point_clouds(6, n_points=90, min_points=40, random_state=1).points
    assert len({len(c) for c in clouds}) > 1
    assert fitted.predict(clouds).shape == (6,)


def test_pickle_round_trip(data, fitted):
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(data.points), fitted.predict_proba(data.points))


def test_shift_points_moves_the_normalised_clouds(data, fitted):
    shifted = fitted.shift_points(data.points[:2])
    assert shifted.shape == (2, 64, 3)
    assert np.isfinite(shifted).all()


def test_grouping_larger_than_the_clouds_is_refused(data):
    with pytest.raises(ValueError, match="n_groups=80 exceeds"):
        _classifier(n_groups=80).fit(data.points, data.target)
    with pytest.raises(ValueError, match="group_size=70 exceeds"):
        _classifier(group_size=70).fit(data.points, data.target)


class _HalfBackbone(torch.nn.Module):
    def group(self, points):
        pass

    def embed(self, neighbourhoods):
        pass

    def pos(self, centers):
        pass


def test_backbone_missing_the_protocol_is_refused(data):
    with pytest.raises(ValueError, match="implementing 'group', 'embed' and 'pos'"):
        _classifier(pretrained=torch.nn.Linear(3, 3)).fit(data.points, data.target)
    with pytest.raises(TypeError, match=r"lacks \['blocks', 'norm', 'trans_dim'"):
        _classifier(pretrained=_HalfBackbone()).fit(data.points, data.target)


def test_official_point_mae_checkpoint_loads(tmp_path, data):
    # The layout of Point-MAE's pretrain.pth: weights under base_model, the
    # encoder under MAE_encoder. with blocks.blocks.i, decoder keys beside it.
    source = _backbone(seed=3)
    state = {}
    for key, value in source.state_dict().items():
        key = key.replace("blocks.", "blocks.blocks.", 1) if key.startswith("blocks.") else key
        state[f"module.MAE_encoder.{key}"] = value
    state["module.mask_token"] = torch.zeros(1, 1, 16)
    state["module.MAE_decoder.blocks.blocks.0.norm1.weight"] = torch.ones(16)
    path = tmp_path / "pretrain.pth"
    torch.save({"base_model": state, "epoch": 300}, path)
    assert set(official_state_dict({"base_model": state})) == set(source.state_dict())
    model = _classifier(pretrained=str(path), max_epochs=1).fit(data.points, data.target)
    for key, value in source.state_dict().items():
        torch.testing.assert_close(model.module_.backbone.state_dict()[key], value)


def test_a_file_without_a_backbone_is_refused(tmp_path, data):
    path = tmp_path / "other.pt"
    torch.save({"weight": torch.ones(3)}, path)
    with pytest.raises(ValueError, match="holds no Point-MAE backbone"):
        _classifier(pretrained=str(path)).fit(data.points, data.target)


def test_pretrainer_backbone_round_trips_into_the_classifier(tmp_path, data):
    mae = PointMAEPretrainer(trans_dim=16, depth=2, num_heads=2, n_points=64, n_groups=16, group_size=8,
                             decoder_depth=1, decoder_heads=2, max_epochs=2, batch_size=16, random_state=0,
                             device="cpu").fit(data.points)
    assert len(mae.history_["train_loss"]) == 2
    assert mae.transform(data.points).shape == (48, 32)
    assert mae.reconstruction_loss(data.points) > 0
    path = tmp_path / "backbone.pt"
    mae.save_backbone(path, provenance={"note": "test"})
    model = _classifier(pretrained=str(path), max_epochs=1).fit(data.points, data.target)
    assert _digest(model.module_.backbone) == _digest(mae.backbone_)
    assert model.provenance_["note"] == "test"


@pytest.mark.parametrize("kind", ["y", "so3"])
def test_rotations_are_proper(kind):
    points = torch.randn(5, 10, 3, dtype=torch.float64)
    rotated = rotate_clouds(points, kind, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(rotated.norm(dim=-1), points.norm(dim=-1))
    rotation = torch.linalg.lstsq(points, rotated).solution
    torch.testing.assert_close(torch.det(rotation), torch.ones(5, dtype=torch.float64))
    if kind == "y":
        torch.testing.assert_close(rotated[..., 1], points[..., 1])


def test_a_validation_split_too_small_for_the_classes_is_skipped_with_a_warning(data):
    with pytest.warns(UserWarning, match="cannot hold every one of the 3 classes"):
        model = _classifier(max_epochs=1, validation_fraction=0.02).fit(data.points, data.target)
    assert model.history_["valid_loss"].isna().all()


def test_clouds_of_one_repeated_point_are_warned_about(fitted):
    clouds = np.zeros((2, 64, 3), dtype=np.float32)
    clouds[1] = np.random.default_rng(0).normal(size=(64, 3))
    with pytest.warns(UserWarning, match="1 of 2 clouds .* have all their points at one position"):
        proba = fitted.predict_proba(clouds)
    assert np.isfinite(proba).all()


def test_nan_coordinates_are_refused_naming_the_cloud(data, fitted):
    clouds = data.points[:4].copy()
    clouds[2, 5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fitted.predict(clouds)
    with pytest.raises(ValueError, match="NaN"):
        _classifier().fit(clouds, data.target[:4])


def test_clouds_smaller_than_a_group_are_refused(data, fitted):
    clouds = [data.points[0], data.points[1][:5]]
    with pytest.raises(ValueError, match=r"fewer points than group_size=8 \(the first, at index 1, has 5\)"):
        fitted.predict(clouds)
    with pytest.raises(ValueError, match=r"2 cloud\(s\) have fewer points than group_size=8"):
        fitted.predict(data.points[:2, :6])


@pytest.mark.parametrize("X", [np.zeros(12), np.zeros((2, 3, 4, 3))], ids=["1-d", "4-d"])
def test_input_of_another_rank_names_the_expected_shapes(fitted, X):
    with pytest.raises(ValueError, match="expected point clouds|Reshape|reshape"):
        fitted.predict(X)


def test_a_wrong_last_dimension_is_refused(data, fitted):
    with pytest.raises(ValueError, match="3"):
        fitted.predict(data.points[:2, :, :2])


def test_weight_decay_spares_biases_norms_and_tokens_as_the_official_code():
    network = GAPromptNetwork(_backbone(), 3)
    parameters = dict(network.named_parameters())
    exempt = {name for name, p in parameters.items() if exempt_from_weight_decay(name, p)}
    assert "cls_token" in exempt and "backbone.norm.weight" in exempt
    assert {name for name in parameters if name.endswith(".bias")} <= exempt
    assert not exempt & {"prompt_embeddings", "point_prompt", "cls_pos"}
    assert all(parameters[name].ndim == 1 for name in exempt - {"cls_token"})


# ------------------------------------------------------------------ issue 64
@pytest.mark.parametrize("n_clouds, batch_size, validation_fraction", [
    (17, 16, None),   # a last batch of one cloud
    (1, 16, None),    # one cloud in all
    (108, 32, 0.1),   # 97 training clouds after the split: 3 x 32 + 1
])
def test_a_training_batch_of_one_cloud_trains(n_clouds, batch_size, validation_fraction):
    # Batch norm cannot take statistics of one cloud in training; that batch normalises with running statistics.
    data = make_point_clouds(max(n_clouds, 2), n_points=64, classes=["sphere", "cube"], random_state=0)
    X, y = data.points[:n_clouds], data.target[:n_clouds]
    model = _classifier(max_epochs=1, batch_size=batch_size, validation_fraction=validation_fraction).fit(X, y)
    assert np.isfinite(model.history_["train_loss"]).all()
    assert model.predict_proba(X[:2]).shape == (len(X[:2]), len(np.unique(y)))


def test_batch_norm_of_a_lone_cloud_keeps_its_statistics_and_mode(data):
    from skicml.pointcloud._classifier import Augmented

    model = _classifier(max_epochs=1)
    network = Augmented(GAPromptNetwork(_backbone(), 3, head_hidden=16, n_token_prompts=4), None).train()
    norms = [m for m in network.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    modes = [m.training for m in norms]
    before = [m.running_mean.clone() for m in norms]
    clouds = torch.as_tensor(model._clouds(data.points[:1], reset=True))
    assert network(clouds).shape == (1, 3)
    assert [m.training for m in norms] == modes
    for norm, mean in zip(norms, before):
        torch.testing.assert_close(norm.running_mean, mean)


def test_save_backbone_refuses_a_missing_directory(tmp_path, data):
    mae = PointMAEPretrainer(trans_dim=16, depth=2, num_heads=2, n_points=64, n_groups=16, group_size=8,
                             decoder_depth=1, decoder_heads=2, max_epochs=1, batch_size=16, random_state=0,
                             device="cpu").fit(data.points[:16])
    with pytest.raises(FileNotFoundError, match="directory .*typo.* does not exist"):
        mae.save_backbone(tmp_path / "typo" / "backbone.pt")
    assert not (tmp_path / "typo").exists()
