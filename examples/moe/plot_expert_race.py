"""
Where Expert Race spends its experts
====================================

A small Race-DiT learns class-conditional 8x8 digits. Every block's MLP is
an Expert Race layer: the (token, expert) pairs of a whole batch compete for
two experts per token *on average*, so a token may take none or all eight.
After training, a learned threshold decides each token alone. The figure
shows guided samples, how many experts each of the 16 patch tokens takes
(strokes against background), and how that changes with the noise level.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from skicml.moe import RaceDiTGenerator

digits = load_digits()
images, labels = digits.images[:1200], digits.target[:1200]
model = RaceDiTGenerator(hidden_dim=32, depth=2, max_epochs=30, lr=2e-3, random_state=0, device="cpu")
model.fit(images, labels)
print("thresholds learned per layer:", np.round(model.thresholds_, 3))

# %%
# Experts per token, patch by patch, on held-out digits at a middle noise level.
held_out, held_out_labels = digits.images[1500:1600], digits.target[1500:1600]
per_patch = model.experts_per_token(held_out, held_out_labels, t=60).mean(axis=1)  # (images, 4, 4), over layers
ink = held_out.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))  # each 2x2 patch's mean ink
stroke = ink > np.median(ink)
print(f"experts per token at t=60: {per_patch[stroke].mean():.2f} on strokes, "
      f"{per_patch[~stroke].mean():.2f} on background")

report = model.routing_report(held_out, held_out_labels, t=[5, 50, 100, 150, 195])
by_timestep = report.groupby("timestep")["experts_per_token_mean"].mean()
print("experts per token by timestep:", by_timestep.round(2).to_dict())

# %%
samples = model.sample(10, y=np.arange(10), guidance_scale=3.0, n_steps=50, random_state=0)
fig, axes = plt.subplots(2, 10, figsize=(10, 2.6))
for i in range(10):
    axes[0, i].imshow(samples[i], cmap="gray_r")
    axes[0, i].set_title(str(i))
    axes[1, i].imshow(per_patch[i], cmap="viridis", vmin=0, vmax=4)
for ax in axes.flat:
    ax.set_axis_off()
axes[1, 0].set_title("experts", fontsize=8)
fig.suptitle("guided samples (top); experts per patch of held-out digits (bottom)")

fig, ax = plt.subplots(figsize=(4, 3))
ax.plot(by_timestep.index, by_timestep.values, marker="o")
ax.axhline(2.0, color="gray", linestyle=":", label="k = 2 in training")
ax.set_xlabel("timestep (200 = pure noise)")
ax.set_ylabel("experts per token")
ax.legend()
plt.tight_layout()
plt.show()
