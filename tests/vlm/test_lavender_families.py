"""LavenderTuner through the family adapters: captured attention equals eager attention, a short fit learns.

Tiny random models of each family (:func:`skicml.vlm._tiny_families.tiny_random_vlm`),
built once per module; nothing is downloaded.
"""

import copy

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from skicml.datasets import make_object_scenes  # noqa: E402
from skicml.nn.lora import LoRA  # noqa: E402
from skicml.vlm import LavenderTuner, OracleMaskTeacher, as_backbone  # noqa: E402
from skicml.vlm._tiny_families import FAMILIES, FAMILY_PROMPTS, tiny_random_vlm  # noqa: E402

_BUILT = {}
# Where each family's Lavender reads the image, and the grid it reads on the tiny models.
GRIDS = {"llava_next": (4, 4), "llava_onevision": (4, 4), "qwen2_vl": (2, 2), "qwen2_5_vl": (2, 2),
         "mllama": (4, 4), "idefics3": (2, 2), "smolvlm": (2, 2)}


def built(family):
    if family not in _BUILT:
        _BUILT[family] = tiny_random_vlm(family)
    return _BUILT[family]


@pytest.fixture(scope="module")
def scenes():
    return make_object_scenes(6, max_objects=3, image_size=32, return_masks=True, random_state=0)


def prompt(family):
    return FAMILY_PROMPTS[family] + " :"


def eager_reference(adapter, inputs, layers, rows):
    """Eager attention's probabilities at ``rows``, on the keys the adapter reads, and the eager copy."""
    eager = copy.deepcopy(adapter.model)
    eager.set_attn_implementation("eager")
    out = eager(**adapter.with_model(eager)._teacher_inputs(inputs), output_attentions=True)
    if adapter.family == "mllama":  # cross-attention: every vision key
        picked = [torch.stack([out.attentions[layer][b, :, p] for b, p in rows.tolist()]) for layer in layers]
    else:
        keys = adapter._image_keys(inputs)
        picked = [torch.stack([out.attentions[layer][b, :, p][:, keys[b]] for b, p in rows.tolist()])
                  for layer in layers]
    return torch.stack(picked, dim=1), eager


def check_gradients(ours, eager, prefix):
    for (name, p), q in zip(ours.named_parameters(), eager.parameters()):
        if p.grad is not None and prefix in name:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("family", FAMILIES)
def test_captured_attention_equals_eager_attention_and_its_gradients(family, scenes):
    images, captions, _, _ = scenes
    model, processor = built(family)
    adapter = as_backbone(copy.deepcopy(model), processor)
    inputs, words = adapter.caption_batch(images[:3], prompt(family), list(captions[:3]))
    assert adapter.image_grid == GRIDS[family]
    assert [w for w, _ in words[0]] == captions[0].replace(",", " ").split()
    rows = inputs["target"].nonzero()
    layers = [1, 3] if family == "mllama" else [0, 2]
    if family == "mllama":
        attention = adapter.cross_attention_probabilities(inputs, layers, rows)
    else:
        _, attention = adapter.teacher_forced(inputs, layers, rows)
    reference, eager = eager_reference(adapter, inputs, layers, rows)
    torch.testing.assert_close(attention, reference, atol=1e-6, rtol=1e-5)
    weight = torch.rand_like(attention)
    (attention * weight).sum().backward()
    (reference * weight).sum().backward()
    check_gradients(adapter.model, eager, "layers")
    assert not any(m._forward_hooks for m in adapter.model.modules())
    _, maps = adapter.teacher_forced(inputs, layers, rows)
    assert maps.shape == (len(rows), 2, 4, GRIDS[family][0] * GRIDS[family][1])


