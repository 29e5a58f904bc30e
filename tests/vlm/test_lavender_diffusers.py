"""DiffusersTeacher on a tiny random Stable-Diffusion-style pipeline built offline from configs.

The pipeline (a two-level U-Net of width 32 with cross-attention at its 8 x 8
level, a two-level VAE, a two-layer CLIP text encoder, a DDIM scheduler of
100 steps, the tiny LLaVA's word-level tokenizer) is random: these tests
check the mechanics of reading its cross-attention, never its quality.
Skipped where the optional ``diffusers`` is not installed.
"""

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")
pytest.importorskip("transformers")

from skicml.base import seeded  # noqa: E402
from skicml.datasets import make_object_scenes  # noqa: E402
from skicml.vlm import DiffusersTeacher, LavenderTuner, TinyVLM, scene_vocabulary  # noqa: E402
from skicml.vlm._grounding import minmax  # noqa: E402
from skicml.vlm._lavender._diffusers_teacher import _CaptureProcessor  # noqa: E402
from skicml.vlm._tiny_llava import _tokenizer  # noqa: E402

CAPTIONS = ["a red circle", "a blue square , a green circle", "a small yellow cross"]


def tiny_pipeline(split_words=()):
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(32, 32), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=8, norm_num_groups=8)
    vae = AutoencoderKL(block_out_channels=[16, 16], in_channels=3, out_channels=3, latent_channels=4,
                        down_block_types=["DownEncoderBlock2D"] * 2, up_block_types=["UpDecoderBlock2D"] * 2,
                        norm_num_groups=8, sample_size=16)
    text_encoder = CLIPTextModel(CLIPTextConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4,
                                                num_hidden_layers=2, vocab_size=96, max_position_embeddings=32,
                                                bos_token_id=1, eos_token_id=2, pad_token_id=0))
    tokenizer = _tokenizer(96, split_words)
    tokenizer.model_max_length = 32
    scheduler = DDIMScheduler(num_train_timesteps=100, beta_schedule="linear", beta_start=1e-4, beta_end=0.02,
                              clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    return StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False).to("cpu")


@pytest.fixture(scope="module")
def pipe():
    return tiny_pipeline()


@pytest.fixture(scope="module")
def images():
    return make_object_scenes(3, random_state=0)[0]


def test_maps_cover_the_caption_words_and_are_scaled(pipe, images):
    teacher = DiffusersTeacher(pipe, resolution=8)
    maps = teacher.word_maps(images, CAPTIONS)
    assert [sorted(m) for m in maps] == [sorted(set(c.replace(",", " ").split())) for c in CAPTIONS]
    for word_map in maps[1].values():
        assert word_map.shape == (8, 8) and word_map.dtype == np.float32
        assert word_map.min() == 0.0 and word_map.max() == pytest.approx(1.0)
    # Down and up blocks at the 8 x 8 level; the middle block is left out by default.
    assert teacher.layers_ and all(name.startswith(("down_blocks", "up_blocks")) for name in teacher.layers_)
    assert teacher.word_maps(images[:1], CAPTIONS[:1], resolution=4)[0]["red"].shape == (4, 4)


def test_recording_leaves_the_unet_output_and_its_processors_as_they_were(pipe, images):
    originals = {name: type(p) for name, p in pipe.unet.attn_processors.items()}
    latents, t = torch.randn(2, 4, 8, 8), torch.tensor([10, 10])
    context = pipe.text_encoder(torch.randint(4, 30, (2, 7)))[0]
    with torch.no_grad():
        plain = pipe.unet(latents, t, encoder_hidden_states=context).sample

        class Store:
            def __init__(self):
                self.seen = []

            def wants(self, name):
                return True

            def add(self, name, probabilities):
                self.seen.append(probabilities)

        store = Store()
        pipe.unet.set_attn_processor({name: _CaptureProcessor(p, name, store)
                                      for name, p in pipe.unet.attn_processors.items()})
        recorded = pipe.unet(latents, t, encoder_hidden_states=context).sample
        pipe.unet.set_attn_processor({name: p.original for name, p in pipe.unet.attn_processors.items()})
    torch.testing.assert_close(recorded, plain)
    assert len(store.seen) == 4  # the cross-attention layers (down 1, middle 1, up 2), not the self-attention ones
    for probabilities in store.seen:
        torch.testing.assert_close(probabilities.sum(-1), torch.ones(probabilities.shape[:2]))
    DiffusersTeacher(pipe, resolution=8).word_maps(images[:1], CAPTIONS[:1])
    assert {name: type(p) for name, p in pipe.unet.attn_processors.items()} == originals


