"""VideoWorldModel's mechanics: conditioning re-imposed, EMA, shapes, determinism, a falling loss, clear errors."""

import pickle

import numpy as np
import pytest
import torch

from skicml.datasets import make_physics_videos
from skicml.video import VideoWorldModel
from skicml.video._physics._model import _MIN_REMAINING_TIME, VideoDiT, flow_times
from skicml.video._physics._world_model import _WeightAverage

TINY = dict(patch_size=4, d_model=16, depth=1, n_heads=2, n_sampling_steps=3, batch_size=16, device="cpu")


@pytest.fixture(scope="module")
def clips():
    videos = make_physics_videos("uniform", 24, resolution=16, n_frames=6, min_frames_in_view=6,
                                 random_state=0).videos
    return videos[:, :3], videos[:, 3:]


@pytest.fixture(scope="module")
def fitted(clips):
    X, y = clips
    return VideoWorldModel(**TINY, max_epochs=3, random_state=0).fit(X, y)


def test_shapes_and_dtypes_follow_y(fitted, clips):
    X, y = clips
    assert fitted.predict(X[:4]).shape == (4, 3, 16, 16, 3) and fitted.predict(X[:4]).dtype == np.uint8
    assert fitted.sample(X[:2], n_samples=2).shape == (2, 2, 3, 16, 16, 3)
    assert (fitted.frame_shape_, fitted.n_cond_frames_, fitted.n_future_frames_) == ((16, 16, 3), 3, 3)
    float_model = VideoWorldModel(**TINY, max_epochs=1, random_state=0).fit(X / 255.0, y / 255.0)
    predicted = float_model.predict(X[:2] / 255.0)
    assert predicted.dtype == np.float64 and 0 <= predicted.min() and predicted.max() <= 1


def test_conditioning_frames_are_reimposed_exactly(fitted, clips):
    X, _ = clips
    full = fitted.predict(X[:5], return_full=True)
    assert full.shape == (5, 6, 16, 16, 3)
    np.testing.assert_array_equal(full[:, :3], X[:5])
    np.testing.assert_array_equal(full[:, 3:], fitted.predict(X[:5]))
    # In the network too, with any noise and either sampler.
    net = fitted.ema_module_
    cond = torch.rand(2, 3, 3, 16, 16) * 2 - 1
    for sampler in ("euler", "heun"):
        out = net.sample(cond, torch.randn(2, 6, 3, 16, 16), n_steps=2, sampler=sampler)
        assert torch.equal(out[:, :3], cond)


def test_exponential_moving_average_formula():
    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        net.weight.fill_(0.0)
        net.bias.fill_(0.0)
    average = _WeightAverage(net, decay=0.9)
    expected = 0.0
    for n, value in enumerate([1.0, 2.0, 3.0, 4.0, 5.0], start=1):
        with torch.no_grad():
            net.weight.fill_(value)
            net.bias.fill_(value)
        average.update(net)
        decay = min(0.9, (1 + n) / (10 + n))
        expected = decay * expected + (1 - decay) * value
        assert average.averages()[0].flatten()[0].item() == pytest.approx(expected, rel=1e-6)
    copy = torch.nn.Linear(2, 1)
    average.copy_to(copy)
    assert copy.bias.item() == pytest.approx(expected, rel=1e-6)


def test_ema_module_differs_from_the_final_weights_and_can_be_turned_off(fitted, clips):
    X, y = clips
    final = dict(fitted.module_.named_parameters())
    averaged = dict(fitted.ema_module_.named_parameters())
    assert any(not torch.equal(final[k], averaged[k]) for k in final)
    plain = VideoWorldModel(**TINY, max_epochs=1, ema_decay=None, random_state=0).fit(X, y)
    assert plain.ema_module_ is None and plain.predict(X[:2]).shape == (2, 3, 16, 16, 3)


