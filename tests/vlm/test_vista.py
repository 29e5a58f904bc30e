"""VISTA's mechanics on a random TinyVLM (spec section 6): identities, hooks, batching, errors.

Whether VISTA lowers hallucination is a measurement of the trained model
(benchmarks/bench_vlm_vista.py), not a test.
"""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.model_selection import GridSearchCV

from skicml.base import seeded
from skicml.datasets import make_object_scenes
from skicml.vlm import VISTA_PRESETS, TinyVLM, VISTASteerer, VisualSteeringVector, as_backbone, scene_vocabulary
from skicml.vlm._vista._steerer import _loops
from skicml.vlm._vista._steering import capture_last_states, self_logits, steering_vectors


@pytest.fixture(scope="module")
def model():
    with seeded(0):
        net = TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=4, head_dim=16).eval()
    # Random weights are near zero; scale the head so that steering can change what is decoded.
    with torch.no_grad():
        net.lm_head.weight.mul_(20)
    return net


@pytest.fixture(scope="module")
def scenes():
    images, _, objects = make_object_scenes(6, random_state=0)
    return images, objects.groupby("scene")["name"].apply(set).tolist()


def steerer(model, **params):
    return VISTASteerer(backbone=model, **{"max_new_tokens": 8, "sla_window": 2, "random_state": 0, **params})


def n_hooks(model):
    return sum(len(m._forward_hooks) for m in model.modules())


@pytest.mark.parametrize("decoding", ["greedy", "beam", "nucleus"])
def test_zero_strength_is_plain_decoding_token_for_token(model, scenes, decoding):
    images, _ = scenes
    plain = steerer(model, vsv=False, sla=False, decoding=decoding, num_beams=3).fit().predict(images)
    zero = steerer(model, vsv_lambda=0.0, sla_gamma=0.0, decoding=decoding, num_beams=3).fit().predict(images)
    assert list(plain) == list(zero)


@pytest.mark.parametrize("site", ["mlp_output", "residual"])
def test_steering_changes_captions_and_leaves_no_hook_behind(model, scenes, site):
    images, _ = scenes
    keys = list(model.state_dict())
    before = n_hooks(model)
    plain = steerer(model, vsv=False, sla=False).fit().predict(images)
    steered = steerer(model, vsv_lambda=2.0, vsv_site=site, sla=False).fit().predict(images)
    assert list(plain) != list(steered)
    assert n_hooks(model) == before == 0
    assert list(model.state_dict()) == keys


def test_hooks_are_removed_when_generation_raises(model, scenes, monkeypatch):
    images, _ = scenes
    fitted = steerer(model).fit()

    def broken(token_ids, state):
        raise RuntimeError("decoding failed")

    monkeypatch.setattr(fitted.backbone_, "step", broken)
    with pytest.raises(RuntimeError, match="decoding failed"):
        fitted.predict(images)
    assert n_hooks(model) == 0


def test_a_sample_does_not_depend_on_its_batch(model, scenes):
    images, _ = scenes
    fitted = steerer(model, vsv_lambda=0.5, batch_size=6).fit()
    together = fitted.predict(images)
    alone = [fitted.predict(images[i:i + 1])[0] for i in (0, 3, 5)]
    assert alone == [together[0], together[3], together[5]]
    vectors = VisualSteeringVector(backbone=model, flatten=False, batch_size=6).fit(images)
    torch.testing.assert_close(vectors.transform(images[[4, 1]]), vectors.transform(images)[[4, 1]],
                               rtol=1e-5, atol=1e-5)


def test_one_beam_equals_greedy_with_per_sample_steering(model, scenes):
    images, _ = scenes
    greedy = steerer(model, vsv_lambda=0.5).fit().predict(images)
    beam = steerer(model, vsv_lambda=0.5, decoding="beam", num_beams=1).fit().predict(images)
    assert list(greedy) == list(beam)
    wide = steerer(model, vsv_lambda=0.5, decoding="beam", num_beams=3).fit().predict(images)
    assert wide.shape == (6,)


