"""
==========================================
Training a torch model with ``fit_module``
==========================================

All skicml estimators train their networks through one loop,
:func:`skicml.utils.training.fit_module`, built on skorch. It gives every method the
same warmup and cosine schedule, gradient clipping, early stopping on a
validation split with the best weights restored, resumable checkpoints,
progress bars, and data-parallel training under ``torchrun``.
"""

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import make_moons

from skicml.base import seeded
from skicml.utils.training import fit_module

X, y = make_moons(n_samples=600, noise=0.25, random_state=0)
X, y = torch.tensor(X, dtype=torch.float32), torch.tensor(y)


def make_model(seed=0):
    with seeded(seed):
        return torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.GELU(), torch.nn.Linear(32, 2))


# %%
# Early stopping watches the validation loss and keeps the best epoch.
model, history = fit_module(
    make_model(), X, y, max_epochs=200, batch_size=64, lr=3e-2, warmup_fraction=0.05,
    grad_clip=1.0, validation_fraction=0.2, stratify=True, n_iter_no_change=10, seed=0,
)
print(f"stopped after {history.n_epochs} epochs, kept epoch {history.best_epoch}")
with torch.no_grad():
    print("training accuracy:", (model(X).argmax(1) == y).float().mean().item())

# %%
# A run given a checkpoint directory resumes where it stopped: asked for 8
# epochs after a 5-epoch run in the same directory, it runs the 3 missing ones.
with tempfile.TemporaryDirectory() as directory:
    fit_module(make_model(), X, y, max_epochs=5, lr=3e-2, checkpoint_dir=directory, seed=0)
    _, resumed = fit_module(make_model(), X, y, max_epochs=8, lr=3e-2, checkpoint_dir=directory, seed=0)
print("epochs in the resumed history:", resumed.n_epochs)

# %%
fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(np.arange(1, history.n_epochs + 1), history.train_loss, label="train")
ax.plot(np.arange(1, history.n_epochs + 1), history.valid_loss, label="validation")
ax.axvline(history.best_epoch, color="grey", linestyle=":", label="kept")
ax.set_xlabel("epoch")
ax.set_ylabel("cross-entropy")
ax.legend()
fig.tight_layout()
plt.show()
