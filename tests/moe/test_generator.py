import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits

from skicml.moe import RaceDiTGenerator

DIGITS = load_digits()


def _generator(**kwargs):
    params = dict(hidden_dim=16, depth=1, n_heads=2, n_experts=4, top_k=2, max_epochs=2, batch_size=64,
                  n_timesteps=50, random_state=0, device="cpu") | kwargs
    return RaceDiTGenerator(**params)


@pytest.fixture(scope="module")
def trained():
    """A small conditional model after about 300 steps on 1,000 digits."""
    model = _generator(hidden_dim=32, depth=2, max_epochs=20, lr=2e-3)
    return model.fit(DIGITS.images[:1000], DIGITS.target[:1000])


def test_same_seed_same_model_and_samples():
    first = _generator().fit(DIGITS.images[:128], DIGITS.target[:128])
    second = _generator().fit(DIGITS.images[:128], DIGITS.target[:128])
    np.testing.assert_array_equal(first.sample(4, y=3, random_state=0), second.sample(4, y=3, random_state=0))
    np.testing.assert_array_equal(first.thresholds_, second.thresholds_)
    assert not np.array_equal(first.sample(4, y=3, random_state=0), first.sample(4, y=3, random_state=1))


def test_held_out_digits_score_above_noise_and_training_lowered_the_loss(trained):
    held_out = DIGITS.images[1000:1200]
    noise = np.random.RandomState(0).uniform(0, 16, held_out.shape)
    assert trained.score(held_out) > trained.score(noise) + 0.05
    assert trained.loss_curve_[-1] < 0.8 * trained.loss_curve_[0]
    assert set(trained.aux_loss_curve_) == {"denoise", "sim", "balance", "plr"}
    assert len(trained.aux_loss_curve_["denoise"]) == trained.n_iter_ == 20


def test_inference_spends_about_the_trained_budget(trained):
    report = trained.routing_report(DIGITS.images[1000:1100], DIGITS.target[1000:1100])
    assert list(report.columns[:4]) == ["layer", "timestep", "expert", "load"]
    assert len(report) == 2 * 5 * 4
    per_token = report.groupby(["layer", "timestep"])["experts_per_token_mean"].first()
    assert 1.0 <= per_token.mean() <= 3.0  # k = 2 in training; the learned thresholds decide at inference
    assert np.all(np.isfinite(trained.thresholds_)) and trained.expert_load_.shape == (2, 4)


def test_samples_keep_the_layout_and_range_of_the_training_data(trained):
    samples = trained.sample(5, y=[0, 1, 2, 3, 4], guidance_scale=2.0, n_steps=10, random_state=0)
    assert samples.shape == (5, 8, 8) and samples.min() >= 0 and samples.max() <= 16
    flat = _generator(image_shape=(8, 8)).fit(DIGITS.data[:64])
    assert flat.sample(2, random_state=0).shape == (2, 64) and not hasattr(flat, "classes_")
    channels = _generator().fit(np.repeat(DIGITS.images[:64, None], 3, axis=1), DIGITS.target[:64])
    assert channels.image_shape_ == (3, 8, 8) and channels.sample(2, random_state=0).shape == (2, 3, 8, 8)
    strip = _generator().fit(np.random.RandomState(0).rand(32, 6))
    assert strip.image_shape_ == (1, 1, 6) and strip.patch_size_ == 1


def test_pickle_keeps_thresholds_and_samples(trained):
    again = pickle.loads(pickle.dumps(trained))
    np.testing.assert_array_equal(again.thresholds_, trained.thresholds_)
    np.testing.assert_array_equal(again.sample(3, y=7, random_state=0), trained.sample(3, y=7, random_state=0))


@pytest.mark.parametrize("routing", ["token_choice", "expert_choice"])
def test_the_baselines_and_the_dense_model_fit(routing):
    model = _generator(routing=routing, gating="softmax", balance_loss_weight=0.01).fit(DIGITS.images[:64])
    assert np.all(np.isnan(model.thresholds_))
    assert model.sample(2, random_state=0).shape == (2, 8, 8)
    dense = _generator(n_experts=0).fit(DIGITS.images[:64])
    assert dense.expert_load_.size == 0 and dense.thresholds_.size == 0