def test_the_vector_of_a_pair_that_differs_in_nothing_is_zero(model, scenes):
    images, _ = scenes
    backbone = as_backbone(model)
    real = backbone.build_inputs
    backbone.build_inputs = lambda images, prompts, with_image=True: real(images, prompts, with_image=True)
    vectors = steering_vectors(backbone, images[:2], "describe the image in detail :", [0, 1, 2, 3])
    assert torch.count_nonzero(vectors) == 0
    backbone.build_inputs = real
    assert torch.count_nonzero(steering_vectors(backbone, images[:2], "describe :", [0, 3])) > 0


@pytest.mark.parametrize("final_norm", [False, True])
def test_self_logits_are_one_matmul_of_the_mean_logit_lens(model, scenes, final_norm):
    images, _ = scenes
    backbone = as_backbone(model)
    layers, gamma = [1, 2], 0.3
    with torch.no_grad(), capture_last_states(backbone, layers) as states:
        hidden, _ = backbone.prefill(backbone.build_inputs(images, "describe :"))
        fused = self_logits(backbone, states, layers, gamma, final_norm)(hidden)
        lens = [backbone.lm_head(backbone.final_norm(states[i]) if final_norm else states[i]) for i in layers]
        naive = (1 - gamma) * backbone.lm_head(hidden) + gamma * torch.stack(lens).mean(0)
        plain = self_logits(backbone, states, layers, 0.0, final_norm)(hidden)
    torch.testing.assert_close(fused, naive, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain, backbone.lm_head(hidden))


def test_sla_layers_follow_the_official_inclusive_convention(model):
    assert steerer(model, sla_layers=(1, 2)).fit().sla_layers_ == [1, 2]
    assert steerer(model, sla_window=2).fit().sla_layers_ == [1, 2]  # the two below the last of 4
    assert steerer(model, sla_window=3).fit().sla_layers_ == [0, 1, 2]


def test_a_window_deeper_than_the_backbone_is_refused_at_fit(model):
    # Issue 64: sla_window=10 on a shallow backbone was clipped without a word.
    with pytest.raises(ValueError, match=r"sla_window=9.*4 decoder layers.*at most 3"):
        steerer(model, sla_window=9).fit()
    with pytest.raises(ValueError, match=r"sla_window=4.*4 decoder layers"):
        steerer(model, sla_window=4).fit()
    # Not used, not refused: no self-logits, or an explicit range.
    assert steerer(model, sla_window=9, sla=False).fit().sla_layers_ == [0, 1, 2]
    assert steerer(model, sla_window=9, sla_layers=(1, 2)).fit().sla_layers_ == [1, 2]


def test_fitted_mode_amortises_one_vector(model, scenes):
    images, _ = scenes
    single = VisualSteeringVector(backbone=model, mode="fitted", flatten=False).fit(images[:1])
    per_sample = VisualSteeringVector(backbone=model, flatten=False).fit_transform(images[:1])
    np.testing.assert_allclose(single.vector_, per_sample[0], rtol=1e-6)
    fitted = VisualSteeringVector(backbone=model, mode="fitted").fit(images)
    out = fitted.transform(images[:3])
    assert out.shape == (3, 4 * 32) and np.allclose(out[0], out[2])
    assert steerer(model, vsv_mode="fitted").fit(images).vector_.shape == (4, 32)


def test_input_forms_agree(model, scenes):
    images, _ = scenes
    fitted = steerer(model).fit()
    prompt = fitted.prompt
    as_array = fitted.predict(images[:2])
    as_dicts = fitted.predict([{"image": images[0], "prompt": prompt}, {"image": images[1]}])
    as_frame = fitted.predict(pd.DataFrame({"image": list(images[:2]), "prompt": [prompt, prompt]}))
    assert list(as_array) == list(as_dicts) == list(as_frame)
    rows = VISTASteerer(backbone=model, max_new_tokens=3, sla_window=2, image_shape=(48, 48, 3)).fit(
        images[:2].reshape(2, -1) / 255.0)
    assert rows.n_features_in_ == 48 * 48 * 3
    assert rows.predict(images[:2].reshape(2, -1) / 255.0).shape == (2,)


