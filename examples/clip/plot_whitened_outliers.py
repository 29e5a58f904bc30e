"""
===================================================
Anomaly detection in a Pipeline
===================================================

Whitened CLIP scores an embedding by the standard-normal log-likelihood of
its whitened coordinates: embeddings far from the reference set, in the
directions where the reference set varies little, score low. Its detector is
a scikit-learn outlier detector, so it sits at the end of a
:class:`~sklearn.pipeline.Pipeline` behind a
:class:`~skicml.clip.CLIPEmbedder` and compares directly with the detectors a
user would otherwise try on the same embeddings.

The images are scenes of :func:`~skicml.datasets.make_shape_scenes`, the
encoder is the CLIP model shipped with skicml (``tiny-clip-shapes``) and the
anomalies are held-out scenes with pixel noise, blur or an occluding square.
The embedder caches its embeddings (``memory=``), so the four pipelines
encode each image once.
"""

# %%
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np
from joblib import Memory
from sklearn.covariance import EllipticEnvelope
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import LocalOutlierFactor
from sklearn.pipeline import make_pipeline

from skicml.clip import CLIPEmbedder, WhitenedLikelihoodOutlierDetector
from skicml.datasets import corrupt_images, make_shape_scenes

train_images, _, _ = make_shape_scenes(1500, random_state=0)
clean, _, _ = make_shape_scenes(300, random_state=1)
corrupted = {kind: corrupt_images(clean, kind, severity=3, random_state=2)
             for kind in ("gaussian_noise", "blur", "occlusion")}
X_test = np.concatenate([clean, *corrupted.values()])
is_anomaly = np.r_[np.zeros(len(clean)), np.ones(len(X_test) - len(clean))]

cache = Memory(tempfile.mkdtemp(prefix="skicml-clip-cache-"), verbose=0)
embedder = CLIPEmbedder(memory=cache)  # the shipped tiny CLIP, image tower
start = time.perf_counter()
embedder.fit().transform(train_images), embedder.transform(X_test)
print(f"encoding {len(train_images) + len(X_test)} images once: {time.perf_counter() - start:.1f} s")

# %%
# Every detector sees the same embeddings of the training scenes; the
# pipelines below read them from the cache, so the times are the detectors'.
detectors = {
    "whitened likelihood": WhitenedLikelihoodOutlierDetector(contamination=0.05),
    "IsolationForest": IsolationForest(random_state=0),
    "LocalOutlierFactor": LocalOutlierFactor(novelty=True),
    "EllipticEnvelope": EllipticEnvelope(random_state=0),
}
results = {}
for name, detector in detectors.items():
    model = make_pipeline(embedder, detector)
    start = time.perf_counter()
    model.fit(train_images)
    scores = model.decision_function(X_test)
    seconds = time.perf_counter() - start
    results[name] = roc_auc_score(is_anomaly, -scores)
    print(f"{name:20s} AUROC {results[name]:.3f}   fit+score {seconds * 1000:7.1f} ms")

# %%
# ``predict`` flags about ``contamination`` of the clean scenes, and more
# of each kind of corrupted ones.
model = make_pipeline(embedder, WhitenedLikelihoodOutlierDetector(contamination=0.05)).fit(train_images)
print(f"flagged: clean {np.mean(model.predict(clean) == -1):.0%}", end="")
for kind, batch in corrupted.items():
    print(f", {kind} {np.mean(model.predict(batch) == -1):.0%}", end="")
print()

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.hist(model.score_samples(clean), bins=40, alpha=0.6, label="clean")
for kind, batch in corrupted.items():
    ax.hist(model.score_samples(batch), bins=40, alpha=0.6, label=f"{kind} (severity 3)")
ax.axvline(model[-1].offset_, color="k", ls=":", label="threshold (contamination 5%)")
ax.set_xlabel("whitened log-likelihood")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