def test_a_known_attention_peak_survives_to_the_map(pipe, images, monkeypatch):
    # Every cross-attention layer is made to send "red" (column 2: <bos> a red circle) to the top-left quarter
    # of its grid and "circle" (column 3) to the bottom-right: the map must keep rows and columns apart.
    def fake(query, key, attention_mask=None):
        heads_batch, cells, tokens = query.shape[0], query.shape[1], key.shape[1]
        side = int(cells ** 0.5)
        rows, cols = np.divmod(np.arange(cells), side)
        probabilities = torch.full((heads_batch, cells, tokens), 0.01)
        probabilities[:, torch.as_tensor((rows < side // 2) & (cols < side // 2)), 2] = 1.0
        probabilities[:, torch.as_tensor((rows >= side // 2) & (cols >= side // 2)), 3] = 1.0
        return probabilities

    for module in pipe.unet.modules():
        if hasattr(module, "get_attention_scores"):
            monkeypatch.setattr(module, "get_attention_scores", fake)
    maps = DiffusersTeacher(pipe, resolution=8).word_maps(images[:1], ["a red circle"])[0]
    assert maps["red"][:4, :4].min() == 1.0 and maps["red"][4:, :].max() == 0.0 and maps["red"][:, 4:].max() == 0.0
    assert maps["circle"][4:, 4:].min() == 1.0 and maps["circle"][:4, :].max() == 0.0


def test_a_word_of_several_tokens_averages_their_columns(images):
    pipe = tiny_pipeline(split_words=["circle"])
    teacher = DiffusersTeacher(pipe, resolution=8)
    attention, words = teacher.word_attention(images[:1], ["a red circle"])
    assert words[0] == {"a": [1], "red": [2], "circle": [3, 4]}  # <bos> a red cir ##cle <eos>
    expected = minmax(attention[0][:, :, [3, 4]].mean(-1))
    np.testing.assert_allclose(teacher.word_maps(images[:1], ["a red circle"])[0]["circle"], expected, atol=1e-6)


def test_an_images_maps_do_not_depend_on_its_batch(pipe, images):
    alone = DiffusersTeacher(pipe, resolution=8, batch_size=1).word_maps(images, CAPTIONS)
    together = DiffusersTeacher(pipe, resolution=8, batch_size=3).word_maps(images, CAPTIONS)
    for a, b in zip(alone, together):
        for word in a:
            np.testing.assert_allclose(a[word], b[word], atol=1e-4)


def test_ddim_inversion_with_guidance_reads_every_step_up_to_the_highest_level(pipe, images):
    noised = DiffusersTeacher(pipe, resolution=8).word_maps(images[:2], CAPTIONS[:2])
    teacher = DiffusersTeacher(pipe, resolution=8, inversion="ddim", n_inversion_steps=20, guidance=3.0,
                               from_where=("mid",))
    inverted = teacher.word_maps(images[:2], CAPTIONS[:2])
    assert teacher.layers_ == ["mid_block.attentions.0.transformer_blocks.0.attn2"]
    assert inverted[0].keys() == noised[0].keys()
    assert any(not np.allclose(inverted[0][w], noised[0][w]) for w in noised[0])


def test_bad_inputs_get_clear_errors(pipe, images):
    with pytest.raises(TypeError, match="never a hub id"):
        DiffusersTeacher("CompVis/stable-diffusion-v1-4")
    with pytest.raises(TypeError, match="lacks"):
        DiffusersTeacher(object())
    with pytest.raises(ValueError, match="noise_levels"):
        DiffusersTeacher(pipe, noise_levels=(0.1, 1.5))
    with pytest.raises(ValueError, match="from_where"):
        DiffusersTeacher(pipe, from_where=("left",))
    with pytest.raises(ValueError, match="one per image"):
        DiffusersTeacher(pipe).word_maps(images, CAPTIONS[:2])
    with pytest.raises(ValueError, match="no cross-attention layer was read"):
        DiffusersTeacher(pipe, attention_resolution=3).word_maps(images[:1], CAPTIONS[:1])
    # The processors are restored after a failure too.
    assert not any(isinstance(p, _CaptureProcessor) for p in pipe.unet.attn_processors.values())


def test_the_tuner_aligns_to_a_diffusers_teacher(pipe):
    images, captions, _ = make_object_scenes(6, min_objects=1, max_objects=2, random_state=1)
    with seeded(0):
        model = TinyVLM(scene_vocabulary(), hidden_size=32, num_layers=2, head_dim=16)
    fitted = LavenderTuner(backbone=model, teacher=DiffusersTeacher(pipe, resolution=8), max_epochs=2,
                           batch_size=3, lr=1e-2, random_state=0).fit(images, captions)
    assert fitted.teacher_ is fitted.teacher  # not an estimator: used as it is, never cloned
    assert fitted.n_matched_words_ > 0 and all(epoch["alignment"] > 0 for epoch in fitted.history_)
