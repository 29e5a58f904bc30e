"""LavenderTuner on a Hugging Face LLaVA: the same objective through the backbone protocol's fine-tuning members.

A tiny random ``LlavaForConditionalGeneration`` (2 Llama layers of width 32,
4 heads over 2 key-value heads, a 4 x 4 grid of image tokens) and its
processor are built from configs once per module; nothing is downloaded.
"""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from skicml.datasets import make_object_scenes  # noqa: E402
from skicml.nn.lora import LoRA  # noqa: E402
from skicml.vlm import CallableAdapter, HFLlavaAdapter, LavenderTuner, OracleMaskTeacher, as_backbone  # noqa: E402
from skicml.vlm._grounding import oracle_word_maps  # noqa: E402
from skicml.vlm._lavender._tuner import LavenderObjective  # noqa: E402
from skicml.vlm._tiny_llava import TINY_LLAVA_TOKENS, tiny_random_llava  # noqa: E402

PROMPT = "<image> describe the image :"
IMAGE = TINY_LLAVA_TOKENS["image"]
GRID = 4  # 32-pixel images, 8-pixel patches


@pytest.fixture(scope="module")
def llava():
    return tiny_random_llava(num_layers=2)


@pytest.fixture(scope="module")
def scenes():
    return make_object_scenes(8, max_objects=3, return_masks=True, random_state=0)


def tuner(llava, scenes, **params):
    images, _, objects, masks = scenes
    defaults = dict(backbone=HFLlavaAdapter(*llava), teacher=OracleMaskTeacher(images, objects, masks), prompt=PROMPT,
                    max_epochs=1, batch_size=4, lr=1e-2, max_new_tokens=4, random_state=0)
    return LavenderTuner(**{**defaults, **params})


def weights(fitted):
    return {k: v.clone() for k, v in fitted.backbone_.model.state_dict().items()}


def eager_image_attention(model, inputs, layers, rows):
    """The reference: eager attention's full probabilities, sliced at ``rows`` and the image columns."""
    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    mask = inputs["attention_mask"]
    out = eager(input_ids=inputs["input_ids"], pixel_values=inputs["pixel_values"], attention_mask=mask,
                position_ids=(mask.cumsum(-1) - 1).clamp(min=0), output_attentions=True)
    image = inputs["input_ids"] == IMAGE
    picked = [torch.stack([out.attentions[layer][b, :, p][:, image[b]] for b, p in rows.tolist()]) for layer in layers]
    return torch.stack(picked, dim=1), eager  # (N, layers, heads, n_image)


# ----------------------------------------------------------------------
# the protocol's fine-tuning members
# ----------------------------------------------------------------------
def test_caption_rows_locate_the_words_and_the_target_tokens(llava, scenes):
    images, captions, _, _ = scenes
    adapter = HFLlavaAdapter(*llava)
    assert adapter.image_grid == (GRID, GRID) and adapter.n_heads == 4
    inputs, words = adapter.caption_batch(images[:2], PROMPT, captions[:2])
    tokenizer = llava[1].tokenizer
    for i, caption in enumerate(captions[:2]):
        ids = inputs["input_ids"][i]
        assert int((ids == IMAGE).sum()) == GRID * GRID
        target = tokenizer.convert_ids_to_tokens(ids[inputs["target"][i]])
        assert target[-1] == "</s>" and " ".join(target[:-1]) == caption.replace(",", " ,")
        for word, positions in words[i]:
            assert tokenizer.convert_ids_to_tokens(ids[positions]) == [word]
        assert [w for w, _ in words[i]] == [w for w in caption.replace(",", " ").split()]
    # Right padding: the shorter row's tail is masked.
    lengths = inputs["attention_mask"].sum(1)
    assert inputs["attention_mask"][int(lengths.argmin()), int(lengths.min()):].sum() == 0


def test_a_word_of_several_tokens_holds_all_their_positions():
    model, processor = tiny_random_llava(num_layers=2, split_words=["circle"])
    adapter = HFLlavaAdapter(model, processor)
    inputs, words = adapter.caption_batch(np.zeros((1, 32, 32, 3), np.uint8), PROMPT, ["a red circle, a blue square"])
    found = dict(words[0][:3])
    ids = inputs["input_ids"][0]
    assert processor.tokenizer.convert_ids_to_tokens(ids[found["circle"]]) == ["cir", "##cle"]
    assert adapter.word_token_ids("circle") == []  # predicted keying cannot spell it with one token
    assert adapter.word_token_ids("red") == [int(ids[found["red"][0]])]


