"""
Keyframes of a long video for a question
========================================

A rendered long video of drifting shapes hides a four-frame event: an object
of the asked colour appears. :class:`~skicml.video.CLIPVideoEncoder` embeds
every frame, its 8 x 8 patches and the question with the tiny CLIP that
ships with skicml; :func:`~skicml.video.select_keyframes` takes the frames
most relevant to the question that are not near-duplicates of a frame
already taken, and :func:`~skicml.video.merge_features` turns every other
frame into one token, weighting the patches that match the question and
differ from the reference keyframe.

The tiny CLIP was trained on captions that name a shape, so the question
"a yellow object" is embedded as the mean of the captions naming a yellow
circle, square or triangle (a real CLIP, passed as ``embedder``, would read
the question as it is).
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from skicml.datasets import make_needle_videos
from skicml.video import CLIPVideoEncoder, merge_features, select_keyframes

data = make_needle_videos(1, n_frames=400, random_state=0)
frames, question, event = data.videos[0], data.queries[0], data.needle_frames[0]
encoder = CLIPVideoEncoder().fit([(frames, question)])
video = encoder.transform_videos([(frames, question)])[0]
colour = data.query_colors[0]
captions = [f"a {size} {colour} {shape}" for size in ("small", "large") for shape in ("circle", "square", "triangle")]
query = encoder.text_embedder_.transform(captions).mean(0)

keyframes = select_keyframes(torch.from_numpy(video.frames), torch.from_numpy(query), max_keyframes=8)
tokens, types, weights = merge_features(torch.from_numpy(video.patches), torch.from_numpy(query), keyframes,
                                        return_weights=True)
units = video.frames / np.linalg.norm(video.frames, axis=1, keepdims=True)
relevance = units @ (query / np.linalg.norm(query))
print(f"question: {question!r}; event frames {event.tolist()}; keyframes {keyframes.tolist()}")
print(f"event found: {bool(set(keyframes.tolist()) & set(event.tolist()))}")
print(f"{len(frames) * encoder.n_patches_} patch tokens -> {len(tokens)} tokens "
      f"({int(types.sum())} keyframe patches, {int((types == 0).sum())} merged frames)")

figure = plt.figure(figsize=(10, 6.5))
timeline = figure.add_axes([0.07, 0.55, 0.9, 0.38])
timeline.plot(relevance, color="0.3", lw=1, label="cosine with the question")
timeline.axvspan(event[0] - 0.5, event[-1] + 0.5, color="gold", alpha=0.5, label="the event")
timeline.scatter(keyframes, relevance[keyframes], color="crimson", zorder=3, label="keyframes")
timeline.set_xlabel("frame")
timeline.set_ylabel("relevance")
timeline.set_title(f"Keyframes for {question!r}")
timeline.legend(loc="lower right", fontsize=8)
for i, frame in enumerate(keyframes.tolist()):
    thumb = figure.add_axes([0.07 + i * 0.115, 0.27, 0.1, 0.18])
    thumb.imshow(frames[frame])
    thumb.set_title(f"frame {frame}", fontsize=8)
    thumb.axis("off")
# Merge weights of the frames just before and after the event, on the 8 x 8 patch grid.
merged = [f for f in (event[0] - 40, event[0] - 1, event[-1] + 1, event[-1] + 40) if f not in keyframes]
for i, frame in enumerate(merged[:4]):
    ax = figure.add_axes([0.07 + i * 0.23, 0.02, 0.1, 0.18])
    ax.imshow(frames[frame])
    ax.set_title(f"frame {frame}", fontsize=8)
    ax.axis("off")
    ax = figure.add_axes([0.18 + i * 0.23, 0.02, 0.1, 0.18])
    ax.imshow(weights[frame].numpy().reshape(8, 8), cmap="magma")
    ax.set_title("merge weights", fontsize=8)
    ax.axis("off")
plt.show()
