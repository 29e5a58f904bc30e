"""GIT's network (Wang et al., ICML 2025), in plain torch: a GraphSAGE encoder over task-trees.

Read top to bottom:

1. the encoder: ``num_layers`` GraphSAGE layers (mean of the neighbours
   through one linear map plus the node itself through another), each
   followed by ReLU, batch norm and dropout, as the official ``Encoder``
   (``act_first=True``);
2. the task-tree embedding: one linear map (``pooling``) of the mean of the
   roots' embeddings. In pretraining the roots are the neighbours of a
   virtual task node in the graph (:func:`~._task_trees.add_task_nodes`);
   in adaptation the mean is taken directly, which is the same thing
   (``tests/graph/test_git_task_trees.py``);
3. for pretraining only: a predictor MLP and the two losses, the
   SimSiam-style "reconstruction" of one augmented view's task-tree
   embedding from the other's (stop-gradient on the target) and the
   distribution-alignment regulariser that pulls every embedding's softmax
   toward the batch mean (it removes per-domain offsets when batches mix
   domains). The views are made by :func:`augment_graph`.
"""

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GITModel", "GITPretrainObjective", "SAGELayer", "alignment_loss", "augment_graph", "class_prototypes",
           "mean_aggregate", "prototype_logits", "reconstruction_loss"]


def mean_aggregate(z, edge_index, num_nodes=None):
    """Mean of the incoming messages ``z[edge_index[0]]`` at every ``edge_index[1]``; 0 without any."""
    num_nodes = z.shape[0] if num_nodes is None else num_nodes
    total = z.new_zeros((num_nodes, z.shape[1])).index_add_(0, edge_index[1], z[edge_index[0]])
    count = torch.bincount(edge_index[1], minlength=num_nodes).clamp_min_(1).to(z.dtype)
    return total / count[:, None]


class SAGELayer(nn.Module):
    """GraphSAGE with mean aggregation: ``W_l mean_{j -> i} m_ij + b + W_r z_i`` (PyG ``SAGEConv``'s form).

    The message ``m_ij`` is ``z_j``, or with edge features ``relu(z_j +
    e_ij)`` as the official ``MySAGEConv``; ``e_ij`` goes through
    ``edge_lin`` when its width is not the layer's input width (the official
    code needs the two equal).
    """

    def __init__(self, in_dim, out_dim, edge_dim=None):
        super().__init__()
        self.lin_l = nn.Linear(in_dim, out_dim)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)
        self.edge_lin = None
        if edge_dim:
            self.edge_lin = nn.Identity() if edge_dim == in_dim else nn.Linear(edge_dim, in_dim)

    def forward(self, z, edge_index, edge_attr=None):
        if edge_attr is None or self.edge_lin is None:
            return self.lin_l(mean_aggregate(z, edge_index)) + self.lin_r(z)
        messages = F.relu(z[edge_index[0]] + self.edge_lin(edge_attr))
        total = z.new_zeros((z.shape[0], messages.shape[1])).index_add_(0, edge_index[1], messages)
        count = torch.bincount(edge_index[1], minlength=z.shape[0]).clamp_min_(1).to(z.dtype)
        return self.lin_l(total / count[:, None]) + self.lin_r(z)


