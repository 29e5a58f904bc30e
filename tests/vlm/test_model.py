"""TinyVLM, its word tokenizer, the backbone protocol and the decoding loop."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.base import seeded
from skicml.datasets import make_object_scenes
from skicml.vlm import CallableAdapter, TinyVLM, as_backbone, check_backbone, generate, load_tiny_vlm, save_tiny_vlm
from skicml.vlm import scene_vocabulary
from skicml.vlm._pretrain import CaptionBatches, caption_loss
from skicml.vlm._text import DEFAULT_PROMPT, WordTokenizer


@pytest.fixture(scope="module")
def vocabulary():
    return scene_vocabulary()


@pytest.fixture(scope="module")
def model(vocabulary):
    with seeded(0):
        return TinyVLM(vocabulary, hidden_size=32, num_layers=3, head_dim=16).eval()


@pytest.fixture(scope="module")
def images():
    return make_object_scenes(4, random_state=0)[0]


def test_tokenizer_round_trips_captions(vocabulary):
    tokenizer = WordTokenizer(vocabulary)
    _, captions, _ = make_object_scenes(20, random_state=3)
    for caption in captions:
        ids = tokenizer.encode(caption)
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids + [tokenizer.eos_token_id, 7]) == caption


def test_tokenizer_rejects_a_vocabulary_without_its_special_tokens():
    with pytest.raises(ValueError, match="must start with"):
        WordTokenizer(["a", "b"])


def test_kv_cache_gives_the_full_forward_pass(model, images):
    backbone = as_backbone(model)
    inputs = backbone.build_inputs(images[:3], ["describe the image in detail :", "describe :", "image :"])
    nxt = torch.tensor([[6, 9], [11, 12], [30, 31]])
    with torch.no_grad():
        _, cache = model(**inputs)
        stepped, _ = model(nxt, cache=cache)
        full, _ = model(torch.cat([inputs["token_ids"], nxt], 1), images=inputs["images"],
                        token_mask=torch.cat([inputs["token_mask"], torch.ones(3, 2, dtype=torch.bool)], 1))
    torch.testing.assert_close(stepped, full[:, -2:], rtol=1e-5, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(pad=st.integers(1, 5))
def test_left_padding_does_not_change_a_prompt(model, images, pad):
    backbone = as_backbone(model)
    plain = backbone.build_inputs(images[:1], DEFAULT_PROMPT)
    padded = {"images": plain["images"],
              "token_ids": torch.cat([torch.zeros(1, pad, dtype=torch.long), plain["token_ids"]], 1),
              "token_mask": torch.cat([torch.zeros(1, pad, dtype=torch.bool), plain["token_mask"]], 1)}
    with torch.no_grad():
        a, _ = backbone.prefill(plain)
        b, _ = backbone.prefill(padded)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_greedy_equals_one_beam_and_a_sample_does_not_depend_on_its_batch(model, images):
    backbone = as_backbone(model)
    prompts = [DEFAULT_PROMPT, "describe :", DEFAULT_PROMPT, "image :"]
    with torch.inference_mode():
        inputs = backbone.build_inputs(images, prompts)
        greedy = generate(backbone, inputs, max_new_tokens=10)
        beam = generate(backbone, inputs, max_new_tokens=10, decoding="beam", num_beams=1)
        alone = generate(backbone, backbone.build_inputs(images[1:2], prompts[1:2]), max_new_tokens=10)
        beams = generate(backbone, inputs, max_new_tokens=10, decoding="beam", num_beams=3)
    assert greedy == beam
    assert alone[0] == greedy[1]
    assert len(beams) == 4 and all(isinstance(t, int) for row in beams for t in row)
    with torch.inference_mode():
        assert generate(backbone, inputs, max_new_tokens=0) == [[]] * 4


def test_nucleus_sampling_is_seeded(model, images):
    backbone = as_backbone(model)
    inputs = backbone.build_inputs(images, DEFAULT_PROMPT)

    def sample(seed):
        with torch.inference_mode():
            return generate(backbone, inputs, max_new_tokens=8, decoding="nucleus", top_p=0.9,
                            generator=torch.Generator().manual_seed(seed))

    assert sample(0) == sample(0)
    assert sample(0) != sample(1)


def test_bad_inputs_get_clear_errors(model, images):
    backbone = as_backbone(model)
    with pytest.raises(ValueError, match="non-empty string"):
        backbone.build_inputs(images[:1], "   ")
    with pytest.raises(ValueError, match="outside TinyVLM's vocabulary"):
        backbone.build_inputs(images[:1], "describe the zebra")
    with pytest.raises(ValueError, match=r"images of shape \(48, 48, 3\)"):
        backbone.build_inputs(np.zeros((1, 32, 32, 3), np.uint8), DEFAULT_PROMPT)
    with pytest.raises(ValueError, match="got 2 prompts for 1 images"):
        backbone.build_inputs(images[:1], ["describe :", "image :"])


def test_a_backbone_missing_protocol_members_is_named():
    class Half:
        layers = [torch.nn.Linear(2, 2)]

    with pytest.raises(TypeError, match=r"lacks \['mlp_of'"):
        check_backbone(Half())


def test_callable_adapter_finds_the_mlp_by_name(model):
    adapter = CallableAdapter(layers=model.layers, lm_head=model.lm_head, final_norm=model.norm,
                              build_inputs=None, prefill=None, step=None, decode=None, eos_token_id=2)
    assert adapter.mlp_of(model.layers[0]) is model.layers[0].mlp
    assert adapter.hidden_size == 32
    with pytest.raises(ValueError, match="reorder"):
        adapter.reorder({}, torch.tensor([0]))


def test_save_and_load_round_trip_in_half_precision(model, images, tmp_path):
    path = tmp_path / "tiny.pt"
    save_tiny_vlm(path, model, {"weights": "random"})
    loaded = load_tiny_vlm(path)
    assert loaded.vocabulary == model.vocabulary and loaded.config == model.config
    backbone, original = as_backbone(loaded), as_backbone(model)
    with torch.inference_mode():
        a = generate(original, original.build_inputs(images, DEFAULT_PROMPT), max_new_tokens=6)
        b = generate(backbone, backbone.build_inputs(images, DEFAULT_PROMPT), max_new_tokens=6)
    assert a == b


def test_caption_loss_trains_and_text_only_batches_come_at_their_rate(vocabulary):
    images, captions, _ = make_object_scenes(64, random_state=1)
    source = CaptionBatches(images, captions, WordTokenizer(vocabulary), DEFAULT_PROMPT, 16, 0.5, seed=0)
    with_images = [("images" in source.sample()) for _ in range(200)]
    assert 0.35 < np.mean(with_images) < 0.65
    with seeded(0):
        net = TinyVLM(vocabulary, hidden_size=16, num_layers=1, head_dim=8)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    batch = source.sample()
    first = float(caption_loss(net, batch).detach())
    for _ in range(30):
        loss = caption_loss(net, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert float(caption_loss(net, batch).detach()) < 0.5 * first
