"""
=============================================
Interpolation in whitened space
=============================================

In whitened coordinates every direction has unit variance, so a great circle
through two whitened embeddings stays at a typical distance from the mean:
the paper walks such a full circle with spherical interpolation (``slerp``),
maps every point back with ``inverse_transform`` and finds valid images all
the way round. A straight line between the two embeddings instead passes
close to the mean, where embeddings are atypical averages.

The embeddings here are image embeddings of the CLIP model shipped with
skicml (``tiny-clip-shapes``, trained on :func:`~skicml.datasets.make_shape_scenes`).
It has no image decoder (the paper uses unCLIP), so each point of a path is
shown as the caption the CLIP text tower finds closest to it and as the
nearest scene of a reference set.
"""

# %%
import itertools

import matplotlib.pyplot as plt
import numpy as np

from skicml.clip import CLIPEmbedder, WhiteningLikelihood, full_circle
from skicml.datasets import make_shape_scenes

images, captions, objects = make_shape_scenes(2000, max_objects=1, random_state=0)
image_encoder = CLIPEmbedder(modality="image").fit()
embeddings = image_encoder.transform(images)
whitener = WhiteningLikelihood().fit(embeddings)

# Every caption a one-object scene can have, embedded by the text tower.
vocabulary = [
    f"{'an' if size[0] in 'aeiou' else 'a'} {size} {texture}{color} {shape} {where}"
    for size, texture, color, shape, where in itertools.product(
        ("small", "large"), ("", "striped "), ("red", "green", "blue", "yellow"),
        ("circle", "square", "triangle"),
        ("on the left", "on the right", "at the top", "at the bottom", "in the middle"))
]
text_encoder = CLIPEmbedder(modality="text", normalize=True).fit()
vocabulary_embeddings = text_encoder.transform(vocabulary)


def describe(path):
    """Closest caption (cosine similarity, as CLIP retrieves) and nearest reference scene."""
    unit = path / np.linalg.norm(path, axis=1, keepdims=True)
    words = [vocabulary[i] for i in (unit @ vocabulary_embeddings.T).argmax(axis=1)]
    nearest = ((path[:, None, :] - embeddings[None]) ** 2).sum(-1).argmin(axis=1)
    return words, nearest


start = np.flatnonzero(captions == "a small red circle on the left")[0]
end = np.flatnonzero(captions == "a large striped blue square on the right")[0]
circle = full_circle(embeddings[start], embeddings[end], step_deg=30, whitener=whitener)
straight = np.linspace(embeddings[start], embeddings[end], len(circle))

# %%
# Both paths, each point shown as its nearest reference scene. The circle
# (top) travels through ordinary scenes and comes back to the red circle it
# started from; the straight line (bottom) goes from the start to the end.
fig, axes = plt.subplots(2, len(circle), figsize=(len(circle) * 0.9, 2.4))
for row, path in zip(axes, (circle, straight)):
    _, nearest = describe(path)
    for ax, index in zip(row, nearest):
        ax.imshow(images[index])
        ax.axis("off")
fig.suptitle("full circle in whitened space (top), straight line in raw space (bottom)")

# %%
# The captions CLIP reads off the circle, step by step.
words, _ = describe(circle)
for degrees, caption in zip(range(0, 361, 30), words):
    print(f"{degrees:3d} deg  {caption}")

# %%
# Log-likelihood and whitened norm along the two paths. On the circle both
# stay at the level of real scenes; the middle of the straight line is an
# average of two scenes, closer to the mean than 95% of real scenes (its
# whitened norm is unusually small, its likelihood unusually high).
norms = {name: np.linalg.norm(whitener.transform(path), axis=1) for name, path in
         (("circle", circle), ("straight", straight))}
typical = np.linalg.norm(whitener.transform(embeddings), axis=1)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
axes[0].plot(whitener.score_samples(circle), marker="o", label="full circle, whitened slerp")
axes[0].plot(whitener.score_samples(straight), marker="s", label="straight line, raw")
axes[0].axhline(np.median(whitener.score_samples(embeddings)), color="gray", ls="--", label="median of the scenes")
axes[0].set(xlabel="step", ylabel="whitened log-likelihood")
axes[1].plot(norms["circle"], marker="o", label="full circle")
axes[1].plot(norms["straight"], marker="s", label="straight line")
axes[1].axhspan(*np.percentile(typical, [5, 95]), color="gray", alpha=0.2, label="5-95 % of the scenes")
axes[1].set(xlabel="step", ylabel="whitened norm")
for ax in axes:
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print("whitened norm along the circle:", np.round(norms["circle"], 2))
print("whitened norm along the line:  ", np.round(norms["straight"], 2))
print("scenes, 5-95 %:                ", np.round(np.percentile(typical, [5, 95]), 2))