class GITModel(nn.Module):
    """GIT's encoder, task-tree pooling and pretraining predictor.

    Parameters
    ----------
    input_dim : int
        Width of the node features (the official model reads 768-d sentence
        embeddings).
    hidden_dim : int
    num_layers : int, default=2
        GraphSAGE layers; 0 leaves the features as they are (then
        ``hidden_dim`` must equal ``input_dim``).
    norm : {"batch", None}, default="batch"
    dropout : float, default=0.15
    predictor_dropout : float, default=0.5
    edge_dim : int or None, default=None
        Width of the edge features the layers read (``None``: none).
    """

    def __init__(self, input_dim, hidden_dim, num_layers=2, norm="batch", dropout=0.15, predictor_dropout=0.5,
                 edge_dim=None):
        super().__init__()
        if num_layers == 0 and hidden_dim != input_dim:
            raise ValueError(f"num_layers=0 keeps the {input_dim}-d features; hidden_dim={hidden_dim} must equal it.")
        if norm not in ("batch", None):
            raise ValueError(f"norm={norm!r}; expected 'batch' or None.")
        self.input_dim, self.hidden_dim, self.num_layers = int(input_dim), int(hidden_dim), int(num_layers)
        self.edge_dim = int(edge_dim) if edge_dim else None
        widths = [input_dim] + [hidden_dim] * num_layers
        self.convs = nn.ModuleList(SAGELayer(a, b, self.edge_dim) for a, b in zip(widths[:-1], widths[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden_dim) if norm == "batch" else nn.Identity()
                                   for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        # Features of another width reach a pretrained encoder through a learned map (add_input_projection).
        self.project = nn.Identity()
        self.pooling = nn.Linear(hidden_dim, hidden_dim)
        self.predictor = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(), nn.Dropout(predictor_dropout),
            nn.Linear(hidden_dim, hidden_dim),
        )

    @property
    def feature_dim(self):
        """Width of the node features the model reads (``input_dim`` unless a projection was added)."""
        return self.project.in_features if isinstance(self.project, nn.Linear) else self.input_dim

    def add_edge_features(self, edge_dim):
        """Read ``edge_dim``-wide edge features from now on: new ``edge_lin`` maps where widths differ."""
        self.edge_dim = int(edge_dim)
        for conv in self.convs:
            in_dim = conv.lin_r.in_features
            conv.edge_lin = nn.Identity() if edge_dim == in_dim else nn.Linear(edge_dim, in_dim)
        return self

    def add_input_projection(self, feature_dim):
        """Read ``feature_dim``-wide features through a new ``Linear(feature_dim, input_dim)``."""
        self.project = nn.Linear(feature_dim, self.input_dim) if feature_dim != self.input_dim else nn.Identity()
        return self

    def encode(self, x, edge_index, edge_attr=None):
        """Node embeddings ``(n_nodes, hidden_dim)`` of projected features ``x``; ``edge_index`` holds
        (source, target) messages, ``edge_attr`` their features (or ``None``)."""
        z = x
        for conv, norm in zip(self.convs, self.norms):
            z = F.relu(conv(z, edge_index, edge_attr))
            if isinstance(norm, nn.BatchNorm1d) and self.training and len(z) < 2:
                # Batch statistics of one row are undefined: use the running ones.
                z = F.batch_norm(z, norm.running_mean, norm.running_var, norm.weight, norm.bias, False, 0.0,
                                 norm.eps)
            else:
                z = norm(z)
            z = self.dropout(z)
        return z

    def task_embeddings(self, z, task_of_root, roots, n_tasks=None):
        """``pooling`` of the mean of each task's root embeddings: ``(n_tasks, hidden_dim)``."""
        n_tasks = int(task_of_root.max()) + 1 if n_tasks is None else n_tasks
        return self.pooling(mean_aggregate(z, torch.stack([roots, task_of_root]), n_tasks))

    def forward(self, x, edge_index, task_of_root, roots, n_tasks=None, edge_attr=None):
        """Task-tree embeddings of the tasks whose roots are given, from raw features ``x``."""
        return self.task_embeddings(self.encode(self.project(x), edge_index, edge_attr), task_of_root, roots,
                                    n_tasks)


def augment_graph(x, edge_index, *, feature_mask_p=0.2, edge_drop_p=0.2, generator=None):
    """One view: whole feature columns zeroed with probability ``feature_mask_p`` (PyG ``mask_feature``'s
    column mode) and undirected edges dropped with probability ``edge_drop_p`` (both directions together).

    ``edge_index`` lists (source, target) messages in both directions.
    """
    keep_columns = torch.rand(x.shape[1], generator=generator) >= feature_mask_p
    x = x * keep_columns.to(x.device, x.dtype)
    low, high = edge_index.min(0).values, edge_index.max(0).values
    pair = low * (int(edge_index.max()) + 1 if edge_index.numel() else 1) + high
    unique_pairs, which = torch.unique(pair, return_inverse=True)
    keep_pairs = torch.rand(len(unique_pairs), generator=generator) >= edge_drop_p
    return x, edge_index[:, keep_pairs.to(edge_index.device)[which]]


def reconstruction_loss(predicted, target, eta=1.0):
    """Mean of ``(1 - cos(predicted, sg(target))) ** eta`` over rows; in [0, 2] for ``eta = 1``."""
    cosine = F.cosine_similarity(predicted, target.detach(), dim=-1)
    return (1.0 - cosine).pow(eta).mean()


def alignment_loss(z):
    """``KL(softmax(mean of z) || softmax(z_i))`` averaged over rows: 0 when every row is the same, >= 0."""
    mean = F.softmax(z.mean(0), dim=-1)
    return (mean * (mean.log() - F.log_softmax(z, dim=-1))).sum(-1).mean()


class GITPretrainObjective(nn.Module):
    """GIT's pretraining loss on a batch of task-trees.

    For two views (:func:`augment_graph`) of the sampled graph, ``z_k =
    encode(view_k)``; each task's row is its task-tree embedding
    (:meth:`GITModel.task_embeddings`, the mean of its roots, which is what a
    virtual task node aggregates) and each node's row ``pooling(mean over its
    neighbours of z_k)``, the embedding of its own one-level tree. With ``h_k
    = predictor`` of those rows, the loss is ``(rec(h_2, z_1) + rec(h_1,
    z_2)) / 2`` over the tasks plus ``align_weight * alignment_loss(z_1)``
    over all rows, as the official ``PretrainModel`` (whose sampled rows are
    the task nodes and their neighbourhoods).

    The virtual task nodes are not put in the graph, so the roots do not
    receive messages from them: their trees are the ones adaptation reads.

    Parameters
    ----------
    model : GITModel
    align_weight : float, default=10.0
    eta : float, default=1.0
    feature_mask_p, edge_drop_p : float, default=0.2
    """

    def __init__(self, model, align_weight=10.0, eta=1.0, feature_mask_p=0.2, edge_drop_p=0.2):
        super().__init__()
        self.model = model
        self.align_weight, self.eta = float(align_weight), float(eta)
        self.feature_mask_p, self.edge_drop_p = float(feature_mask_p), float(edge_drop_p)
        self.parts = {}

    def view(self, x, edge_index, task_of_root, roots, n_tasks):
        """Rows ``(n_tasks + n_nodes, hidden_dim)`` of one augmented view: the tasks first."""
        x_view, edges_view = augment_graph(x, edge_index, feature_mask_p=self.feature_mask_p,
                                           edge_drop_p=self.edge_drop_p)
        z = self.model.encode(self.model.project(x_view), edges_view)
        tasks = self.model.task_embeddings(z, task_of_root, roots, n_tasks)
        return torch.cat([tasks, self.model.pooling(mean_aggregate(z, edges_view))])

    def forward(self, x, edge_index, task_of_root, roots, n_tasks):
        """The loss of the tasks whose roots are ``roots`` (local ids of the sampled graph ``x``, ``edge_index``)."""
        z1 = self.view(x, edge_index, task_of_root, roots, n_tasks)
        z2 = self.view(x, edge_index, task_of_root, roots, n_tasks)
        h1, h2 = self.model.predictor(z1), self.model.predictor(z2)
        tasks = slice(0, int(n_tasks))
        rec = 0.5 * (reconstruction_loss(h2[tasks], z1[tasks], self.eta)
                     + reconstruction_loss(h1[tasks], z2[tasks], self.eta))
        align = alignment_loss(z1)
        self.parts = {"reconstruction": float(rec.detach()), "alignment": float(align.detach())}
        return rec + self.align_weight * align


def class_prototypes(embeddings, labels, n_classes):
    """Mean of the L2-normalised embeddings of each class ``(n_classes, d)``; zero for a class with none.

    As in the official ``get_prototypes``, a support example given twice
    weighs twice; repeating the whole support set changes nothing.
    """
    unit = F.normalize(embeddings, dim=-1)
    labels = torch.as_tensor(labels, dtype=torch.int64, device=embeddings.device)
    return mean_aggregate(unit, torch.stack([torch.arange(len(unit), device=unit.device), labels]), n_classes)


def prototype_logits(queries, prototypes):
    """``-(2 - 2 cos(q, p))``, the negative squared distance of unit vectors (the official ``proto_classify``)."""
    return -(2.0 - 2.0 * F.normalize(queries, dim=-1) @ F.normalize(prototypes, dim=-1).t())
