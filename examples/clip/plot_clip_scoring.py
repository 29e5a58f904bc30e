"""
===================================================
Scoring images and captions with Whitened CLIP
===================================================

:class:`~skicml.WhitenedCLIPScorer` embeds images or captions with a CLIP
model, whitens the embeddings of a reference set and scores new inputs by the
log-likelihood of their whitened coordinates (Betser et al., ICML 2025).
Lower means less typical of the reference set.

The CLIP model here is the one shipped with skicml, ``tiny-clip-shapes``: a
3.3M-parameter open_clip model trained on synthetic scenes of coloured
shapes (:func:`~skicml.datasets.make_shape_scenes`). It is a toy for
demonstrations; pass ``embedder=CLIPEmbedder(model_name=..., pretrained=<file>)``
to use real CLIP weights from disk.
"""

# %%
# Images: likelihood against corruption severity
# -----------------------------------------------
# The scorer is fitted on clean scenes; the held-out scenes are then
# corrupted with growing severity. The paper's claim is that the likelihood
# drops steadily as the images move away from the reference distribution.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import roc_auc_score

from skicml import WhitenedCLIPScorer
from skicml.datasets import corrupt_images, make_shape_scenes, perturb_captions

images, captions, objects = make_shape_scenes(800, random_state=0)
train_images, test_images = images[:600], images[600:]
train_captions, test_captions = list(captions[:600]), list(captions[600:])

image_scorer = WhitenedCLIPScorer(modality="image").fit(train_images)
clean = image_scorer.score_samples(test_images)

severities = [1, 2, 3, 4, 5]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for kind in ("gaussian_noise", "occlusion", "blur"):
    means, aurocs = [], []
    for severity in severities:
        scores = image_scorer.score_samples(corrupt_images(test_images, kind, severity, random_state=0))
        means.append(scores.mean())
        aurocs.append(roc_auc_score(np.r_[np.ones(len(clean)), np.zeros(len(scores))], np.r_[clean, scores]))
    axes[0].plot(severities, means, marker="o", label=kind)
    axes[1].plot(severities, aurocs, marker="o", label=kind)
axes[0].axhline(clean.mean(), color="k", linestyle=":", label="clean")
axes[0].set(xlabel="severity", ylabel="mean log-likelihood", title="Image likelihood")
axes[1].set(xlabel="severity", ylabel="AUROC clean vs corrupted", title="Detecting the corruption", ylim=(0.4, 1))
axes[0].legend()
fig.tight_layout()

# %%
# Three clean scenes and their most corrupted versions, with their scores.
fig, axes = plt.subplots(2, 3, figsize=(7, 4.8))
noisy = corrupt_images(test_images[:3], "gaussian_noise", 5, random_state=0)
pairs = [(test_images[:3], "clean"), (noisy, "noise s5")]
for row, (pictures, name) in enumerate(pairs):
    for column, (picture, score) in enumerate(zip(pictures, image_scorer.score_samples(pictures))):
        axes[row, column].imshow(picture)
        axes[row, column].set_title(f"{name}: {score:.1f}", fontsize=9)
        axes[row, column].axis("off")
fig.suptitle(test_captions[0], fontsize=9)
fig.tight_layout()

# %%
# Captions: well-formed against ill-formed
# ----------------------------------------
# A second scorer, fitted on captions, ranks new captions. Scrambling the
# word order, dropping the colour and size words or using words the model
# never saw all lower the likelihood. A caption of *another* scene stays a
# perfectly well-formed caption, so a caption-only likelihood cannot flag it
# (AUROC 0.5); the next section scores it against its image instead.
caption_scorer = WhitenedCLIPScorer(modality="text").fit(train_captions)
clean_text = caption_scorer.score_samples(test_captions)
print(f"{'captions':18s} mean log-likelihood   AUROC vs well-formed")
print(f"{'well-formed':18s} {clean_text.mean():8.1f}")
for kind in ("scramble", "drop_attributes", "unseen_words", "mismatch"):
    scores = caption_scorer.score_samples(list(perturb_captions(test_captions, kind, random_state=0)))
    auroc = roc_auc_score(np.r_[np.ones(len(clean_text)), np.zeros(len(scores))], np.r_[clean_text, scores])
    print(f"{kind:18s} {scores.mean():8.1f}   {auroc:22.3f}")

# %%
# Mismatched captions: the caption's likelihood given its image
# -------------------------------------------------------------
# Whether a caption fits *its image* is a property of the pair. Whitening
# the concatenated image and caption embeddings of matched pairs gives a
# Gaussian model of both; subtracting the image's own log-likelihood leaves
# the log-likelihood of the caption given the image,
# ``log p(caption | image) = log p(image, caption) - log p(image)``
# (log-determinants included, so both terms are densities). The scorers take
# precomputed embeddings, so this is two more fits on 2-D arrays.
from skicml.clip import CLIPEmbedder

image_embedder = CLIPEmbedder(modality="image").fit()
text_embedder = CLIPEmbedder(modality="text").fit()
train_pairs = np.hstack([image_embedder.transform(train_images), text_embedder.transform(train_captions)])
test_image_embeddings = image_embedder.transform(test_images)
pair_scorer = WhitenedCLIPScorer(include_log_det=True).fit(train_pairs)
image_density = WhitenedCLIPScorer(include_log_det=True).fit(train_pairs[:, : test_image_embeddings.shape[1]])


def caption_given_image(images_embedded, captions):
    pairs = np.hstack([images_embedded, text_embedder.transform(list(captions))])
    return pair_scorer.score_samples(pairs) - image_density.score_samples(images_embedded)


matched = caption_given_image(test_image_embeddings, test_captions)
mismatched = caption_given_image(test_image_embeddings, perturb_captions(test_captions, "mismatch", random_state=0))
auroc = roc_auc_score(np.r_[np.ones(len(matched)), np.zeros(len(mismatched))], np.r_[matched, mismatched])
print(f"log p(caption | image): own caption {matched.mean():.1f}, another scene's caption "
      f"{mismatched.mean():.1f}, AUROC {auroc:.3f}")

# %%
# The scorers are scikit-learn outlier detectors too: ``predict`` flags the
# inputs below the likelihood threshold set by ``contamination`` (the 5% of
# the training captions that score lowest).
for kind in ("well-formed", "scramble", "drop_attributes", "unseen_words"):
    batch = test_captions if kind == "well-formed" else list(perturb_captions(test_captions, kind, random_state=0))
    print(f"{kind:18s} flagged as outliers: {np.mean(caption_scorer.predict(batch) == -1):.0%}")