def test_mllama_tiles_land_on_their_canvas_cells():
    adapter = as_backbone(*built("mllama"))
    wide, tall = np.zeros((16, 32, 3), np.uint8), np.zeros((32, 16, 3), np.uint8)  # 1 x 2 and 2 x 1 tiles
    for image, (rows, cols) in ((wide, (1, 2)), (tall, (2, 1))):
        inputs, _ = adapter.caption_batch([image], prompt("mllama"), ["a red circle"])
        ratios = adapter._config.vision_config.supported_aspect_ratios
        assert tuple(ratios[int(inputs["aspect_ratio_ids"][0, 0]) - 1]) == (rows, cols)
        assert inputs["image_content"][0].tolist() == [2 * rows, 2 * cols]
        from skicml.vlm._hf_mllama import _CanvasLayout

        layout = _CanvasLayout(adapter, inputs)
        layout.grid = (2 * rows, 2 * cols)  # the canvas at its own resolution, to read the cells
        probabilities = torch.zeros(1, 1, 4 * 5)
        probabilities[0, 0, 1 * 5 + 1 + 1] = 1.0  # tile 1, patch (0, 1), after the tile's CLS
        cell = int(layout.maps(probabilities, 0)[0, 0].argmax())
        expected = (0, 3) if cols == 2 else (2, 1)  # tile 1 sits right of tile 0, or below it
        assert divmod(cell, 2 * cols) == expected
    with pytest.raises(ValueError, match="self-attention layer"):
        adapter.teacher_forced(inputs, [0], torch.tensor([[0, 3]]))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_short_fit_lowers_the_alignment_loss_and_merges_lora_exactly(family, scenes):
    images, captions, objects, masks = scenes
    model, processor = built(family)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fitted = LavenderTuner(backbone=(model, processor), teacher=OracleMaskTeacher(images, objects, masks),
                           prompt=prompt(family), max_epochs=4, batch_size=3, lr=3e-2, attn_resolution=4,
                           random_state=0).fit(images, captions)
    losses = [epoch["alignment"] for epoch in fitted.history_]
    assert fitted.n_matched_words_ > 0 and losses[-1] < losses[0]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the caller's model is untouched
    after = fitted.backbone_.model.state_dict()
    changed = {k for k in after if not torch.equal(before[k], after[k])}
    assert changed and all(k.endswith(("q_proj.weight", "v_proj.weight")) for k in changed)
    assert not any(m._forward_hooks for m in fitted.backbone_.model.modules())
    # The merge is exact: adapters on a copy give the logits their merged weights give.
    adapter = as_backbone(copy.deepcopy(model), processor)
    torch.manual_seed(1)
    lora = LoRA(adapter.language_model, adapter.default_lora_targets, r=2, dropout=0.0)
    for up in lora.up.values():
        torch.nn.init.normal_(up.weight, std=0.1)
    inputs, _ = adapter.caption_batch(images[:2], prompt(family), list(captions[:2]))
    with torch.no_grad(), lora.attached(adapter.language_model):
        adapted, _ = adapter.teacher_forced(inputs)
    lora.merge(adapter.language_model)
    with torch.no_grad():
        merged, _ = adapter.teacher_forced(inputs)
    torch.testing.assert_close(merged, adapted, atol=1e-5, rtol=1e-5)


def test_qwen_refuses_a_caption_batch_of_several_grids(scenes):
    images, captions, _, _ = scenes
    adapter = as_backbone(*built("qwen2_vl"))
    mixed = [images[0], np.zeros((64, 64, 3), np.uint8)]
    with pytest.raises(ValueError, match="qwen2_vl grids"):
        adapter.caption_batch(mixed, prompt("qwen2_vl"), list(captions[:2]))


def test_mllamas_official_canvas_is_there_for_comparison_with_its_flaws(scenes):
    images, captions, _, _ = scenes
    model, processor = built("mllama")
    official = as_backbone(model, processor, canvas="official")
    assert official.image_grid == (32, 32) and official.with_model(model).canvas == "official"
    tall = np.zeros((32, 16, 3), np.uint8)  # 2 x 1 tiles
    inputs, _ = official.caption_batch([tall], prompt("mllama"), ["a red circle"])
    from skicml.vlm._hf_mllama import _CanvasLayout

    layout = _CanvasLayout(official, inputs)
    layout.grid = (3, 6)  # the canvas at its own size: 2 tiles of 5 keys, each folded to 3 x 3
    probabilities = torch.zeros(1, 1, 4 * 5)
    probabilities[0, 0, 5:10] = 1.0  # every key of tile 1
    canvas = layout.maps(probabilities, 0).reshape(3, 6)
    assert canvas[:, 3:].sum() > 0 and canvas[:, :3].sum() == 0  # tile 1 of a tall image lands right of tile 0
    rows = inputs["target"].nonzero()
    _, maps = official.teacher_forced(inputs, [1, 3], rows)
    assert maps.shape == (len(rows), 2, 4, 32 * 32)
    with pytest.raises(ValueError, match="canvas="):
        as_backbone(model, processor, canvas="square")


@pytest.mark.parametrize("family", ["llava_next", "llava_onevision"])
def test_the_base_block_leads_each_any_resolution_image_and_the_newlines_close_the_canvas_rows(family):
    # Lavender reads the first P x P image tokens as the base image: pin the layout transformers packs.
    model, processor = built(family)
    adapter = as_backbone(model, processor)
    image = np.random.default_rng(0).integers(0, 255, (48, 40, 3), dtype=np.uint8)
    inputs = adapter.build_inputs([image], [FAMILY_PROMPTS[family]])
    with torch.no_grad():
        features = model.model.get_image_features(inputs["pixel_values"], inputs["image_sizes"])[0]
        hidden = model.model.vision_tower(inputs["pixel_values"][0, :1], output_hidden_states=True)
        base = hidden.hidden_states[model.config.vision_feature_layer]
        if model.config.vision_feature_select_strategy == "default":
            base = base[:, 1:]
        base = model.model.multi_modal_projector(base)[0]
    side = adapter.image_grid[0]
    assert len(features) == int((inputs["input_ids"] == adapter.image_token_id).sum())
    torch.testing.assert_close(features[:side * side], base)
    newline = (features == model.model.image_newline).all(-1).nonzero()[:, 0]
    assert len(newline) and bool((newline >= side * side).all())
    row = int(newline[0]) - side * side + 1  # w' + 1: each canvas row and its newline
    assert newline.tolist() == [side * side + (r + 1) * row - 1 for r in range(len(newline))]
