"""HFLlavaAdapter on a tiny random Hugging Face LLaVA built offline: decoding, batching, VISTA's hooks.

The model (a 3-layer Llama behind a 2-layer CLIP tower) and its processor
(a word-level tokenizer with ``<image>`` as a special token) are built from
configs once per module; nothing is downloaded.
"""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from skicml.datasets import make_object_scenes  # noqa: E402
from skicml.utils.images import pil_from_array  # noqa: E402
from skicml.vlm import HFLlavaAdapter, VISTASteerer, VisualSteeringVector, check_backbone, generate  # noqa: E402
from skicml.vlm._tiny_llava import TINY_LLAVA_TOKENS, tiny_random_llava  # noqa: E402
from skicml.vlm._vista._steering import capture_last_states, steering  # noqa: E402

PAD, BOS, EOS, IMAGE = (TINY_LLAVA_TOKENS[k] for k in ("pad", "bos", "eos", "image"))
IMAGE_SIZE, PATCH = 32, 8
N_IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2  # "default" strategy: the CLS feature is dropped
N_LAYERS, HIDDEN = 3, 32
PROMPTS = ["<image> describe", "what color is the circle <image> in the image", "<image> is there a red square"]
PROMPT = "<image> describe"


@pytest.fixture(scope="module")
def llava():
    model, processor = tiny_random_llava(num_layers=N_LAYERS, hidden_size=HIDDEN, image_size=IMAGE_SIZE,
                                         patch_size=PATCH)
    assert processor.image_token_id == model.config.image_token_id == IMAGE
    return model, processor


@pytest.fixture(scope="module")
def adapter(llava):
    return HFLlavaAdapter(*llava)


@pytest.fixture(scope="module")
def images():
    return make_object_scenes(3, image_size=48, random_state=0)[0]


def hf_generate(model, processor, images, prompts, **kwargs):
    """``model.generate`` on the processor's batch: the new tokens of each row, cut at the first end token."""
    batch = processor(images=[pil_from_array(i) for i in images], text=list(prompts), padding=True,
                      return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=8, pad_token_id=PAD, eos_token_id=EOS, **kwargs)
    rows = out[:, batch["input_ids"].shape[1]:].tolist()
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]


def ours(adapter, images, prompts, **kwargs):
    with torch.inference_mode():
        return generate(adapter, adapter.build_inputs(images, prompts), max_new_tokens=8, **kwargs)


def n_hooks(model):
    return sum(len(m._forward_hooks) for m in model.modules())


def steerer(adapter, **params):
    return VISTASteerer(backbone=adapter, **{"prompt": PROMPT, "max_new_tokens": 8, "num_beams": 3, "sla_window": 2,
                                             **params})


# ----------------------------------------------------------------------
# the protocol
# ----------------------------------------------------------------------
def test_the_adapter_follows_the_protocol(llava, adapter):
    model, _ = llava
    check_backbone(adapter)
    assert len(adapter.layers) == N_LAYERS and adapter.layers is model.model.language_model.layers
    assert adapter.mlp_of(adapter.layers[0]) is model.model.language_model.layers[0].mlp
    assert adapter.final_norm is model.model.language_model.norm
    assert adapter.lm_head is model.lm_head
    assert adapter.hidden_size == HIDDEN and adapter.eos_token_id == EOS


def test_inputs_are_left_padded_and_the_negative_is_the_text_alone(adapter, images):
    positive = adapter.build_inputs(images, PROMPTS, with_image=True)
    negative = adapter.build_inputs(images, PROMPTS, with_image=False)
    mask = positive["attention_mask"]
    assert set(positive) == {"input_ids", "attention_mask", "pixel_values"}
    assert bool(mask[:, -1].all()) and not bool(mask[:, 0].all())  # left padding, of unequal rows
    assert (positive["input_ids"] == IMAGE).sum(1).tolist() == [N_IMAGE_TOKENS] * 3
    assert positive["pixel_values"].shape == (3, 3, IMAGE_SIZE, IMAGE_SIZE)
    assert set(negative) == {"input_ids", "attention_mask"}
    assert not bool((negative["input_ids"] == IMAGE).any())
    texts = ["describe", "what color is the circle in the image", "is there a red square"]
    for row, ids, keep, text in zip(range(3), negative["input_ids"], negative["attention_mask"].bool(), texts):
        assert ids[keep].tolist() == adapter.tokenizer(text)["input_ids"], row
        assert ids[keep][0] == BOS
    assert bool(negative["attention_mask"][:, -1].all())


