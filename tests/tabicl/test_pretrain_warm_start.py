"""The regression recipe's warm start from the shipped v1 classifier."""

import pytest
import torch

from skicml._weights import load_weights
from skicml.tabicl import TabICLModel, TabICLv2Model
from skicml.tabicl._pretrain_regressor import model_config, transfer_matching_weights

V1_LIKE = ["col_affine=True", "col_feature_group=False", "col_ssmax=none", "icl_ssmax=none", "bias_free_ln=False"]


def test_the_warm_started_regressor_reads_rows_as_the_shipped_classifier_does():
    weights = load_weights("tabicl-small")
    classifier = TabICLModel(**weights["config"])
    classifier.load_state_dict(weights["state_dict"])
    regressor = TabICLv2Model(**model_config("small", 999, V1_LIKE))
    report = transfer_matching_weights(regressor, weights["state_dict"])
    assert set(report["fresh"]) == {"col_embedder.y_encoder.weight", "col_embedder.y_encoder.bias",
                                    "icl_predictor.y_encoder.weight", "icl_predictor.decoder.2.weight",
                                    "icl_predictor.decoder.2.bias"}
    X, y = torch.randn(2, 30, 5), torch.randn(2, 20)
    with torch.no_grad():
        torch.testing.assert_close(regressor.eval().encode_rows(X, y), classifier.eval().encode_rows(X, 20))


def test_weights_of_another_architecture_are_refused():
    regressor = TabICLv2Model(**model_config("tiny", 16))
    with pytest.raises(ValueError, match="nothing to start from"):
        transfer_matching_weights(regressor, {"unrelated.weight": torch.zeros(3)})
