"""
A video world model in and out of distribution
==============================================

:class:`~skicml.video.VideoWorldModel` sees the first three frames of a
ball in uniform motion and generates the next five. The shipped model
(``"physics-world-model-uniform32"``, see ``skicml info --verbose``) was
trained for 3,200 steps on 3,000 clips of 32 px with speeds in [1, 4] and
radii in [0.7, 1.4]. Here it rolls out one clip inside that range and two outside
it, slower and faster than anything it saw, beside the truth; the speed of
each rollout is parsed back from its pixels
(:func:`~skicml.video.infer_attributes`). Kang et al. (ICML 2025) find that
video models match the law in distribution and fall back on the nearest
training case out of it; the benchmark in the user guide measures this on
the whole evaluation grid.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skicml.datasets import make_physics_videos
from skicml.video import VideoWorldModel, infer_attributes

clips = pd.DataFrame({"r1": [1.0, 1.0, 1.0], "v1": [2.5, 0.5, 5.5]})
names = ["in distribution (v = 2.5)", "slower than training (v = 0.5)", "faster than training (v = 5.5)"]
data = make_physics_videos("uniform", params=clips, n_frames=8, min_frames_in_view=8, random_state=3)
X, y = data.videos[:, :3], data.videos[:, 3:]

# max_epochs=0: the shipped network as it is; fit only reads the clips' layout.
model = VideoWorldModel(pretrained="physics-world-model-uniform32", max_epochs=0, n_sampling_steps=10,
                        random_state=0).fit(X, y)
rollouts = model.predict(X, return_full=True)

generated = infer_attributes(rollouts, n_cond_frames=3, colors=["red"])
true_speed = infer_attributes(data.videos, n_cond_frames=3, colors=["red"])["velocity"]
for name, v, v_true, v_generated in zip(names, clips["v1"], true_speed, generated["velocity"]):
    nearest = np.clip(v, 1.0, 4.0)
    print(f"{name:<32} parsed speed: truth {v_true:5.2f}, rollout {v_generated:5.2f} "
          f"(nearest training speed {nearest:.1f})")

figure, axes = plt.subplots(2 * len(clips), 8, figsize=(10, 2.6 * len(clips)))
for row, name in enumerate(names):
    for frame in range(8):
        for offset, (video, label) in enumerate(((data.videos, "truth"), (rollouts, "model"))):
            axis = axes[2 * row + offset, frame]
            axis.imshow(video[row, frame])
            axis.set_xticks([])
            axis.set_yticks([])
            if frame == 0:
                axis.set_ylabel(label, fontsize=8)
            if frame >= 3 and offset == 1:
                for side in axis.spines.values():
                    side.set_edgecolor("crimson")
    axes[2 * row, 0].set_title(name, loc="left", fontsize=9)
figure.suptitle("frames 0-2 given, 3-7 generated (red frames)", fontsize=10)
figure.tight_layout()
plt.show()