def test_prefill_is_the_models_last_state_and_logits(llava, adapter, images):
    model, _ = llava
    inputs = adapter.build_inputs(images, PROMPTS)
    with torch.inference_mode(), capture_last_states(adapter, [N_LAYERS - 1]) as states:
        hidden, _ = adapter.prefill(inputs)
        last_layer = states[N_LAYERS - 1]
        logits = model(**inputs).logits[:, -1]
        normed, head = adapter.final_norm(last_layer), adapter.lm_head(hidden)
    assert hidden.shape == (3, HIDDEN)
    torch.testing.assert_close(normed, hidden)
    torch.testing.assert_close(head, logits, rtol=1e-5, atol=1e-5)


def test_reorder_takes_the_rows_and_leaves_the_state_as_it_was(adapter, images):
    inputs = adapter.build_inputs(images, PROMPTS)
    index = torch.tensor([2, 0, 0, 1])
    tokens = torch.tensor([7, 8, 9])
    with torch.inference_mode():
        _, state = adapter.prefill(inputs)
        moved = adapter.reorder(state, index)
        assert moved["cache"] is not state["cache"]
        after_reorder, _ = adapter.step(tokens[index], moved)
        before_reorder, _ = adapter.step(tokens, state)  # the original cache still holds 3 rows
    torch.testing.assert_close(after_reorder, before_reorder[index], rtol=1e-5, atol=1e-5)


def test_decode_stops_at_the_end_token_and_skips_special_tokens(adapter):
    ids = adapter.tokenizer("a red circle")["input_ids"][1:]
    assert adapter.decode(ids + [EOS] + ids) == "a red circle"
    assert adapter.decode([IMAGE, *ids, PAD]) == "a red circle"


def test_a_prompt_without_the_placeholder_raises(adapter, images):
    with pytest.raises(ValueError, match="<image>"):
        adapter.build_inputs(images[:1], ["describe the image"])
    with pytest.raises(ValueError, match="<image>"):
        steerer(adapter, prompt="describe the image").fit().predict(images[:1])


# ----------------------------------------------------------------------
# decoding against transformers' own generate
# ----------------------------------------------------------------------
def test_greedy_decoding_equals_hf_generate_with_left_padding(llava, adapter, images):
    model, processor = llava
    expected = hf_generate(model, processor, images, PROMPTS, do_sample=False)
    got = ours(adapter, images, PROMPTS)
    assert got == expected
    assert max(map(len, got)) == 8  # at least one row runs the full budget


def test_positions_count_the_real_tokens_of_each_row_as_hf_generate_does(llava, adapter, images):
    # RoPE attention sees relative positions only, so a wrong offset would not change the tokens: check them.
    model, processor = llava
    language = model.model.language_model
    seen = []

    def record(module, args, kwargs):
        seen.append((kwargs["position_ids"].clone(), kwargs["attention_mask"].clone()))

    handle = language.register_forward_pre_hook(record, with_kwargs=True)
    try:
        ours(adapter, images, PROMPTS)
        mine, seen[:] = list(seen), []
        hf_generate(model, processor, images, PROMPTS, do_sample=False)
        theirs = list(seen)
    finally:
        handle.remove()
    (first, mask), (second, _) = mine[0], mine[1]
    real = mask.bool()
    assert first[real].tolist() == [p for row in real for p in range(int(row.sum()))]
    assert second[:, 0].tolist() == real.sum(1).tolist()
    assert len(mine) == len(theirs)
    for (position, mask), (expected, expected_mask) in zip(mine, theirs):
        assert torch.equal(mask.bool(), expected_mask.bool())
        if position.shape[1] == mask.shape[1]:  # the prefill: padded positions are the models' free choice
            position, expected = position[mask.bool()], expected[mask.bool()]
        assert torch.equal(position, expected)


def test_beam_search_with_one_beam_is_greedy(adapter, images):
    assert ours(adapter, images, PROMPTS, decoding="beam", num_beams=1) == ours(adapter, images, PROMPTS)


