"""
Embedding held-out digits
=========================

:class:`~sklearn.manifold.SpectralEmbedding` embeds the rows it was fit on
and nothing else. :class:`~skicml.contexture.ContextureEmbedding` with a kNN
context computes the same kind of spectral embedding and embeds new rows by
the average-encoder formula: a held-out digit lands where its neighbours
among the training digits are. A nearest-neighbour classifier on the
embedding then labels the held-out digits.
"""

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline

from skicml.contexture import ContextureEmbedding, KNNContext

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)

embedding = ContextureEmbedding(KNNContext(n_neighbors=10), n_components=16, random_state=0)
Z_train = embedding.fit_transform(X_train)
Z_test = embedding.transform(X_test)            # rows the fit never saw
print(f"top singular values: {embedding.singular_values_[:5].round(4)}")

model = make_pipeline(ContextureEmbedding(KNNContext(n_neighbors=10), n_components=16, random_state=0),
                      KNeighborsClassifier(5))
model.fit(X_train, y_train)
print(f"held-out accuracy, 5-NN on the embedding: {model.score(X_test, y_test):.3f}")
print(f"held-out accuracy, 5-NN on the pixels:    "
      f"{KNeighborsClassifier(5).fit(X_train, y_train).score(X_test, y_test):.3f}")

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharex=True, sharey=True)
for ax, Z, labels, title in ((axes[0], Z_train, y_train, "training digits (fit)"),
                             (axes[1], Z_test, y_test, "held-out digits (transform)")):
    points = ax.scatter(Z[:, 0], Z[:, 1], c=labels, cmap="tab10", s=8)
    ax.set(title=title, xlabel="contexture0", ylabel="contexture1")
fig.colorbar(points, ax=axes, label="digit")
plt.show()
