"""The skorch callbacks of :func:`skicml.utils.training.fit_module`.

They live apart from :mod:`skicml.utils.training` because subclassing
skorch's :class:`~skorch.callbacks.Callback` imports skorch, which takes
seconds (it pulls in torch_geometric); ``fit_module`` imports this module
only when it trains, so ``import skicml`` stays fast.
"""

from __future__ import annotations

import torch
from skorch.callbacks import Callback

from ._runtime import progress

__all__ = ["EpochProgress", "SyncedValidLoss"]


class SyncedValidLoss(Callback):
    """Replace each epoch's validation loss by its mean over the DDP ranks.

    Every rank holds out its own rows, so without this the ranks would see
    different validation losses and early stopping could stop one rank
    alone, which hangs the others at their next gradient all-reduce.

    Parameters
    ----------
    world_size : int, default=1
        Number of processes; with one nothing is recorded.
    """

    def __init__(self, world_size=1):
        self.world_size = world_size

    def on_epoch_end(self, net, **kwargs):
        if self.world_size > 1 and "valid_loss" in net.history[-1]:
            import torch.distributed as dist

            value = torch.tensor([net.history[-1, "valid_loss"]], dtype=torch.float64)
            dist.all_reduce(value)
            net.history.record("valid_loss", float(value) / self.world_size)
            best = min(net.history[:, "valid_loss"])
            net.history.record("valid_loss_best", float(value) / self.world_size <= best)


class EpochProgress(Callback):
    """A progress bar over epochs with the last training (and validation) loss.

    A resumed run starts the bar at the epochs its checkpoint already holds.

    Parameters
    ----------
    max_epochs : int
        Length of the bar.
    verbose : int, default=0
        ``0`` hides the bar (see :func:`skicml.base.progress`).
    desc : str or None, default=None
        Label of the bar.
    """

    def __init__(self, max_epochs, verbose=0, desc=None):
        self.max_epochs = max_epochs
        self.verbose = verbose
        self.desc = desc

    def on_train_begin(self, net, **kwargs):
        self.bar_ = progress(total=self.max_epochs, verbose=self.verbose, desc=self.desc, unit="epoch")
        self.bar_.update(len(net.history))

    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        postfix = {"loss": f"{row['train_loss']:.4g}"}
        if "valid_loss" in row:
            postfix["valid"] = f"{row['valid_loss']:.4g}"
        self.bar_.set_postfix(postfix, refresh=False)
        self.bar_.update(1)

    def on_train_end(self, net, **kwargs):
        self.bar_.close()
