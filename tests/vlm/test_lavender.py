"""Lavender's mechanics: alignment maps and loss, LoRA by hooks, the oracle teacher, the tuner."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch import nn

from skicml.base import seeded
from skicml.datasets import make_object_scenes
from skicml.nn.lora import LoRA
from skicml.vlm import TinyVLM, scene_vocabulary
from skicml.vlm._grounding import check_word_maps, oracle_word_maps, pointing_accuracy, resize_map
from skicml.vlm._lavender._align import Aligner, align_loss, attention_maps, pool_word_maps
from skicml.vlm._lavender._teachers import OracleMaskTeacher
from skicml.vlm._lavender._tuner import LavenderTuner


@pytest.fixture(scope="module")
def scenes():
    return make_object_scenes(12, return_masks=True, random_state=0)


def tiny_model(seed=0):
    with seeded(seed):
        return TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=2, head_dim=16)


def tuner(scenes, **params):
    images, _, objects, masks = scenes
    defaults = dict(backbone=tiny_model(), teacher=OracleMaskTeacher(images, objects, masks), max_epochs=1,
                    lr=1e-2, random_state=0)
    return LavenderTuner(**{**defaults, **params})


def weights(fitted):
    return {k: v.clone() for k, v in fitted.backbone_.model.state_dict().items()}


# ----------------------------------------------------------------------
# maps, pooling and the loss
# ----------------------------------------------------------------------
def test_the_aligner_has_the_official_size_and_shape():
    aligner = Aligner(32)
    assert sum(p.numel() for p in aligner.parameters()) == 27_681
    assert aligner(torch.rand(3, 32, 8, 8)).shape == (3, 1, 8, 8)


@pytest.mark.parametrize("cell", [0, 2, 4, 6, 8])
def test_a_peak_on_one_image_token_stays_in_its_cell_through_the_resize(cell):
    probabilities = torch.full((1, 1, 2, 14, 14), 0.01)
    probabilities[0, 0, :, 12, cell] = 1.0  # query 12 looks at image token `cell` of a 3 x 3 grid
    maps = attention_maps(probabilities, torch.tensor([[0, 12]]), slice(0, 9), (3, 3), 9)
    assert maps.shape == (1, 1, 2, 9, 9)
    row, col = np.unravel_index(int(maps[0, 0, 0].argmax()), (9, 9))
    assert (row // 3, col // 3) == divmod(cell, 3)


def test_each_row_keeps_its_own_maps_in_every_layer():
    # Query 9 looks at cell 0 and query 10 at cell 8, in both layers: no layer may hand one row's map to another.
    probabilities = torch.zeros(2, 1, 1, 12, 12)
    probabilities[:, 0, 0, 9, 0] = 1.0
    probabilities[:, 0, 0, 10, 8] = 1.0
    maps = attention_maps(probabilities, torch.tensor([[0, 9], [0, 10]]), slice(0, 9), (3, 3), 3)
    assert maps[0, :, 0].flatten(1).argmax(-1).tolist() == [0, 0]
    assert maps[1, :, 0].flatten(1).argmax(-1).tolist() == [8, 8]


def test_duplicate_positions_of_a_word_average_and_maps_are_min_max_scaled():
    maps = torch.tensor([[0.0, 2.0, 4.0], [2.0, 2.0, 0.0], [5.0, 5.0, 5.0]])
    pooled, counts = pool_word_maps(maps, torch.tensor([1, 1, 2]), n_samples=1, n_words=3)
    assert counts.tolist() == [[0, 2, 1]]
    np.testing.assert_allclose(pooled[0, 1], [0.0, 1.0, 1.0], atol=1e-6)  # the mean (1, 2, 2), scaled
    assert torch.equal(pooled[0, 2], torch.zeros(3))  # constant: zeros, not NaN
    assert torch.equal(pooled[0, 0], torch.zeros(3))  # no position


@settings(max_examples=30, deadline=None)
@given(arrays(np.float32, (3, 4, 16), elements=st.floats(0, 1, width=32)),
       arrays(np.float32, (3, 4, 16), elements=st.floats(0, 1, width=32)),
       arrays(bool, (3, 4)))
def test_the_alignment_loss_is_the_mean_squared_error_over_matched_words(student, teacher, matched):
    loss, n = align_loss(torch.as_tensor(student), torch.as_tensor(teacher), torch.as_tensor(matched))
    expected = ((student - teacher) ** 2).mean(-1)[matched].mean() if matched.any() else 0.0
    assert n == matched.sum()
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5, atol=1e-7)
    same, _ = align_loss(torch.as_tensor(student), torch.as_tensor(student), torch.as_tensor(matched))
    assert float(same) == 0.0


def test_no_matched_word_gives_a_zero_loss_and_gradient():
    student = torch.rand(2, 3, 4, requires_grad=True)
    loss, n = align_loss(student, torch.rand(2, 3, 4), torch.zeros(2, 3, dtype=torch.bool))
    loss.backward()
    assert n == 0 and float(loss.detach()) == 0.0 and torch.equal(student.grad, torch.zeros_like(student))


def test_eager_attention_gives_the_fused_forward_and_rows_that_sum_to_one():
    model = tiny_model().eval()
    ids, mask = torch.randint(4, 20, (2, 6)), torch.ones(2, 6, dtype=torch.bool)
    mask[0, :2] = False
    images = torch.rand(2, 48, 48, 3)
    fused, _ = model(ids, images, mask)
    eager, _, probabilities = model(ids, images, mask, attention_layers=[1, 0])
    torch.testing.assert_close(eager, fused, atol=1e-5, rtol=1e-5)
    assert probabilities.shape == (2, 2, 2, 15, 15)
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(2, 2, 2, 15))
    assert float(probabilities[..., 9:, 9:].triu(1).abs().max()) == 0.0  # causal among the words


# ----------------------------------------------------------------------
# LoRA
# ----------------------------------------------------------------------
def test_lora_trains_adapters_only_and_merges_exactly():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3))
    base = {k: v.clone() for k, v in model.state_dict().items()}
    lora = LoRA(model, ["0", "2"], r=2, alpha=4, dropout=0.0)
    for p in model.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.SGD(lora.parameters(), lr=0.1)
    x = torch.randn(16, 6)
    for _ in range(5):
        optimizer.zero_grad()
        with lora.attached(model):
            model(x).pow(2).mean().backward()
        optimizer.step()
    assert all(torch.equal(base[k], v) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks for m in model.modules())
    with torch.no_grad(), lora.attached(model):
        adapted = model(x)
    assert not torch.allclose(adapted, nn.Sequential(*model)(x))
    lora.merge(model)
    torch.testing.assert_close(model(x).detach(), adapted, atol=1e-6, rtol=1e-6)


def test_lora_on_a_half_precision_model_keeps_float32_adapters():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 3)).to(torch.bfloat16)
    lora = LoRA(model, ["0"], r=2, dropout=0.0)
    with torch.no_grad():
        lora.up["0"].weight.normal_()
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    with lora.attached(model):
        out = model(x)
        out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and lora.down["0"].weight.dtype == torch.float32
    assert lora.down["0"].weight.grad is not None
    expected = model[0].weight.float() + lora.scaling * lora.up["0"].weight @ lora.down["0"].weight
    lora.merge(model)
    assert model[0].weight.dtype == torch.bfloat16
    torch.testing.assert_close(model[0].weight, expected.detach().to(torch.bfloat16), atol=0, rtol=0)


def test_lora_names_missing_layers_clearly():
    with pytest.raises(ValueError, match="no linear layer .* named like"):
        LoRA(nn.Sequential(nn.Linear(2, 2)), ["q_proj"])


# ----------------------------------------------------------------------
# the oracle teacher and pointing accuracy
# ----------------------------------------------------------------------
def test_an_object_alone_at_the_top_left_gets_a_map_that_peaks_there():
    images, captions, objects, masks = make_object_scenes(40, min_objects=1, max_objects=1, return_masks=True,
                                                          random_state=3)
    maps = OracleMaskTeacher(images, objects, masks).word_maps(images, captions)
    for scene, (row, col, color) in enumerate(zip(objects["row"], objects["col"], objects["color"])):
        peak = np.unravel_index(np.argmax(maps[scene][color]), (8, 8))
        assert (peak[0] * 3 // 8, peak[1] * 3 // 8) == (row, col)


def test_oracle_maps_point_perfectly_and_random_ones_near_chance(scenes):
    images, _, objects, masks = scenes
    assert pointing_accuracy(oracle_word_maps(objects, masks, 8), objects, masks)["all"] == 1.0
    rng = np.random.default_rng(0)
    random_maps = [{w: rng.random((8, 8)) for w in m} for m in oracle_word_maps(objects, masks, 8)]
    assert pointing_accuracy(random_maps, objects, masks)["all"] < 0.4


def test_the_oracle_refuses_images_it_was_not_built_from(scenes):
    images, captions, objects, masks = scenes
    teacher = OracleMaskTeacher(images[:4], objects[objects.scene < 4], masks[:4])
    with pytest.raises(ValueError, match="image 0 is not one of the scenes"):
        teacher.word_maps(images[6:8], captions[6:8])


def test_word_maps_are_checked_and_resized():
    maps = check_word_maps([{"Red": np.full((16, 16), 0.25) + 0.75 * np.eye(16)}], 1, resolution=8)
    assert maps[0]["red"].shape == (8, 8) and maps[0]["red"].max() <= 1.0 and maps[0]["red"].min() == 0.25
    # Issue 64: maps outside [0, 1] were min-max scaled without a word.
    for bad, found in ((np.full((16, 16), 3.0) + np.eye(16), "3 to 4"), (np.linspace(-1, 1, 64).reshape(8, 8), "-1")):
        with pytest.raises(ValueError, match=rf"(?s)word_maps\[0\]\['red'\].*{found}.*\[0, 1\].*min-max"):
            check_word_maps([{"red": bad}], 1, resolution=8)
    np.testing.assert_allclose(resize_map(np.ones((6, 6)), 4), np.ones((4, 4)))
    with pytest.raises(ValueError, match="square 2-D map"):
        check_word_maps([{"red": np.ones((4, 5))}], 1)
    with pytest.raises(ValueError, match="list of 2 dicts"):
        check_word_maps([{}], 2)


# ----------------------------------------------------------------------
# the tuner
# ----------------------------------------------------------------------
def test_zero_alignment_weight_is_exactly_plain_fine_tuning(scenes):
    images, captions, _, _ = scenes
    with_teacher = tuner(scenes, align_weight=0.0).fit(images, captions)
    without = tuner(scenes, align_weight=0.0, teacher=None).fit(images, captions)
    aligned = tuner(scenes, align_weight=10.0).fit(images, captions)
    assert with_teacher.aligner_ is None
    plain = weights(without)
    assert all(torch.equal(plain[k], v) for k, v in weights(with_teacher).items())
    assert any(not torch.equal(plain[k], v) for k, v in weights(aligned).items())


def test_the_alignment_loss_falls_with_training(scenes):
    images, captions, _, _ = scenes
    fitted = tuner(scenes, max_epochs=6, batch_size=6).fit(images, captions)
    alignment = [epoch["alignment"] for epoch in fitted.history_]
    assert fitted.n_matched_words_ > 0 and len(alignment) == 6
    assert alignment[-1] < 0.8 * alignment[0]


def test_without_an_aligner_the_models_own_attention_moves_towards_the_teacher(scenes):
    images, captions, objects, masks = scenes
    plain = tuner(scenes, align_weight=0.0, max_epochs=8, batch_size=6, lr=3e-2).fit(images, captions)
    aligned = tuner(scenes, aggregation="mean", max_epochs=8, batch_size=6, lr=3e-2).fit(images, captions)
    assert aligned.aligner_ is None
    teacher = OracleMaskTeacher(images, objects, masks).word_maps(images, captions)

    def error(fitted):
        student = fitted.word_maps(images, captions, aligned=False)
        return np.mean([((s[w] - t[w]) ** 2).mean() for s, t in zip(student, teacher) for w in t if w in s])

    assert error(aligned) < 0.7 * error(plain)


def test_lora_leaves_the_callers_model_untouched_and_merges_into_the_copy(scenes):
    images, captions, _, _ = scenes
    model = tiny_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fitted = tuner(scenes, backbone=model).fit(images, captions)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    after = weights(fitted)
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    assert changed and all(k.endswith("qkv.weight") for k in changed)  # the adapted layers only
    assert not any(m._forward_hooks for m in fitted.backbone_.model.modules())


def test_fitting_twice_with_one_seed_is_deterministic(scenes):
    images, captions, _, _ = scenes
    a, b = (weights(tuner(scenes, lora_dropout=0.1).fit(images, captions)) for _ in range(2))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_predict_score_and_word_maps(scenes):
    images, captions, _, _ = scenes
    fitted = tuner(scenes, max_new_tokens=5).fit(images, captions)
    assert fitted.predict(images[:3]).shape == (3,)
    assert fitted.score(images, captions) < 0
    maps = fitted.word_maps(images[:2], captions[:2])
    assert len(maps) == 2 and "a" in maps[0]
    for word_map in maps[0].values():
        assert word_map.shape == (8, 8) and 0 <= word_map.min() and word_map.max() <= 1
    raw = fitted.word_maps(images[:2], captions[:2], aligned=False)
    assert raw[0].keys() == maps[0].keys()
    plain = tuner(scenes, align_weight=0.0).fit(images, captions)
    assert plain.word_maps(images[:1], captions[:1], aligned=False)[0].keys() == maps[0].keys()
    with pytest.raises(ValueError, match="aligned=False"):
        plain.word_maps(images[:1], captions[:1])
    one_head = plain.word_maps(images[:1], captions[:1], aligned=False, layers=[1], heads=[0])
    assert one_head[0].keys() == maps[0].keys()
    mean = plain.word_maps(images[:1], captions[:1], aligned=False)
    assert any(not np.allclose(one_head[0][w], mean[0][w]) for w in mean[0])
    with pytest.raises(ValueError, match="head indices"):
        plain.word_maps(images[:1], captions[:1], aligned=False, heads=[7])
    with pytest.raises(ValueError, match="layers="):
        plain.word_maps(images[:1], captions[:1], aligned=False, layers=[9])


def test_teacher_maps_given_in_x_win_over_the_teacher(scenes):
    images, captions, objects, masks = scenes
    maps = oracle_word_maps(objects, masks, 8)
    from_x = tuner(scenes, teacher=None).fit([{"image": i, "teacher_maps": m} for i, m in zip(images, maps)],
                                             captions)
    from_teacher = tuner(scenes).fit(images, captions)
    a, b = weights(from_x), weights(from_teacher)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rows_of_pixels_are_read_as_the_images_they_flatten(scenes):
    # Issue 64: uint8 rows were cast to float and read as [0, 1] intensities, and the score moved.
    images, captions, _, _ = scenes
    fitted = tuner(scenes, align_weight=0.0, teacher=None).fit(images, captions)
    rows = images.reshape(len(images), -1)
    fitted.set_params(image_shape=(48, 48, 3))
    assert fitted.score(rows, captions) == pytest.approx(fitted.score(images, captions), abs=1e-6)
    assert list(fitted.predict(rows[:2])) == list(fitted.predict(images[:2]))
    with pytest.raises(ValueError, match=r"(?s)flattened images.*floats in \[0, 1\].*uint8"):
        fitted.score(rows.astype(np.float32), captions)
    with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
        tuner(scenes, align_weight=0.0, teacher=None, image_shape=(48, 48, 3)).fit(rows.astype(float), captions)


def test_bad_inputs_get_clear_errors(scenes):
    images, captions, _, _ = scenes
    with pytest.raises(ValueError, match="needs a teacher"):
        tuner(scenes, teacher=None).fit(images, captions)
    with pytest.raises(ValueError, match="one target text per image"):
        tuner(scenes).fit(images, captions[:3])
    # Issue 64: a single string said "got 0" captions; maps outside [0, 1] were rescaled silently.
    with pytest.raises(ValueError, match=r"y is a single string.*one target text per image \(12\)"):
        tuner(scenes).fit(images, "a red circle")
    with pytest.raises(ValueError, match=r"(?s)teacher maps\[0\]\['red'\].*\[0, 1\]"):
        tuner(scenes).fit([{"image": i, "teacher_maps": {"red": np.full((8, 8), 2.0)}} for i in images], captions)
    with pytest.raises(ValueError, match="non-empty strings"):
        tuner(scenes).fit(images[:2], ["a red circle", ""])
    with pytest.raises(ValueError, match="outside the backbone's vocabulary"):
        tuner(scenes).fit(images[:2], ["a red zebra", "a blue circle"])
    with pytest.raises(ValueError, match="48 x 48"):
        tuner(scenes).fit(images[:, :32, :32], captions)
    with pytest.raises(ValueError, match="attn_layers"):
        tuner(scenes, attn_layers=[5]).fit(images, captions)
    with pytest.warns(UserWarning, match="no word of the target texts has a teacher map"):
        tuner(scenes, teacher=None).fit([{"image": i, "teacher_maps": {"zebra": np.ones((8, 8))}} for i in images],
                                        captions)


def test_an_unfitted_estimator_teacher_is_fitted_as_a_copy(scenes):
    from skicml.vlm import TinyDiffusionTeacher

    images, captions, _, _ = scenes
    teacher = TinyDiffusionTeacher(d_model=16, n_layers=1, max_epochs=1, random_state=0)
    fitted = tuner(scenes, teacher=teacher).fit(images, captions)
    assert not hasattr(teacher, "module_") and hasattr(fitted.teacher_, "module_")
    assert fitted.n_matched_words_ > 0


def test_maps_saved_in_the_official_layout_read_back(tmp_path, scenes):
    from skicml.vlm import PrecomputedTeacher, save_word_maps

    images, _, objects, masks = scenes
    maps = oracle_word_maps(objects, masks, 8)
    names = [f"scene_{i}.png" for i in range(len(images))]
    assert save_word_maps(tmp_path, names, maps, size=32) == sum(len(m) for m in maps)
    assert (tmp_path / "scene_0.png" / "lpm_attention" / "0").is_dir()
    read = PrecomputedTeacher(tmp_path, resolution=8).word_maps(names=names[::-1])[::-1]
    for got, want in zip(read, maps):
        assert got.keys() == want.keys()
        for word in want:
            assert np.abs(got[word] - want[word]).max() < 0.05  # 8-bit JPEG, 8 -> 32 -> 8 pixels
    with pytest.raises(ValueError, match="no teacher maps for image 'other.png'"):
        PrecomputedTeacher(tmp_path).word_maps(names=["other.png"])
    with pytest.raises(ValueError, match="pass names="):
        PrecomputedTeacher(tmp_path).word_maps(images)


def test_the_tuner_hands_image_paths_to_a_precomputed_teacher(tmp_path, scenes):
    from PIL import Image

    from skicml.vlm import PrecomputedTeacher, save_word_maps

    images, captions, objects, masks = scenes
    paths = []
    for i, image in enumerate(images):
        paths.append(str(tmp_path / f"scene_{i}.png"))
        Image.fromarray(image).save(paths[-1])
    save_word_maps(tmp_path / "maps", paths, oracle_word_maps(objects, masks, 8))
    fitted = tuner(scenes, teacher=PrecomputedTeacher(tmp_path / "maps", resolution=8)).fit(paths, captions)
    assert fitted.n_matched_words_ == tuner(scenes).fit(images, captions).n_matched_words_ > 0


def test_constant_student_maps_cannot_zero_the_alignment_loss(scenes):
    # An Aligner that writes the same value everywhere gives maps that min-max scale to zeros; they must
    # be scored against the teacher, not skipped (skipping them lets training collapse the Aligner).
    from skicml.vlm._lavender._tuner import LavenderObjective

    images, captions, objects, masks = scenes
    fitted = tuner(scenes, max_epochs=0).fit(images, captions)
    aligner = Aligner(fitted.backbone_.n_heads)
    with torch.no_grad():
        aligner.project.weight.zero_()
    objective = LavenderObjective(fitted.backbone_, aligner, None, [0, 1], 8, 10.0, "aligner_then_mean", "target")
    tensors, _ = fitted._tensors(images, fitted.prompt, list(captions), oracle_word_maps(objects, masks, 8))
    with torch.no_grad():
        objective(**tensors)
    _, alignment, n_matched = objective.log[-1]
    expected = np.mean([(m ** 2).mean() for row in oracle_word_maps(objects, masks, 8) for m in row.values()])
    assert n_matched > 0 and alignment == pytest.approx(expected, rel=1e-4)
