"""The family adapters on tiny random Hugging Face models built offline: decoding equals transformers' own.

One model a family (LLaVA-NeXT, LLaVA-OneVision, Qwen2-VL, Qwen2.5-VL,
Mllama, Idefics3, SmolVLM; :func:`skicml.vlm._tiny_families.tiny_random_vlm`),
built once per module. Every batch mixes prompts and image sizes.
"""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from skicml.datasets import make_object_scenes  # noqa: E402
from skicml.utils.images import pil_from_array  # noqa: E402
from skicml.vlm import HFLlavaAdapter, VISTASteerer, as_backbone, check_backbone, generate  # noqa: E402
from skicml.vlm._tiny_families import FAMILIES, FAMILY_PROMPTS, tiny_random_vlm  # noqa: E402
from skicml.vlm._vista._steering import steering_vectors  # noqa: E402

NESTED = {"mllama", "idefics3", "smolvlm"}  # the processor takes one image list a sample
ADAPTERS = {"llava_next": "HFLlavaNextAdapter", "llava_onevision": "HFLlavaNextAdapter",
            "qwen2_vl": "HFQwen2VLAdapter", "qwen2_5_vl": "HFQwen2VLAdapter", "mllama": "HFMllamaAdapter",
            "idefics3": "HFIdefics3Adapter", "smolvlm": "HFIdefics3Adapter"}
_BUILT = {}


def built(family):
    if family not in _BUILT:
        _BUILT[family] = tiny_random_vlm(family)
    return _BUILT[family]


@pytest.fixture(scope="module")
def images():
    scenes = list(make_object_scenes(3, image_size=48, random_state=0)[0])
    return [scenes[0], np.ascontiguousarray(scenes[1][:, :40]), np.ascontiguousarray(scenes[2][:30])]


@pytest.fixture(scope="module")
def squares():  # the estimators read images of one shape
    return make_object_scenes(3, image_size=40, random_state=1)[0]


def prompts(family):
    p = FAMILY_PROMPTS[family]
    return [p, p + " the image", "what color is " + p]


def hf_batch(family, images, texts):
    model, processor = built(family)
    pictures = [pil_from_array(i) for i in images]
    batch = processor(images=[[p] for p in pictures] if family in NESTED else pictures, text=texts, padding=True,
                      return_tensors="pt")
    batch.pop("token_type_ids", None)
    return batch


def hf_generate(family, images, texts, **kwargs):
    model, _ = built(family)
    adapter = as_backbone(*built(family))
    batch = hf_batch(family, images, texts)
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=6, do_sample=False, eos_token_id=adapter.eos_token_id,
                             pad_token_id=0, **kwargs)
    return batch, out


def cut(rows, eos):
    return [row[: row.index(eos)] if eos in row else row for row in rows]


def n_hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.mark.parametrize("family", FAMILIES)
def test_as_backbone_picks_the_familys_adapter_and_the_plain_one_refuses_it(family):
    model, processor = built(family)
    adapter = check_backbone(as_backbone(model, processor))
    assert type(adapter).__name__ == ADAPTERS[family] and adapter.family == family
    assert type(as_backbone((model, processor))) is type(adapter)
    assert adapter.layers[0] is adapter.language_model.layers[0] and adapter.lm_head is model.lm_head
    # The plain adapter refuses every family that has its own, naming it (Qwen and Mllama would decode wrongly).
    with pytest.raises(ValueError, match=f"'{family}'.*as_backbone"):
        HFLlavaAdapter(model, processor)


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_decoding_equals_generate_logit_for_logit(family, images):
    model, _ = built(family)
    adapter = as_backbone(*built(family))
    batch, out = hf_generate(family, images, prompts(family), output_logits=True, return_dict_in_generate=True)
    new = out.sequences[:, batch["input_ids"].shape[1]:]
    with torch.inference_mode():
        hidden, state = adapter.prefill(adapter.build_inputs(images, prompts(family)))
        ours = [adapter.lm_head(hidden)]
        for t in range(new.shape[1] - 1):
            hidden, state = adapter.step(new[:, t], state)
            ours.append(adapter.lm_head(hidden))
    for step, (mine, theirs) in enumerate(zip(ours, out.logits)):
        torch.testing.assert_close(mine, theirs, atol=2e-5, rtol=1e-5, msg=f"step {step}")
    with torch.inference_mode():
        got = generate(adapter, adapter.build_inputs(images, prompts(family)), max_new_tokens=6)
    assert got == cut(new.tolist(), adapter.eos_token_id)


