"""
=============================================
Interpolation in whitened space
=============================================

In whitened coordinates every direction has unit variance, so a great circle
through two whitened embeddings stays between their norms, a typical distance from the
mean: the paper walks such a full circle with spherical interpolation
(``slerp``) and maps every point back with ``inverse_transform``. A straight
line between the two instead passes close to the mean, where embeddings are
atypical averages (their likelihood is high, their norm unusually small).

Without the open_clip encoders (not in skicml yet) the embeddings here are the
principal components of scikit-learn's handwritten digits, which can be
decoded back into images: the path from a 0 to a 1 is drawn as digits, and
its log-likelihood under the whitening model is plotted along the way.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA

from skicml.clip import WhiteningLikelihood, full_circle

X, y = load_digits(return_X_y=True)
pca = PCA(24, random_state=0).fit(X)
embeddings = pca.transform(X)
whitener = WhiteningLikelihood().fit(embeddings)

start, end = embeddings[y == 0][0], embeddings[y == 1][0]
circle = full_circle(start, end, step_deg=30, whitener=whitener)
straight = np.linspace(start, end, len(circle))

# %%
# Both paths decoded to images: the circle (top) comes back to the 0 it
# started from; the middle of the straight line (bottom) is a faint average.
fig, axes = plt.subplots(2, len(circle), figsize=(len(circle), 2.6))
for row, path in zip(axes, (circle, straight)):
    for ax, point in zip(row, pca.inverse_transform(path)):
        ax.imshow(point.reshape(8, 8), cmap="gray_r")
        ax.axis("off")
fig.suptitle("full circle in whitened space (top), straight line (bottom)")

# %%
# Log-likelihood along the two paths (same number of points).
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(whitener.score_samples(circle), marker="o", label="slerp, whitened (full circle)")
ax.plot(whitener.score_samples(straight), marker="s", label="straight line, raw")
ax.axhline(np.median(whitener.score_samples(embeddings)), color="gray", ls="--", label="median of the data")
ax.set_xlabel("step")
ax.set_ylabel("whitened log-likelihood")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print("log-likelihood along the circle:", np.round(whitener.score_samples(circle), 1))
print("whitened norm along the circle: ", np.round(np.linalg.norm(whitener.transform(circle), axis=1), 2))
print("whitened norm along the line:   ", np.round(np.linalg.norm(whitener.transform(straight), axis=1), 2))
print("typical whitened norm (median): ", round(float(np.median(np.linalg.norm(whitener.transform(embeddings), axis=1))), 2))
