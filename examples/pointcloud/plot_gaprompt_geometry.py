"""
What GAPrompt does to a point cloud
===================================

:class:`~skicml.pointcloud.GAPromptClassifier` prompts a frozen Point-MAE
backbone at the level of geometry before any token is made. Here it is
fitted for a few epochs on shapes in clutter, with the shipped
``tiny-pointmae`` backbone, and one test cloud is drawn three ways:

1. the cloud as the backbone groups it: farthest-point-sampled centres
   (black) and six of their nearest-neighbour groups (colours);
2. the Point Shift Prompter's learned displacement of every point
   (``x' = x + shift_scale * delta(x) * x``), as arrows from the input to the
   shifted point, longest first;
3. the size of the displacement per point: where the prompter deforms the
   shape.

The point prompts (a few learnable points appended to every cloud) sit
near the origin and are drawn as red stars in the first panel.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch

from skicml.datasets import POINT_CLOUD_CLASSES, make_point_clouds
from skicml.ops import farthest_point_sample, knn
from skicml.pointcloud import GAPromptClassifier
from skicml.pointcloud._model import invariant_start_index

train = make_point_clouds(160, n_points=128, variant="obj_bg", random_state=0)
test = make_point_clouds(40, n_points=128, variant="obj_bg", random_state=1)
model = GAPromptClassifier(n_points=128, n_groups=16, max_epochs=3, lr=2e-3, warmup_epochs=1, random_state=0)
model.fit(train.points, train.target)
print(f"test accuracy after 3 epochs: {model.score(test.points, test.target):.2f} "
      f"({model.n_trainable_params_:,} trainable parameters, {model.trainable_ratio_:.1%} of the model)")

cloud = test.points[0]
shifted = model.shift_points(cloud[None])[0]
prompts = (model.module_.point_prompt_factor * model.module_.point_prompt[0]).detach().numpy()
scene = torch.as_tensor(np.concatenate([shifted, prompts])[None], dtype=torch.float32)
centres = farthest_point_sample(scene, 16, invariant_start_index(scene))
_, groups = knn(scene[0, centres[0]][None], scene, 16)
scene = scene[0].numpy()

fig = plt.figure(figsize=(13, 4.5))
ax = fig.add_subplot(1, 3, 1, projection="3d")
ax.scatter(*scene[:-len(prompts)].T, s=2, c="lightgray")
for colour, group in zip(plt.cm.tab10.colors, groups[0, :6].numpy()):
    ax.scatter(*scene[group].T, s=8, color=colour)
ax.scatter(*scene[centres[0].numpy()].T, s=14, c="black")
ax.scatter(*prompts.T, s=60, c="red", marker="*")
ax.set_title(f"{POINT_CLOUD_CLASSES[test.target[0]]}: 16 centres, 6 of their groups")

moved = np.linalg.norm(shifted - cloud, axis=1)
ax = fig.add_subplot(1, 3, 2, projection="3d")
longest = np.argsort(moved)[-40:]
ax.scatter(*cloud.T, s=2, c="lightgray")
ax.quiver(*cloud[longest].T, *(shifted - cloud)[longest].T, color="tab:blue", length=1.0, normalize=False)
ax.set_title("learned point shifts (40 longest)")

ax = fig.add_subplot(1, 3, 3, projection="3d")
points = ax.scatter(*cloud.T, s=4, c=moved, cmap="viridis")
fig.colorbar(points, ax=ax, shrink=0.6, label="|x' - x|")
ax.set_title("how far each point moves")
for ax in fig.axes[:3]:
    ax.set_axis_off()
fig.tight_layout()
print(f"points moved by {moved.mean():.4f} on average (max {moved.max():.4f}) in unit-sphere units")
plt.show()