@pytest.mark.parametrize("routing, groups", [("bl_choice", 4), ("be_choice", 16), ("le_choice", 0)])
def test_the_routings_of_the_papers_table_fit_sample_and_save(routing, groups, tmp_path):
    model = _generator(routing=routing, ema_decay=0.5).fit(DIGITS.images[:128], DIGITS.target[:128])
    if groups:  # BL: one threshold per expert; BE: one per position (16 tokens of 2x2 patches of 8x8 digits)
        assert model.thresholds_.shape == (1, groups) and np.isfinite(model.thresholds_).all()
    else:
        assert np.isnan(model.thresholds_).all()
    samples = model.sample(3, y=[0, 1, 2], random_state=0)
    model.save(tmp_path / "m.pt")
    loaded = RaceDiTGenerator(pretrained=tmp_path / "m.pt", max_epochs=0, device="cpu")
    loaded.fit(DIGITS.images[:128], DIGITS.target[:128])
    np.testing.assert_array_equal(loaded.sample(3, y=[0, 1, 2], random_state=0), samples)


def test_constant_images_are_learned_without_dividing_by_zero():
    model = _generator().fit(np.full((32, 4, 4), 3.0))
    np.testing.assert_allclose(model.sample(2, random_state=0), 3.0)


def test_bad_input_gets_a_clear_error(trained):
    images = DIGITS.images[:32].copy()
    images[3, 2, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _generator().fit(images)
    with pytest.raises(ValueError, match="do not split into patch_size=2"):
        _generator().fit(np.zeros((8, 7, 7)))
    with pytest.raises(ValueError, match="does not hold the 64 features"):
        _generator(image_shape=(7, 7)).fit(DIGITS.data[:8])
    with pytest.raises(ValueError, match="not seen in fit"):
        trained.sample(2, y=[1, 12])
    with pytest.raises(ValueError, match="2 labels for n_samples=3"):
        trained.sample(3, y=[1, 2])
    with pytest.raises(ValueError, match="fitted on images of shape"):
        trained.score_samples(np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="exceeds n_experts"):
        _generator(top_k=5).fit(DIGITS.images[:8])
    with pytest.raises(ValueError, match="floor"):
        _generator(routing="expert_choice", n_experts=4, top_k=0.5).fit(np.zeros((8, 4, 4)))
    with pytest.raises(ValueError, match="without labels"):
        _generator().fit(DIGITS.images[:16]).sample(1, y=1)


def test_weight_average_follows_its_formula():
    import torch

    from skicml.moe._generator import _WeightAverage

    model = torch.nn.Linear(3, 2)
    average = _WeightAverage(model, decay=0.9)
    expected = [p.detach().clone() for p in model.parameters()]
    for n in range(1, 30):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        average.update(model)
        decay = min(0.9, (1 + n) / (10 + n))
        expected = [decay * e + (1 - decay) * p.detach() for e, p in zip(expected, model.parameters())]
    for got, want in zip(average.averages(), expected):
        torch.testing.assert_close(got, want)
    average.copy_to(model)
    torch.testing.assert_close(model.weight, expected[0])


def test_ema_of_decay_zero_is_the_final_weights_and_thresholds_are_measured_again():
    import torch

    plain = _generator().fit(DIGITS.images[:256], DIGITS.target[:256])
    averaged = _generator(ema_decay=0.0).fit(DIGITS.images[:256], DIGITS.target[:256])
    for name, value in plain.module_.named_parameters():  # the last step's weights are in the average
        torch.testing.assert_close(dict(averaged.module_.named_parameters())[name], value, rtol=0, atol=0)
    assert np.isfinite(averaged.thresholds_).all()
    assert not np.array_equal(averaged.thresholds_, plain.thresholds_)


def test_averaged_weights_differ_and_their_thresholds_spend_about_k():
    model = _generator(ema_decay=0.9, max_epochs=6).fit(DIGITS.images[:512], DIGITS.target[:512])
    plain = _generator(max_epochs=6).fit(DIGITS.images[:512], DIGITS.target[:512])
    assert not np.allclose(model.module_.final_layer.linear.weight.detach().numpy(),
                           plain.module_.final_layer.linear.weight.detach().numpy())
    report = model.routing_report(DIGITS.images[:512], DIGITS.target[:512], t=np.arange(0, 50, 5))
    per_token = report.drop_duplicates(["layer", "timestep"])["experts_per_token_mean"].mean()
    assert 1.6 <= per_token <= 2.4  # k = 2: the thresholds were measured on the averaged model


def test_experts_per_token_maps_the_routing_report(trained):
    held_out, labels = DIGITS.images[1000:1040], DIGITS.target[1000:1040]
    counts = trained.experts_per_token(held_out, labels, t=40)
    assert counts.shape == (40, 2, 4, 4) and counts.dtype == np.int64
    assert counts.min() >= 0 and counts.max() <= 4
    report = trained.routing_report(held_out, labels, t=40)
    means = report.drop_duplicates("layer")["experts_per_token_mean"].to_numpy()
    np.testing.assert_allclose(counts.reshape(40, 2, -1).mean(axis=(0, 2)), means)
    with pytest.raises(ValueError, match="one timestep"):
        trained.experts_per_token(held_out, labels, t=[1, 2])
    with pytest.raises(ValueError, match=r"t must lie in \[0, 49\]"):
        trained.experts_per_token(held_out, labels, t=50)
    dense = _generator(n_experts=0).fit(DIGITS.images[:64], DIGITS.target[:64])
    assert dense.experts_per_token(held_out, labels).shape == (40, 0, 4, 4)


def test_sampling_arguments_are_checked(trained):
    for bad in (float("nan"), float("inf"), "3", None):
        with pytest.raises(ValueError, match="guidance_scale"):
            trained.sample(2, y=1, guidance_scale=bad)
    for bad in (0, 51, 2.5, True):
        with pytest.raises(ValueError, match="n_steps"):
            trained.sample(2, y=1, n_steps=bad)


def test_image_shape_that_disagrees_with_3d_or_4d_images_is_refused():
    with pytest.raises(ValueError, match=r"image_shape=\(3, 3\) does not match"):
        _generator(image_shape=(3, 3)).fit(DIGITS.images[:8], DIGITS.target[:8])
    with pytest.raises(ValueError, match="image_shape"):
        _generator(image_shape=(1, 4, 4)).fit(DIGITS.images[:8, None])
    # A shape that agrees is accepted.
    _generator(image_shape=(8, 8), max_epochs=1).fit(DIGITS.images[:8], DIGITS.target[:8])


def test_a_saved_model_loads_as_pretrained_and_samples_the_same(trained, tmp_path):
    path = tmp_path / "race.pt"
    trained.save(path)
    loaded = RaceDiTGenerator(pretrained=str(path), max_epochs=0, random_state=0, device="cpu")
    loaded.fit(DIGITS.images[:64], DIGITS.target[:64])
    assert loaded.n_iter_ == 0 and loaded.patch_size_ == trained.patch_size_
    np.testing.assert_allclose(loaded.sample(4, y=[0, 1, 2, 3], random_state=0),
                               trained.sample(4, y=[0, 1, 2, 3], random_state=0), atol=1e-5)
    np.testing.assert_array_equal(loaded.thresholds_, trained.thresholds_)
    # Fine-tuning continues from the file: a short run moves the weights but keeps the architecture.
    tuned = RaceDiTGenerator(pretrained=str(path), max_epochs=1, lr=1e-4, random_state=0, device="cpu")
    tuned.fit(DIGITS.images[:128], DIGITS.target[:128])
    assert tuned.n_iter_ == 1 and tuned.module_.config == trained.module_.config
    with pytest.raises(FileNotFoundError, match="folder"):
        trained.save(tmp_path / "missing" / "race.pt")


def test_pretrained_files_that_do_not_fit_the_data_are_refused(trained, tmp_path):
    path = str(tmp_path / "race.pt")
    trained.save(path)
    with pytest.raises(ValueError, match=r"generates images of shape \(C, H, W\) = \(1, 8, 8\)"):
        RaceDiTGenerator(pretrained=path, max_epochs=0).fit(np.zeros((8, 4, 4)), np.arange(8) % 10)
    with pytest.raises(ValueError, match="network for 10 classes; fit got 3"):
        RaceDiTGenerator(pretrained=path, max_epochs=0).fit(DIGITS.images[:30], DIGITS.target[:30] % 3)
    with pytest.raises(ValueError, match="Pass y with 10 classes"):
        RaceDiTGenerator(pretrained=path, max_epochs=0).fit(DIGITS.images[:30])


def test_the_shipped_model_samples_recognisable_digits():
    from skicml.moe import sample_quality

    model = RaceDiTGenerator(pretrained="race-dit-digits", max_epochs=0, random_state=0, device="cpu")
    model.fit(DIGITS.images[:100], DIGITS.target[:100])
    wanted = np.repeat(np.arange(10), 3)
    samples = model.sample(len(wanted), y=wanted, guidance_scale=3.0, n_steps=25, random_state=0)
    assert sample_quality(samples, wanted, DIGITS.images, DIGITS.target)["classifier_accuracy"] >= 0.6
    assert model.provenance_["sha256"]