def test_determinism_with_random_state_and_pickle(fitted, clips):
    X, y = clips
    again = VideoWorldModel(**TINY, max_epochs=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(again.predict(X[:4]), fitted.predict(X[:4]))
    other = VideoWorldModel(**TINY, max_epochs=3, random_state=1).fit(X, y)
    assert not np.array_equal(other.predict(X[:4]), fitted.predict(X[:4]))
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict(X[:4]), fitted.predict(X[:4]))
    # A clip's prediction does not depend on its batch; draws differ from each other.
    np.testing.assert_array_equal(fitted.predict(X[2:3]), fitted.predict(X[:4])[2:3])
    draws = fitted.sample(X[:2], n_samples=2)
    np.testing.assert_array_equal(draws[:, 0], fitted.predict(X[:2]))
    assert not np.array_equal(draws[:, 0], draws[:, 1])
    assert not np.array_equal(fitted.sample(X[:2], random_state=5)[:, 0], draws[:, 0])


def test_the_loss_falls(clips):
    X, y = clips
    settings = dict(TINY, d_model=32, lr=3e-3, random_state=0)
    untrained = VideoWorldModel(**settings, max_epochs=0).fit(X, y).module_
    trained = VideoWorldModel(**settings, max_epochs=25).fit(X, y).module_
    frames = torch.as_tensor(np.concatenate([X, y], axis=1)).permute(0, 1, 4, 2, 3).float() / 127.5 - 1

    def loss(network):  # over the same draws of times and noise (an epoch's loss is too noisy to compare)
        torch.manual_seed(1)
        with torch.no_grad():
            return np.mean([network.loss(frames, 3).item() for _ in range(10)])

    assert loss(trained) < 0.75 * loss(untrained)


def test_flattened_rows_equal_the_5d_path(clips):
    X, y = clips
    full = VideoWorldModel(**TINY, max_epochs=1, random_state=0).fit(X, y)
    flat = VideoWorldModel(**TINY, max_epochs=1, frame_shape=(16, 16, 3), random_state=0)
    flat.fit(X.reshape(len(X), -1), y.reshape(len(y), -1))
    # Flattened uint8 targets become float rows of [0, 255]: the same frames before rounding.
    rows = flat.predict(X[:3].reshape(3, -1))
    np.testing.assert_array_equal(np.rint(rows).reshape(3, 3, 16, 16, 3), full.predict(X[:3]))


def test_generic_rows_are_one_frame_of_features():
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(20, 5)), rng.normal(size=(20, 7))
    model = VideoWorldModel(d_model=8, depth=1, n_heads=2, max_epochs=1, n_sampling_steps=2, random_state=0)
    model.fit(X, y)
    assert (model.frame_shape_, model.n_cond_frames_, model.n_future_frames_) == ((1, 1, 5), 1, 2)
    assert model.predict(X).shape == (20, 7) and model.predict(X, return_full=True).shape == (20, 12)
    assert model.fit(X, y[:, 0]).predict(X).shape == (20,)


def test_network_checks_its_sizes():
    with pytest.raises(ValueError, match="patch_size"):
        VideoDiT(4, frame_size=(10, 10), patch_size=4)
    net = VideoDiT(4, frame_size=(8, 8), dim=16, depth=1, n_heads=2)
    with pytest.raises(ValueError, match="built for"):
        net(torch.zeros(1, 5, 3, 8, 8), 2, torch.zeros(1))


