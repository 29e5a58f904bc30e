"""Point-MAE's published pretraining checkpoint, by name, from a torch.hub cache laid out on disk.

The file is the authors' training checkpoint (``tools/builder.py``'s
``save_checkpoint``): the whole pretraining model under ``base_model`` (with
DDP's ``module.`` prefix, the encoder as ``MAE_encoder.`` with its blocks in
``blocks.blocks.i``, the decoder beside it), the optimizer's state, the epoch
and the metrics. Here it holds random weights of a tiny encoder.
"""

import numpy as np
import pytest
import torch

from skicml.datasets import make_point_clouds
from skicml.pointcloud import GAPromptClassifier, PointMAEBackbone, PointMAEPretrainer

NAME = "point-mae-pretrain"


@pytest.fixture
def official_pointmae(hub_cache):
    torch.manual_seed(0)
    backbone = PointMAEBackbone(trans_dim=16, depth=2, num_heads=1, num_group=4, group_size=4,
                                encoder_channels=(8, 16, 16))
    base_model = {}
    for key, value in backbone.state_dict().items():
        key = "blocks." + key if key.startswith("blocks.") else key  # blocks.i -> blocks.blocks.i
        base_model[f"module.MAE_encoder.{key}"] = value
    base_model["module.mask_token"] = torch.zeros(1, 1, 16)
    base_model["module.MAE_decoder.blocks.blocks.0.norm1.weight"] = torch.ones(16)
    base_model["module.increase_dim.0.weight"] = torch.randn(12, 16, 1)
    checkpoint = {"base_model": base_model,
                  "optimizer": {"state": {}, "param_groups": [{"lr": 5e-4, "weight_decay": 0.05, "params": [0]}]},
                  "epoch": 300, "metrics": {"acc": 0.0}, "best_metrics": {"acc": 0.0}}
    hub_cache.put(NAME, lambda path: torch.save(checkpoint, path))
    return backbone.state_dict()


def test_gaprompt_and_the_pretrainer_start_from_the_published_encoder(official_pointmae):
    data = make_point_clouds(12, n_points=32, classes=["sphere", "cube"], random_state=0)
    clf = GAPromptClassifier(pretrained=NAME, n_points=16, n_groups=4, group_size=4, n_point_prompts=2,
                             n_token_prompts=2, adapter_dim=4, head_hidden=0, augment=None, max_epochs=1,
                             batch_size=12, validation_fraction=None, random_state=0, device="cpu")
    clf.fit(data.points, data.target)
    assert clf.provenance_["published"] == NAME and clf.predict(data.points).shape == (12,)
    pretrainer = PointMAEPretrainer(pretrained=NAME, n_points=16, n_groups=4, group_size=4, decoder_depth=1,
                                    decoder_heads=1, augment=None, max_epochs=0, random_state=0, device="cpu")
    encoder = pretrainer._build(0).backbone
    for key, value in encoder.state_dict().items():
        torch.testing.assert_close(value, official_pointmae[key], rtol=0, atol=0)


def test_an_empty_cache_names_the_download_command(hub_cache):
    clouds = np.random.RandomState(0).normal(size=(4, 16, 3))
    with pytest.raises(FileNotFoundError, match="skicml download point-mae-pretrain"):
        GAPromptClassifier(pretrained=NAME, n_points=16, n_groups=4, group_size=4, max_epochs=1,
                           device="cpu").fit(clouds, [0, 1, 0, 1])
