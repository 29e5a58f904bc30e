"""GraphGPT estimators: degenerate numbers refused by the declared parameter constraints (issue 28, item 8)."""

import numpy as np
import pytest

from skicml.datasets import make_triangle_graphs
from skicml.graph import GraphGPTClassifier, GraphGPTEncoder, GraphGPTRegressor

TINY = dict(hidden_size=16, num_layers=1, head_dim=8, mlp_ratio=2, n_views=2, random_state=0, device="cpu")


@pytest.mark.parametrize("Estimator", [GraphGPTEncoder, GraphGPTClassifier, GraphGPTRegressor])
@pytest.mark.parametrize("params, name", [({"batch_size": 0}, "batch_size"), ({"max_epochs": -1}, "max_epochs")])
def test_degenerate_training_numbers_are_refused(Estimator, params, name):
    # batch_size=0 was a ZeroDivisionError deep in the training loop; max_epochs=-1 was accepted.
    graphs = list(make_triangle_graphs(n_graphs=6, random_state=0)[0])
    y = np.arange(6) % 2
    with pytest.raises(ValueError, match=f"'{name}' parameter of {Estimator.__name__} must be"):
        Estimator(**TINY, **params).fit(graphs, y)


@pytest.mark.parametrize("missing", [None, float("nan")])
def test_missing_class_labels_are_a_clear_error(missing):
    # numpy's "'<' not supported" came out of the label encoder before.
    graphs = list(make_triangle_graphs(n_graphs=6, random_state=0)[0])
    y = np.array(["a", "b", missing, "a", "b", "a"], dtype=object)
    with pytest.raises(ValueError, match=r"y contains missing labels \(None or NaN\) at 1 position\(s\), the first at index 2"):
        GraphGPTClassifier(**TINY, max_epochs=1).fit(graphs, y)
