"""
=======================================================
Where a word looks: teacher, student before and after
=======================================================

Lavender (Jin et al., ICML 2025) fine-tunes a vision-language model with
one more loss: the model's attention from the query that predicts a word
to the image should match a teacher's map of that word. The paper's
teacher is Stable Diffusion's cross-attention, which has to know where each
word is to redraw the image.

This example draws, for the words of one scene, the maps of both offline
teachers skicml ships or builds (:class:`~skicml.vlm.TinyDiffusionTeacher`,
a small text-to-image diffusion model, and
:class:`~skicml.vlm.OracleMaskTeacher`, the object masks themselves) beside
the student's attention, :class:`~skicml.vlm.TinyVLM` (``tiny-vlm-scenes``):
its mean over heads and layers before and after a short Lavender
fine-tuning towards the oracle, and its one head that already grounds
words.
"""

# %%
# Training scenes, test scene and teachers
# ----------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from skicml.datasets import make_object_scenes
from skicml.vlm import LavenderTuner, OracleMaskTeacher, TinyDiffusionTeacher, pointing_accuracy

train_images, train_captions, train_objects, train_masks = make_object_scenes(
    48, cooccurrence=0.8, return_masks=True, random_state=1)
test_images, test_captions, test_objects, test_masks = make_object_scenes(
    30, min_objects=3, max_objects=4, return_masks=True, random_state=2)
diffusion = TinyDiffusionTeacher(pretrained="tiny-diffusion-scenes").fit()
oracle = OracleMaskTeacher(test_images, test_objects, test_masks)
print("caption of the drawn scene:", test_captions[0])

# %%
# The student before and after
# ----------------------------
# ``max_epochs=0`` keeps the shipped weights: the student before. The tuner
# with ``aggregation="mean"`` aligns the model's own attention (the mean
# over heads and layers) with the oracle's maps, with no Aligner network in
# between, so that what moves is the attention itself. ``word_maps(...,
# aligned=False)`` reads that attention for the words of the texts given.
before = LavenderTuner(align_weight=0.0, max_epochs=0, random_state=0).fit(test_images[:2], test_captions[:2])
after = LavenderTuner(teacher=OracleMaskTeacher(train_images, train_objects, train_masks), aggregation="mean",
                      max_epochs=2, batch_size=32, lr=1e-2, random_state=0)
after.fit(train_images, train_captions)

words = set(test_objects["color"]) | set(test_objects["shape"])
maps = {
    "diffusion teacher": diffusion.word_maps(test_images, test_captions),
    "oracle teacher": oracle.word_maps(test_images, test_captions),
    "student before": before.word_maps(test_images, test_captions, aligned=False),
    "student after": after.word_maps(test_images, test_captions, aligned=False),
    "student, one head": before.word_maps(test_images, test_captions, aligned=False, layers=[5], heads=[0]),
}
# Pointing is judged on the student's own 3 x 3 grid of image tokens, every map area-resized to it.
pointing = {}
for name, these in maps.items():
    kept = [{w: m for w, m in row.items() if w in words} for row in these]
    accuracy = pointing_accuracy(kept, test_objects, test_masks, resolution=3)
    pointing[name] = accuracy["all"]
    print(f"{name:18s} pointing accuracy: colour {accuracy['color']:.2f}, shape {accuracy['shape']:.2f}")
print("one head points better than the mean over heads:", pointing["student, one head"] > pointing["student before"])

# %%
# One scene, word by word
# -----------------------
# Rows are the sources, columns the first four colour and shape words of
# the scene. The oracle is the answer. The diffusion teacher
# localises above chance but diffusely (its maps are 8 x 8 over a 48-pixel
# image, averaged over low-noise timesteps). The student's mean attention
# over its 3 x 3 grid of image tokens already points at the named object
# about nine times in ten, and a few steps of alignment with the oracle
# make it sharper: the paper's premise, that a VLM's text-to-image
# attention is too diffuse to ground words, does not hold for this small
# model, which is why Lavender has little to teach it here (the benchmark on
# the Lavender page measures this over more steps).
scene = test_objects[test_objects.scene == 0]
shown = list(dict.fromkeys(w for pair in zip(scene["color"], scene["shape"]) for w in pair))[:4]
fig, axes = plt.subplots(len(maps), len(shown) + 1, figsize=(2.1 * (len(shown) + 1), 2.1 * len(maps)))
for row, (name, these) in zip(axes, maps.items()):
    row[0].imshow(test_images[0])
    row[0].set_ylabel(name, fontsize=9)
    for axis, word in zip(row[1:], shown):
        axis.imshow(these[0][word], cmap="magma", vmin=0, vmax=1, extent=(0, 48, 48, 0))
        axis.set_title(word, fontsize=9)
    for axis in row:
        axis.set_xticks([])
        axis.set_yticks([])
fig.tight_layout()
plt.show()