def test_rows_of_pixels_are_read_as_the_images_they_flatten(model, scenes):
    # Issue 64: uint8 rows were cast to float and read as [0, 1] intensities (white pictures), so the
    # captions of the 2-D path were not the images' captions.
    images, _ = scenes
    rows = images.reshape(len(images), -1)
    fitted = steerer(model, image_shape=(48, 48, 3)).fit(rows)
    assert list(fitted.predict(rows)) == list(steerer(model).fit().predict(images))
    vectors = VisualSteeringVector(backbone=model, image_shape=(48, 48, 3)).fit(rows).transform(rows)
    np.testing.assert_allclose(vectors, VisualSteeringVector(backbone=model).fit(images).transform(images))
    for bad in (rows.astype(np.float64), rows / 127.5 - 1.0):
        with pytest.raises(ValueError, match=r"(?s)flattened images.*floats in \[0, 1\].*divide by 255.*uint8"):
            fitted.predict(bad)
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            VisualSteeringVector(backbone=model, image_shape=(48, 48, 3)).fit(bad)


def test_score_is_minus_chair_i_and_a_grid_search_tunes_the_strength(model, scenes):
    images, truth = scenes
    fitted = steerer(model).fit()
    report = fitted.chair_report(images, truth)
    assert fitted.score(images, truth) == -report["chair_i"]
    assert steerer(model, scoring="recall").fit().score(images, truth) == report["recall"]
    search = GridSearchCV(steerer(model), {"vsv_lambda": [0.0, 0.5], "sla_gamma": [0.0, 0.3]}, cv=2)
    search.fit(images, truth)
    assert set(search.best_params_) == {"vsv_lambda", "sla_gamma"}
    with pytest.raises(ValueError, match="ground-truth"):
        fitted.score(images, None)


def test_empty_captions_at_a_strong_strength_are_warned_about(model, scenes, monkeypatch):
    images, _ = scenes
    fitted = steerer(model, vsv_lambda=5.0).fit()
    monkeypatch.setattr(fitted, "_generate_ids", lambda images, prompts: [[] for _ in images])
    with pytest.warns(UserWarning, match="issue #2"):
        fitted.predict(images)
    quiet = steerer(model, vsv=False).fit()
    monkeypatch.setattr(quiet, "_generate_ids", lambda images, prompts: [[] for _ in images])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet.predict(images)


def test_captions_that_run_on_in_a_loop_are_warned_about(model, scenes, monkeypatch):
    images, _ = scenes
    fitted = steerer(model, vsv_lambda=5.0).fit()
    monkeypatch.setattr(fitted, "_generate_ids", lambda images, prompts: [[5, 6, 7] * 3 for _ in images])
    with pytest.warns(UserWarning, match="run on to max_new_tokens in a loop"):
        fitted.predict(images)
    # As long, without a loop: a long caption is not a collapse.
    monkeypatch.setattr(fitted, "_generate_ids", lambda images, prompts: [list(range(5, 13)) for _ in images])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.predict(images)


def test_loops_are_ngrams_repeated_three_times_in_a_row():
    assert _loops([1, 1, 1])
    assert _loops([9, 1, 2, 1, 2, 1, 2])
    assert _loops([4, 3, 2, 1] * 3)
    assert not _loops([1, 2, 1, 2, 3, 1, 2])
    assert not _loops([1, 2, 3, 4, 5] * 2)


def test_presets_are_valid_parameters():
    assert VISTA_PRESETS["llava-1.5"] == {"vsv_lambda": 0.17, "sla_gamma": 0.3, "sla_layers": (25, 30)}
    for preset in VISTA_PRESETS.values():
        VISTASteerer(**preset)._validate_params()


def test_the_last_layer_of_the_logit_lens_ranks_the_greedy_choice_first(model, scenes):
    images, _ = scenes
    plain = steerer(model, vsv=False, sla=False, max_new_tokens=6).fit()
    vocabulary = list(range(len(model.vocabulary)))
    ranks, generated = plain.token_rankings(images, vocabulary, return_tokens=True)
    assert ranks.shape[:2] == (len(images), len(vocabulary)) and ranks.shape[3] == 4
    ids = plain._generate_ids(*plain._read(images, reset=False))
    for i, row in enumerate(ids):
        assert [plain.backbone_.decode([t]) for t in row] == generated[i]
        np.testing.assert_array_equal(ranks[i, row, np.arange(len(row)), -1], 1)
        assert np.isnan(ranks[i, :, len(row):]).all()
        # Every layer's ranks are a permutation of 1..V up to ties.
        assert np.all(np.sort(ranks[i, :, 0], axis=0)[0] == 1)
    assert n_hooks(model) == 0


