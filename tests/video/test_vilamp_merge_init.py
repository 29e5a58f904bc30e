"""``merge_init="identity"``: the learnable merge (the official SigPooling) starting at the parameter-free rule."""

import numpy as np
import pytest
import torch

from skicml.datasets import make_needle_embeddings
from skicml.video import DifferentialFeatureMerger, VideoEmbedding, ViLAMPClassifier


def _video(seed=0, n_frames=12, n_patches=9, dim=6):
    generator = torch.Generator().manual_seed(seed)
    patches = torch.randn(n_frames, n_patches, dim, generator=generator)
    return patches, torch.randn(dim, generator=generator), torch.tensor([0, 5, 9])


@pytest.mark.parametrize("temperature", [0.01, 1.0])
def test_identity_maps_give_the_parameter_free_merge(temperature):
    patches, query, keyframes = _video()
    free = DifferentialFeatureMerger(temperature=temperature)
    torch.manual_seed(0)
    learned = DifferentialFeatureMerger(dim=6, learnable=True, temperature=temperature, init="identity")
    for name in ("query_map", "patch_query_map", "reference_map", "patch_reference_map"):
        layer = getattr(learned, name)
        # The start: the identity plus N(0, 0.02), zero bias.
        assert layer.bias.abs().max() == 0
        deviation = layer.weight.detach() - torch.eye(6)
        assert 0 < deviation.std() < 0.04
    expected, expected_types, expected_weights = free(patches, query, keyframes, return_weights=True)
    with torch.no_grad():
        tokens, types, weights = learned(patches, query, keyframes, return_weights=True)
    assert torch.equal(types, expected_types)
    # Near the rule from the first step: at the softer temperature the merge weights barely move.
    if temperature == 1.0:
        merged = ~torch.isnan(expected_weights)
        torch.testing.assert_close(weights[merged], expected_weights[merged], atol=0.02, rtol=0)
    # With the noise removed the maps are the identity and the merge is the parameter-free rule exactly.
    with torch.no_grad():
        for name in ("query_map", "patch_query_map", "reference_map", "patch_reference_map"):
            getattr(learned, name).weight.copy_(torch.eye(6))
        tokens, types, weights = learned(patches, query, keyframes, return_weights=True)
    torch.testing.assert_close(tokens, expected, atol=1e-5, rtol=1e-5)
    merged = ~torch.isnan(expected_weights)
    torch.testing.assert_close(weights[merged], expected_weights[merged], atol=1e-5, rtol=1e-5)


def test_normal_init_is_the_official_one():
    torch.manual_seed(0)
    merger = DifferentialFeatureMerger(dim=6, learnable=True)
    assert merger.query_map.weight.detach().abs().max() < 0.1  # N(0, 0.02), nowhere near the identity


def test_the_classifier_passes_merge_init_to_its_merge():
    data = make_needle_embeddings(12, n_frames=20, n_patches=4, dim=8, n_classes=2, random_state=0)
    videos = [VideoEmbedding(f, q, p) for f, q, p in zip(data.frames, data.queries, data.patches)]
    common = dict(max_keyframes=3, selector="uniform", learnable_merge=True, d_model=8, n_heads=2, max_epochs=1,
                  lr=1e-6, random_state=0, device="cpu")
    model = ViLAMPClassifier(merge_init="identity", **common).fit(videos, data.target)
    near = model.module_.merger
    official = ViLAMPClassifier(**common).fit(videos, data.target).module_.merger
    eye = torch.eye(8)
    assert (near.query_map.weight.detach() - eye).abs().max() < 0.1
    assert (official.query_map.weight.detach() - eye).abs().max() > 0.9
    with pytest.raises(ValueError, match="merge_init"):
        ViLAMPClassifier(merge_init="zeros", **common).fit(videos, data.target)
    assert np.isfinite(model.predict_proba(videos)).all()