def test_beam_search_equals_hf_beam_search(llava, adapter, images):
    model, processor = llava
    got = ours(adapter, images, PROMPTS, decoding="beam", num_beams=3)
    assert all(isinstance(row, list) and all(type(t) is int for t in row) for row in got)
    assert got != ours(adapter, images, PROMPTS)  # beams find other sequences than greedy here
    expected = hf_generate(model, processor, images, PROMPTS, do_sample=False, num_beams=3, early_stopping=True,
                           length_penalty=1.0)
    assert got == expected


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_a_sample_decodes_the_same_alone_and_in_a_batch(adapter, images, decoding):
    batched = ours(adapter, images, PROMPTS, decoding=decoding, num_beams=3)
    alone = [ours(adapter, images[i:i + 1], PROMPTS[i:i + 1], decoding=decoding, num_beams=3)[0] for i in range(3)]
    assert batched == alone
    with torch.inference_mode():
        batched_hidden, _ = adapter.prefill(adapter.build_inputs(images, PROMPTS))
        alone_hidden, _ = adapter.prefill(adapter.build_inputs(images[:1], PROMPTS[:1]))
    torch.testing.assert_close(batched_hidden[:1], alone_hidden, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------
# VISTA through the adapter
# ----------------------------------------------------------------------
@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_zero_strength_vista_is_plain_decoding(adapter, images, decoding):
    plain = steerer(adapter, vsv=False, sla=False, decoding=decoding).fit().predict(images)
    zero = steerer(adapter, vsv_lambda=0.0, sla_gamma=0.0, decoding=decoding).fit().predict(images)
    assert list(plain) == list(zero)
    expected = ours(adapter, images, [PROMPT] * 3, decoding=decoding, num_beams=3)
    assert list(plain) == [adapter.decode(ids) for ids in expected]


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
@pytest.mark.parametrize("site", ["mlp_output", "residual"])
def test_vista_runs_and_leaves_no_hook_and_no_new_weight(llava, adapter, images, site, decoding):
    model, _ = llava
    keys = list(model.state_dict())
    before = n_hooks(model)
    captions = steerer(adapter, vsv_lambda=0.1, sla_gamma=0.3, vsv_site=site, decoding=decoding).fit().predict(images)
    assert captions.shape == (3,) and all(isinstance(c, str) for c in captions)
    assert n_hooks(model) == before == 0
    assert list(model.state_dict()) == keys


def test_the_steering_hooks_act_on_the_models_forward(adapter, images):
    inputs = adapter.build_inputs(images, PROMPTS)
    vectors = torch.randn(3, N_LAYERS, HIDDEN, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        plain, _ = adapter.prefill(inputs)
        with steering(adapter, vectors, list(range(N_LAYERS)), 0.5):
            steered, _ = adapter.prefill(inputs)
        again, _ = adapter.prefill(inputs)
    assert (steered - plain).abs().max() > 1e-3
    torch.testing.assert_close(again, plain)


@pytest.mark.parametrize("decoding", ["greedy", "beam"])
def test_hooks_are_removed_when_generation_raises(llava, adapter, images, monkeypatch, decoding):
    model, _ = llava
    step = adapter.step
    calls = []

    def failing_step(token_ids, state):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("boom")
        return step(token_ids, state)

    monkeypatch.setattr(adapter, "step", failing_step)
    before = n_hooks(model)
    with pytest.raises(RuntimeError, match="boom"):
        steerer(adapter, vsv_lambda=0.1, sla_gamma=0.3, decoding=decoding).fit().predict(images)
    assert len(calls) == 2
    assert n_hooks(model) == before == 0


def test_visual_steering_vectors_have_a_layer_axis_and_do_not_depend_on_the_batch(llava, adapter, images):
    model, _ = llava
    keys = list(model.state_dict())
    vectors = VisualSteeringVector(backbone=adapter, prompt=PROMPT, flatten=False).fit_transform(images)
    assert vectors.shape == (3, N_LAYERS, HIDDEN)
    assert np.isfinite(vectors).all() and np.abs(vectors).max() > 1e-4
    alone = VisualSteeringVector(backbone=adapter, prompt=PROMPT, flatten=False).fit_transform(images[1:2])
    np.testing.assert_allclose(vectors[1:2], alone, rtol=1e-4, atol=1e-5)
    assert list(model.state_dict()) == keys and n_hooks(model) == 0