def test_bad_inputs(fitted, clips):
    X, y = clips
    with pytest.raises(ValueError, match="fitted on"):
        fitted.predict(X[:, :2])
    with pytest.raises(ValueError, match="fitted on"):
        fitted.predict(np.zeros((2, 3, 8, 8, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="patch_size"):
        VideoWorldModel(patch_size=5).fit(X, y)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        VideoWorldModel(**TINY).fit(X.astype(float) * 2, y)
    with pytest.raises(ValueError, match="empty"):
        VideoWorldModel(**TINY).fit(X[:0], y[:0])
    with pytest.raises(ValueError, match="3 clips but y has 2"):
        VideoWorldModel(**TINY).fit(X[:3], y[:2])
    with pytest.raises(ValueError, match="d_model=18"):
        VideoWorldModel(d_model=18, n_heads=4).fit(X, y)
    with pytest.raises(ValueError, match="n_samples"):
        fitted.sample(X[:2], n_samples=0)
    with pytest.raises(ValueError, match="requires y"):
        VideoWorldModel().fit(X, None)
    with pytest.raises(ValueError, match="time_sampling"):
        VideoWorldModel(**TINY, time_sampling="cosine").fit(X, y)


def test_logit_normal_times_weigh_the_noisy_frames():
    # x-prediction's velocity loss weighs a clean-frame error by (1 - t)^-2: under uniform
    # times nearly all of it sits on nearly clean frames, where the motion needs no reading.
    def share_below_half(times):
        weight = 1 / (1 - times).clamp(min=_MIN_REMAINING_TIME) ** 2
        return float(weight[times < 0.5].sum() / weight.sum())

    torch.manual_seed(0)
    logit_normal, uniform = flow_times(20_000), flow_times(20_000, "uniform")
    assert share_below_half(uniform) < 0.05 and share_below_half(logit_normal) > 0.5
    assert 0 < float(logit_normal.min()) and float(logit_normal.max()) < 1
    with pytest.raises(ValueError, match="time_sampling"):
        flow_times(3, "cosine")


def test_recipe_resumes_to_the_same_weights(tmp_path, capsys):
    from skicml._weights import load_weights
    from skicml.video._physics._pretrain import main

    tiny = ["--n-videos", "20", "--steps", "3", "--n-frames", "5", "--d-model", "16", "--depth", "1",
            "--n-heads", "2", "--batch-size", "8", "--n-eval", "1", "--sampling-steps", "1", "--eval-every", "2",
            "--threads", "1", "--quiet"]
    whole, resumed, checkpoint = tmp_path / "whole.pt", tmp_path / "resumed.pt", str(tmp_path / "run.ckpt")
    assert main(tiny + ["--export", str(whole)]) == 0
    # --max-minutes 0 stops after the first step; the same command resumes.
    assert main(tiny + ["--checkpoint", checkpoint, "--max-minutes", "0", "--export", str(resumed)]) == 0
    assert "stopped at step 1 of 3" in capsys.readouterr().out and not resumed.exists()
    assert main(tiny + ["--checkpoint", checkpoint, "--export", str(resumed)]) == 0
    first, second = load_weights(str(whole)), load_weights(str(resumed))
    assert first["state_dict"].keys() == second["state_dict"].keys()
    for name, tensor in first["state_dict"].items():
        assert torch.equal(tensor, second["state_dict"][name]), name
    provenance = second["provenance"]
    assert provenance["recipe"].startswith("skicml pretrain physics-world-model")
    assert set(provenance["metrics"]) == {f"vel_error_{b}" for b in ("id", "r_out", "v_out", "rv_out", "zero")}
    assert "slope" in provenance["speed_following_id"]


def test_pretrained_file_round_trip(fitted, clips, tmp_path):
    from skicml._weights import save_module

    X, y = clips
    path = str(tmp_path / "world_model.pt")
    save_module(path, fitted.ema_module_, fitted.ema_module_.config, {"weights": "a test"})
    loaded = VideoWorldModel(**TINY, pretrained=path, max_epochs=0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(loaded.predict(X[:3]), fitted.predict(X[:3]))
    with pytest.raises(ValueError, match="pretrained=.*4 frames"):
        VideoWorldModel(pretrained=path, max_epochs=0).fit(X[:, :2], y[:, :2])


# ------------------------------------------------------------------ issue 64
@pytest.mark.parametrize("reshape", [lambda X: X[:, 0], lambda X: X[..., None], lambda X: X[:, :, :, :, 0]])
def test_clips_of_another_rank_are_named_with_the_expected_shape(clips, reshape):
    X, y = clips
    bad = reshape(X)
    with pytest.raises(ValueError, match=rf"X has shape {tuple(bad.shape)}".replace("(", r"\(").replace(")", r"\)")
                       + r".*\(n_videos, n_frames, H, W, 3\)") as info:
        VideoWorldModel(**TINY, max_epochs=1).fit(bad, y)
    assert "dim <= 2" not in str(info.value)


def test_future_frames_of_another_size_than_the_clips_are_named(clips):
    X, y = clips
    with pytest.raises(ValueError, match=r"y has frames of shape \(8, 8, 3\).*X's \(16, 16, 3\)"):
        VideoWorldModel(**TINY, max_epochs=1).fit(X, y[:, :, ::2, ::2])