def test_student_maps_from_the_subblock_op_equal_eager_attention_and_its_gradients(llava, scenes):
    images, captions, _, _ = scenes
    model, processor = llava
    ours = copy.deepcopy(model)
    adapter = HFLlavaAdapter(ours, processor)
    inputs, _ = adapter.caption_batch(images[:3], PROMPT, captions[:3])
    rows = inputs["target"].nonzero()
    logits, attention = adapter.teacher_forced(inputs, [0, 1], rows)
    reference, eager = eager_image_attention(ours, inputs, [0, 1], rows)
    assert attention.shape == (len(rows), 2, 4, GRID * GRID)
    torch.testing.assert_close(attention, reference, atol=1e-6, rtol=1e-5)
    weight = torch.rand_like(attention)
    (attention * weight).sum().backward()
    (reference * weight).sum().backward()
    for (name, p), q in zip(ours.named_parameters(), eager.parameters()):
        if p.grad is not None and "language_model.layers" in name:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)
    assert not any(m._forward_hooks for m in ours.modules())


def test_the_caption_loss_is_the_models_own_loss_on_the_caption_labels(llava, scenes):
    images, captions, _, _ = scenes
    fitted = tuner(llava, scenes, align_weight=0.0, teacher=None, max_epochs=0).fit(images, captions)
    tensors, _ = fitted._tensors(images, PROMPT, list(captions), [{} for _ in images])
    objective = LavenderObjective(fitted.backbone_, None, None, [0, 1], 8, 0.0, "aligner_then_mean", "target")
    ours = objective(**tensors)
    labels = torch.where(tensors["target"], tensors["input_ids"], -100)
    theirs = fitted.backbone_.model(input_ids=tensors["input_ids"], pixel_values=tensors["pixel_values"],
                                    attention_mask=tensors["attention_mask"], labels=labels).loss
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)


# ----------------------------------------------------------------------
# the tuner
# ----------------------------------------------------------------------
def test_the_alignment_loss_falls_with_the_oracle_teacher(llava, scenes):
    images, captions, _, _ = scenes
    fitted = tuner(llava, scenes, max_epochs=5).fit(images, captions)
    alignment = [epoch["alignment"] for epoch in fitted.history_]
    assert fitted.n_matched_words_ > 0 and len(alignment) == 5
    assert alignment[-1] < 0.7 * alignment[0]


def test_zero_alignment_weight_is_exactly_plain_lora_fine_tuning(llava, scenes):
    images, captions, _, _ = scenes
    with_teacher = tuner(llava, scenes, align_weight=0.0).fit(images, captions)
    without = tuner(llava, scenes, align_weight=0.0, teacher=None).fit(images, captions)
    aligned = tuner(llava, scenes).fit(images, captions)
    assert with_teacher.aligner_ is None and aligned.aligner_ is not None
    plain = weights(without)
    assert all(torch.equal(plain[k], v) for k, v in weights(with_teacher).items())
    assert any(not torch.equal(plain[k], v) for k, v in weights(aligned).items())


def test_lora_leaves_the_callers_model_untouched_and_merges_exactly(llava, scenes):
    images, captions, _, _ = scenes
    model, processor = llava
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fitted = tuner(llava, scenes).fit(images, captions)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    after = weights(fitted)
    assert after.keys() == before.keys()  # nothing of Lavender is left in the model
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("model.language_model.") and k.endswith(("q_proj.weight", "v_proj.weight"))
                           for k in changed)
    assert not any(m._forward_hooks for m in fitted.backbone_.model.modules())
    # The merge is exact: adapters on a copy give the logits their merged weights give.
    adapter = HFLlavaAdapter(copy.deepcopy(model), processor)
    torch.manual_seed(1)
    lora = LoRA(adapter.language_model, ("q_proj", "v_proj"), r=2, dropout=0.0)
    for up in lora.up.values():
        torch.nn.init.normal_(up.weight, std=0.1)
    inputs, _ = adapter.caption_batch(images[:2], PROMPT, captions[:2])
    with torch.no_grad(), lora.attached(adapter.language_model):
        adapted, _ = adapter.teacher_forced(inputs)
    lora.merge(adapter.language_model)
    with torch.no_grad():
        merged, _ = adapter.teacher_forced(inputs)
    torch.testing.assert_close(merged, adapted, atol=1e-5, rtol=1e-5)


