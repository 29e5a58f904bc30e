"""GIT's network: the spec's properties of the encoder, the views and the two pretraining losses."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skicml.graph._git._model import GITModel, alignment_loss, augment_graph, mean_aggregate, reconstruction_loss


def _path(n):
    forward = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    return torch.cat([forward, forward.flip(0)], dim=1)


def test_an_isolated_node_gets_its_root_term_and_no_nan():
    torch.manual_seed(0)
    model = GITModel(4, 8, dropout=0.0).eval()
    x = torch.randn(5, 4)
    edges = _path(4)  # node 4 has no neighbour
    z = model.encode(x, edges)
    assert torch.isfinite(z).all()
    layer = model.convs[0]
    torch.testing.assert_close(layer(x, edges)[4], layer.lin_l.bias + layer.lin_r(x[4]))


def test_node_embeddings_are_equivariant_and_graph_embeddings_invariant_to_relabelling():
    torch.manual_seed(1)
    model = GITModel(3, 6).eval()
    x, edges = torch.randn(7, 3), torch.cat([_path(7), torch.tensor([[0, 4], [4, 0]])], dim=1)
    perm = torch.randperm(7)
    inverse = torch.argsort(perm)
    z = model.encode(x, edges)
    z_perm = model.encode(x[perm], inverse[edges])
    torch.testing.assert_close(z_perm, z[perm])
    everything = torch.zeros(7, dtype=torch.int64), torch.arange(7)
    torch.testing.assert_close(model.task_embeddings(z_perm, *everything), model.task_embeddings(z, *everything))
    pair = model.task_embeddings(z, torch.tensor([0, 0]), torch.tensor([2, 5]))
    torch.testing.assert_close(pair, model.task_embeddings(z, torch.tensor([0, 0]), torch.tensor([5, 2])))


def test_views_without_augmentation_are_the_graph():
    x, edges = torch.randn(6, 4), _path(6)
    generator = torch.Generator().manual_seed(0)
    x_view, edges_view = augment_graph(x, edges, feature_mask_p=0.0, edge_drop_p=0.0, generator=generator)
    assert torch.equal(x_view, x) and torch.equal(edges_view, edges)


def test_views_drop_whole_columns_and_both_directions_of_an_edge():
    x, edges = torch.randn(50, 40) + 5, _path(50)
    x_view, edges_view = augment_graph(x, edges, feature_mask_p=0.5, edge_drop_p=0.5,
                                       generator=torch.Generator().manual_seed(0))
    zero_columns = (x_view == 0).all(0)
    assert 5 < int(zero_columns.sum()) < 35 and (x_view[:, ~zero_columns] == x[:, ~zero_columns]).all()
    kept = {tuple(e) for e in edges_view.t().tolist()}
    assert all((v, u) in kept for u, v in kept) and 10 < len(kept) / 2 < 40


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(2, 9), st.integers(0, 99))
def test_reconstruction_loss_lies_in_0_2_is_0_when_parallel_and_stops_the_target_gradient(rows, dim, seed):
    generator = torch.Generator().manual_seed(seed)
    predicted = torch.randn(rows, dim, generator=generator, requires_grad=True)
    target = torch.randn(rows, dim, generator=generator, requires_grad=True)
    loss = reconstruction_loss(predicted, target)
    assert 0.0 <= float(loss.detach()) <= 2.0
    loss.backward()
    assert target.grad is None and predicted.grad is not None
    assert float(reconstruction_loss(3.0 * target.detach(), target)) < 1e-6


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(2, 9), st.integers(0, 99))
def test_alignment_loss_is_nonnegative_and_zero_for_identical_rows(rows, dim, seed):
    z = torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed))
    # float32 rounding of a sum of near-zero KL terms: -1.4e-7 was found for one row of 9 features
    assert float(alignment_loss(z)) >= -1e-6
    assert abs(float(alignment_loss(z[:1].expand(rows, dim)))) < 1e-6


def test_mean_aggregate_of_no_message_is_zero():
    z = torch.randn(3, 2)
    out = mean_aggregate(z, torch.tensor([[0], [1]]))
    torch.testing.assert_close(out[1], z[0])
    assert (out[[0, 2]] == 0).all()


def test_pretraining_lowers_the_loss_on_task_trees_of_two_domains():
    """Spec property 11 (first half): AdamW on the objective lowers it, batches of node tasks of two domains."""
    from skicml.datasets import make_graph_domains
    from skicml.graph._git._model import GITPretrainObjective
    from skicml.graph._git._task_trees import csr_adjacency, sample_neighbors

    domains = make_graph_domains(2, n_nodes=300, n_features=16, random_state=0)
    xs, edges, offset = [], [], 0
    for domain in domains:
        xs.append(torch.as_tensor(domain.x, dtype=torch.float32))
        edges.append(torch.as_tensor(domain.edge_index) + offset)
        offset += len(domain.x)
    x, csr = torch.cat(xs), csr_adjacency(torch.cat(edges, dim=1), offset)
    torch.manual_seed(0)
    objective = GITPretrainObjective(GITModel(16, 32))
    optimizer = torch.optim.AdamW(objective.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for step in range(60):
        seeds = torch.randperm(offset, generator=generator)[:128]
        sample = sample_neighbors(*csr, seeds, [10, 10], generator=generator)
        loss = objective(x[sample.nodes], sample.edge_index, torch.arange(128), torch.arange(128), 128)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:5])
    assert set(objective.parts) == {"reconstruction", "alignment"}


def test_a_single_row_trains_through_batch_norm_with_running_statistics():
    model = GITModel(3, 4).train()
    z = model.encode(torch.randn(1, 3), torch.zeros((2, 0), dtype=torch.int64))
    assert z.shape == (1, 4) and torch.isfinite(z).all()


def test_an_input_projection_reads_features_of_another_width():
    model = GITModel(8, 8).add_input_projection(3).eval()
    assert model.feature_dim == 3
    out = model(torch.randn(5, 3), _path(5), torch.zeros(5, dtype=torch.int64), torch.arange(5))
    assert out.shape == (1, 8)
    assert isinstance(GITModel(8, 8).add_input_projection(8).project, torch.nn.Identity)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(2, 8), st.integers(0, 99), st.floats(0.1, 10.0))
def test_prototypes_classify_their_own_classes_under_any_positive_scale(n_classes, dim, seed, scale):
    """Spec property 8: queries equal to the prototypes are classified right, whatever their scale."""
    from skicml.graph._git._model import class_prototypes, prototype_logits

    generator = torch.Generator().manual_seed(seed)
    support = torch.randn(3 * n_classes, dim, generator=generator, dtype=torch.float64)
    labels = torch.arange(n_classes).repeat(3)
    prototypes = class_prototypes(support, labels, n_classes)
    if torch.linalg.matrix_rank(prototypes) < n_classes:
        return
    logits = prototype_logits(scale * prototypes, prototypes)
    assert torch.equal(logits.argmax(1), torch.arange(n_classes))
    torch.testing.assert_close(prototype_logits(scale * support, prototypes), prototype_logits(support, prototypes))
    assert (logits <= 1e-12).all() and (logits >= -4 - 1e-12).all()
    # the order of the support set does not matter
    order = torch.randperm(len(support), generator=generator)
    torch.testing.assert_close(class_prototypes(support[order], labels[order], n_classes), prototypes)


def test_a_class_without_support_has_a_zero_prototype():
    from skicml.graph._git._model import class_prototypes

    prototypes = class_prototypes(torch.randn(4, 3), torch.tensor([0, 0, 2, 2]), 3)
    assert (prototypes[1] == 0).all() and (prototypes[[0, 2]] != 0).any()


def test_pretrain_recipe_exports_a_backbone_the_classifier_loads(tmp_path, capsys):
    from skicml._weights import load_weights
    from skicml.graph import GITClassifier
    from skicml.datasets import make_graph_domains
    from skicml.graph._git._pretrain import FEATURE_DIM, main

    path = tmp_path / "git.pt"
    main(["--sbm-domains", "1", "--molecules", "20", "--steps", "4", "--eval-every", "2", "--batch-size", "32",
          "--hidden-dim", "16", "--threads", "1", "--checkpoint", str(tmp_path / "git.ckpt"), "--export", str(path),
          "--quiet"])
    out = capsys.readouterr().out
    assert "step 2: 5-shot in-context accuracy" in out and "step 4:" in out
    payload = load_weights(str(path))
    assert payload["provenance"]["steps"] == 4 and "QM9" in payload["provenance"]["data"]
    # The molecules' atom texts went through the TF-IDF encoder that ships in the file.
    assert payload["config"]["text_encoder"] is not None and payload["config"]["feature_dim"] == FEATURE_DIM

    domain = make_graph_domains(1, n_nodes=120, n_features=FEATURE_DIM, random_state=3)[0]
    support = np.concatenate([np.flatnonzero(domain.target == c)[:3] for c in range(5)])
    model = GITClassifier(pretrained=str(path), graph={"x": domain.x, "edge_index": domain.edge_index},
                          mode="in_context", random_state=0, device="cpu").fit(support, domain.target[support])
    assert model.model_.hidden_dim == 16 and model.predict(np.arange(120)).shape == (120,)
