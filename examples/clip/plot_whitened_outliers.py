"""
===================================================
Whitened likelihood as an outlier detector
===================================================

Whitened CLIP scores an embedding by the standard-normal log-likelihood of
its whitened coordinates: embeddings far from the reference set, in the
directions where the reference set varies little, score low. The detector is
a scikit-learn outlier detector, so it sits at the end of a
:class:`~sklearn.pipeline.Pipeline` and compares directly with the detectors
a user would otherwise try.

The open_clip encoders are not part of skicml yet, so the embeddings here are
the 32 principal components of scikit-learn's handwritten digits; the
outliers are the same digits with pixel noise or a blanked half.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.covariance import EllipticEnvelope
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neighbors import LocalOutlierFactor
from sklearn.pipeline import make_pipeline

from skicml.clip import WhitenedLikelihoodOutlierDetector

X, _ = load_digits(return_X_y=True)
X_train, X_clean = train_test_split(X, test_size=300, random_state=0)
rng = np.random.default_rng(0)
noisy = np.clip(X_clean + rng.normal(0, 4, X_clean.shape), 0, 16)
blanked = X_clean.copy()
blanked[:, 32:] = 0
X_test = np.vstack([X_clean, noisy, blanked])
is_outlier = np.r_[np.zeros(len(X_clean)), np.ones(len(noisy) + len(blanked))]

# %%
# Every detector sees the same 32-d embedding of the training digits.
detectors = {
    "whitened likelihood": WhitenedLikelihoodOutlierDetector(contamination=0.05),
    "IsolationForest": IsolationForest(random_state=0),
    "LocalOutlierFactor": LocalOutlierFactor(novelty=True),
    "EllipticEnvelope": EllipticEnvelope(random_state=0),
}
results = {}
for name, detector in detectors.items():
    model = make_pipeline(PCA(32, random_state=0), detector)
    start = time.perf_counter()
    model.fit(X_train)
    scores = model.decision_function(X_test)
    seconds = time.perf_counter() - start
    results[name] = roc_auc_score(is_outlier, -scores)
    print(f"{name:20s} AUROC {results[name]:.3f}   fit+score {seconds * 1000:6.1f} ms")

# %%
# ``predict`` flags about ``contamination`` of the training embeddings, and
# far more of the corrupted digits.
model = make_pipeline(PCA(32, random_state=0), WhitenedLikelihoodOutlierDetector(contamination=0.05))
model.fit(X_train)
flags = model.predict(X_test) == -1
print(f"flagged: clean {flags[:300].mean():.1%}, noisy {flags[300:600].mean():.1%}, "
      f"blanked {flags[600:].mean():.1%}")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
log_likelihood = model.score_samples(X_test)
for label, rows in [("clean", slice(0, 300)), ("noise", slice(300, 600)), ("blanked half", slice(600, 900))]:
    ax.hist(log_likelihood[rows], bins=40, alpha=0.6, label=label)
ax.set_xlabel("whitened log-likelihood")
ax.legend()
fig.tight_layout()
plt.show()