def test_multi_token_words_pool_the_maps_of_all_their_tokens(scenes):
    model, processor = tiny_random_llava(num_layers=2, split_words=["circle"])
    images = scenes[0][:2]
    captions = ["a red circle", "a blue circle , a green square"]
    fitted = LavenderTuner(backbone=(model, processor), align_weight=0.0, max_epochs=0, prompt=PROMPT,
                           random_state=0).fit(images, captions)
    maps = fitted.word_maps(images, captions, aligned=False)
    assert sorted(maps[0]) == ["a", "circle", "red"]
    inputs, words = fitted.backbone_.caption_batch(images, PROMPT, captions)
    for i in range(2):
        positions = dict(words[i])["circle"]
        assert len(positions) == 2
        # The queries that predict "cir" and "##cle", one position before each.
        rows = torch.tensor([[i, p - 1] for p in positions])
        reference, _ = eager_image_attention(fitted.backbone_.model, inputs, [0, 1], rows)
        grid = reference.mean((1, 2)).reshape(2, 1, GRID, GRID)
        each = F.interpolate(grid, size=(8, 8), mode="bilinear", align_corners=False).flatten(1)

        def minmax(x):
            low, high = x.min(-1, keepdim=True).values, x.max(-1, keepdim=True).values
            return (x - low) / (high - low)

        # Each position's map is scaled, then the word's positions average and the mean is scaled again.
        expected = minmax(minmax(each).mean(0)).reshape(8, 8)
        # Min-max scaling of a random model's near-uniform attention magnifies float32 rounding: 1e-4.
        np.testing.assert_allclose(maps[i]["circle"], expected.detach().numpy(), atol=1e-4)


def test_predict_score_and_word_maps(llava, scenes):
    images, captions, _, _ = scenes
    fitted = tuner(llava, scenes, word_key="predicted").fit(images, captions)
    predicted = fitted.predict(images[:3])
    assert predicted.shape == (3,) and all(isinstance(c, str) for c in predicted)
    score = fitted.score(images, captions)
    assert np.isfinite(score) and score < 0
    maps = fitted.word_maps(images[:2], captions[:2])
    assert sorted(maps[0]) == sorted(set(captions[0].replace(",", " ").split()))
    for word_map in maps[0].values():
        assert word_map.shape == (8, 8) and word_map.min() >= 0 and word_map.max() <= 1
    one_head = fitted.word_maps(images[:1], captions[:1], aligned=False, layers=[1], heads=[0])
    assert one_head[0].keys() == maps[0].keys()


def test_bad_inputs_get_clear_errors_or_documented_skips(llava, scenes):
    images, captions, objects, masks = scenes
    model, processor = llava
    with pytest.warns(UserWarning, match="no word of the target texts has a teacher map"):
        fitted = tuner(llava, scenes, teacher=None).fit(
            [{"image": i, "prompt": PROMPT, "teacher_maps": {"zebra": np.ones((8, 8))}} for i in images], captions)
    assert fitted.n_matched_words_ == 0
    # Maps of another square size are area-resized; the words still match.
    big = [{w: np.kron(m, np.ones((2, 2))) for w, m in row.items()} for row in oracle_word_maps(objects, masks, 8)]
    fitted = tuner(llava, scenes, teacher=None).fit([{"image": i, "teacher_maps": m} for i, m in zip(images, big)],
                                                    captions)
    assert fitted.n_matched_words_ == tuner(llava, scenes).fit(images, captions).n_matched_words_ > 0
    with pytest.raises(ValueError, match="square 2-D map"):
        tuner(llava, scenes, teacher=None).fit([{"image": i, "teacher_maps": {"red": np.ones((8, 4))}}
                                                for i in images], captions)
    with pytest.raises(ValueError, match="centre-crops images that are not square"):
        tuner(llava, scenes).fit(images[:, :, :40], captions)
    with pytest.raises(ValueError, match="exactly once"):
        tuner(llava, scenes, prompt="describe the image :").fit(images, captions)
    with pytest.raises(ValueError, match="exactly once"):
        tuner(llava, scenes, prompt="<image> <image> describe").fit(images, captions)
    with pytest.raises(ValueError, match="a caption holds the image placeholder"):
        tuner(llava, scenes).fit(images[:2], ["a red <image> circle", "a blue square"])
    with pytest.raises(TypeError, match="needs its processor"):
        tuner(llava, scenes, backbone=model).fit(images, captions)
    callable_only = CallableAdapter(layers=model.model.language_model.layers, lm_head=model.lm_head,
                                    final_norm=model.model.language_model.norm, build_inputs=None, prefill=None,
                                    step=None, decode=None, eos_token_id=2)
    with pytest.raises(TypeError, match="lacks the fine-tuning members"):
        tuner(llava, scenes, backbone=callable_only).fit(images, captions)
    assert isinstance(as_backbone((model, processor)), HFLlavaAdapter)