def test_the_first_step_ranks_are_the_prompts_logit_lens(model, scenes):
    images, _ = scenes
    fitted = steerer(model, vsv=False, sla=False, max_new_tokens=3).fit()
    words = ["red", "circle", ","]
    ranks = fitted.token_rankings(images[:2], words)
    backbone = as_backbone(model)
    ids = [backbone.token_id(w) for w in words]
    with torch.no_grad(), capture_last_states(backbone, [0, 1, 2, 3]) as states:
        backbone.prefill(backbone.build_inputs(images[:2], fitted.prompt, with_image=True))
        logits = model.lm_head(model.norm(torch.stack([states[i] for i in range(4)], 1)))
    expected = (logits[..., None, :] > logits[..., ids][..., None]).sum(-1) + 1
    np.testing.assert_array_equal(ranks[:, :, 0], expected.transpose(1, 2).numpy())


def test_token_rankings_see_the_steered_model(model, scenes):
    images, _ = scenes
    plain = steerer(model, vsv=False, sla=False).fit().token_rankings(images[:2], ["red"])
    steered = steerer(model, vsv_lambda=2.0, sla=False).fit().token_rankings(images[:2], ["red"])
    assert not np.array_equal(np.nan_to_num(plain[..., 1:, :]), np.nan_to_num(steered[..., 1:, :]))


def test_token_rankings_bad_inputs_get_clear_errors(model, scenes):
    images, _ = scenes
    fitted = steerer(model).fit()
    with pytest.raises(ValueError, match="not a word"):
        fitted.token_rankings(images[:1], ["zebra"])
    with pytest.raises(ValueError, match="tokens is empty"):
        fitted.token_rankings(images[:1], [])
    with pytest.raises(ValueError, match="token ids in 0"):
        fitted.token_rankings(images[:1], [10_000])
    with pytest.raises(ValueError, match="beam"):
        steerer(model, decoding="beam").fit().token_rankings(images[:1], ["red"])


def test_pickle_round_trip_keeps_the_captions(model, scenes):
    images, _ = scenes
    fitted = steerer(model, vsv_lambda=0.5).fit()
    clone = pickle.loads(pickle.dumps(fitted))
    assert list(clone.predict(images)) == list(fitted.predict(images))


def test_bad_inputs_get_clear_errors(model, scenes):
    images, _ = scenes
    with pytest.raises(ValueError, match="vsv_layers"):
        steerer(model, vsv_layers=[0, 7]).fit()
    with pytest.raises(ValueError, match="sla_layers"):
        steerer(model, sla_layers=(1, 3)).fit()
    with pytest.raises(ValueError, match="48 x 48"):
        steerer(model).fit().predict(np.zeros((1, 32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="non-empty string"):
        steerer(model, prompt=" ").fit().predict(images[:1])
    with pytest.raises(ValueError, match="'image' key"):
        steerer(model).fit().predict([{"prompt": "describe :"}])
    # Issue 64: these reached scikit-learn's 1-D error and pandas' "setting an array element with a sequence".
    for empty in ([], ()):
        with pytest.raises(ValueError, match="no images"):
            steerer(model).fit().predict(empty)
        with pytest.raises(ValueError, match="no images"):
            VisualSteeringVector(backbone=model).fit(empty)
    for frame, holds in ((pd.DataFrame({"img": list(images[:2])}), "images or arrays"),
                         (pd.DataFrame({"prompt": ["describe :"] * 2}), "strings")):
        with pytest.raises(ValueError, match=rf"(?s)data frame without an 'image' column.*{holds}.*named 'image'"):
            steerer(model).fit().predict(frame)
    with pytest.raises(TypeError, match="not a VLM backbone"):
        VISTASteerer(backbone=object()).fit()
    with pytest.raises(ValueError, match="fitted"):
        steerer(model, vsv_mode="fitted").fit()