@pytest.mark.parametrize("family", FAMILIES)
def test_beam_search_equals_generate_and_a_row_alone_equals_it_in_the_batch(family, images):
    adapter = as_backbone(*built(family))
    batch, out = hf_generate(family, images, prompts(family), num_beams=3, early_stopping=True, length_penalty=1.0)
    with torch.inference_mode():
        got = generate(adapter, adapter.build_inputs(images, prompts(family)), max_new_tokens=6, decoding="beam",
                       num_beams=3)
        together, _ = adapter.prefill(adapter.build_inputs(images, prompts(family)))
        alone, _ = adapter.prefill(adapter.build_inputs(images[2:], prompts(family)[2:]))
    assert got == cut(out[:, batch["input_ids"].shape[1]:].tolist(), adapter.eos_token_id)
    torch.testing.assert_close(together[2:], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_zero_strength_vista_is_plain_decoding_and_leaves_no_hook(family, squares, monkeypatch):
    images = squares
    model, _ = built(family)
    adapter = as_backbone(*built(family))
    prompt = FAMILY_PROMPTS[family]
    params = dict(backbone=adapter, prompt=prompt, max_new_tokens=5, sla_window=1)
    for decoding in ("greedy", "beam"):
        plain = VISTASteerer(vsv=False, sla=False, decoding=decoding, num_beams=2, **params).fit().predict(images)
        zero = VISTASteerer(vsv_lambda=0.0, sla_gamma=0.0, decoding=decoding, num_beams=2,
                            **params).fit().predict(images)
        assert list(plain) == list(zero)
    with torch.inference_mode():
        expected = generate(adapter, adapter.build_inputs(images, [prompt] * 3), max_new_tokens=5)
    greedy = VISTASteerer(vsv=False, sla=False, **params).fit().predict(images)
    assert list(greedy) == [adapter.decode(ids) for ids in expected]
    steered = VISTASteerer(vsv_lambda=0.1, sla_gamma=0.3, vsv_site="residual", **params).fit().predict(images)
    assert steered.shape == (3,) and n_hooks(model) == 0
    step = adapter.step

    def failing_step(token_ids, state):
        raise RuntimeError("boom")

    monkeypatch.setattr(adapter, "step", failing_step)
    with pytest.raises(RuntimeError, match="boom"):
        VISTASteerer(vsv_lambda=0.1, sla_gamma=0.3, **params).fit().predict(images)
    monkeypatch.setattr(adapter, "step", step)
    assert n_hooks(model) == 0


# ----------------------------------------------------------------------
# family-specific traps
# ----------------------------------------------------------------------
@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen_positions_are_3d_and_never_touch_the_models_rope_deltas(family, images):
    model, processor = built(family)
    adapter = as_backbone(model, processor)
    batch, out = hf_generate(family, images, prompts(family), output_logits=True, return_dict_in_generate=True)
    stored = model.model.rope_deltas.clone()
    inputs = adapter.build_inputs(images, prompts(family))
    with torch.inference_mode():
        _, state = adapter.prefill(inputs)
        positions, _ = adapter.rope_index(inputs["input_ids"], inputs["attention_mask"], inputs["image_grid_thw"])
        # VISTA's negative context: a text-only forward between the prefill and the steps.
        steering_vectors(adapter, images, prompts(family), [0, 1])
        hidden, _ = adapter.step(out.sequences[:, batch["input_ids"].shape[1]], state)
        logits = adapter.lm_head(hidden)
    assert torch.equal(model.model.rope_deltas, stored)
    torch.testing.assert_close(logits, out.logits[1], atol=2e-5, rtol=1e-5)
    # After the image the height and width channels part from the time channel: 2-D positions would be wrong.
    assert positions.shape[0] == 3 and not torch.equal(positions[0], positions[1])
    with pytest.raises(ValueError, match="vision_start"):
        adapter.build_inputs(images[:1], ["<|image_pad|> describe"])
    negative = adapter.build_inputs(images, prompts(family), with_image=False)["input_ids"]
    assert not bool(torch.isin(negative, torch.tensor([3, 4, 5])).any())  # the whole vision triple is cut


def test_mllama_steering_vectors_carry_the_skipped_cross_layers_and_steer_self_layers_at_the_mlp(squares):
    images = squares
    adapter = as_backbone(*built("mllama"))
    assert adapter.cross_attention_layers == [1, 3] and adapter.mlp_steering_layers == [0, 2]
    prompt = FAMILY_PROMPTS["mllama"]
    with torch.inference_mode():
        vectors = steering_vectors(adapter, images, [prompt] * 3, [0, 1, 2, 3])
    assert bool((vectors.norm(dim=-1) > 1e-4).all())  # no layer's vector is silently zero
    steerer = VISTASteerer(backbone=adapter, prompt=prompt, max_new_tokens=3, sla_window=1).fit()
    assert steerer.vsv_layers_ == [0, 2]
    with pytest.raises(ValueError, match="mllama"):
        VISTASteerer(backbone=adapter, prompt=prompt, max_new_tokens=3, vsv_layers=[1],
                     sla_window=1).fit().predict(images)


@pytest.mark.parametrize("module", ["_hf_llava_next", "_hf_qwen2_vl", "_hf_mllama", "_hf_idefics3"])
def test_the_adapter_modules_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"skicml.vlm.{module}"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(("family", "missing"), [("qwen2_vl", "multimodal rotary"), ("mllama", "cross-attention")])
def test_an_unknown_family_is_refused_for_what_the_plain_adapter_lacks(family, missing):
    model, processor = built(family)
    model.config.model_type = "some_new_vlm"  # a family no adapter knows, built like this one
    try:
        with pytest.raises(ValueError, match=f"'some_new_vlm'.*{missing}"):
            as_backbone(model, processor)
    finally:
        del model.config.model_type
    assert model.config.model_type == family
