"""
A rendered collision and its parsed trajectory
==============================================

The physics testbed's evaluation reads a video back into numbers: each
ball is found by its colour in every frame
(:func:`~skicml.video.parse_object_states`), its centre and radius
recovered from the antialiased pixels, and the velocities compared with
the law (:func:`~skicml.video.velocity_error`). Here one elastic collision
of a small fast red ball and a large slow blue one is rendered at 64 px;
the parsed centres are drawn over the frames, and the parsed velocities,
before and after the collision, beside the law's (masses ``r^2``).
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from skicml.datasets import make_physics_videos
from skicml.video import parse_object_states, velocity_error

params = pd.DataFrame({"r1": [0.7], "v1": [3.5], "r2": [1.2], "v2": [1.0]})
data = make_physics_videos("collision", params=params, resolution=64, n_frames=24, random_state=0)
video, truth = data.videos[0], data.states[0]
parsed = parse_object_states(data.videos)[0]  # (frames, balls, (x, y, r))

errors = velocity_error(data.videos, data.params, "collision", states_true=data.states)
print(errors[["collision_frame", "pre_vel_err", "post_vel_err", "momentum_err", "energy_err"]].round(4).to_string())
print(f"largest position error of the parse: {np.nanmax(np.abs(parsed[..., :2] - truth)):.4f} world units")

# The law: 1-D elastic collision, masses proportional to r^2.
m1, m2 = 0.7 ** 2, 1.2 ** 2
u1, u2 = 3.5, -1.0
w1 = ((m1 - m2) * u1 + 2 * m2 * u2) / (m1 + m2)
w2 = ((m2 - m1) * u2 + 2 * m1 * u1) / (m1 + m2)
velocities = np.diff(parsed[:, :, 0], axis=0) / 0.1
print(f"law after the collision: red {w1:+.3f}, blue {w2:+.3f} units/s")
print(f"parsed in the last frames: red {velocities[-3:, 0].mean():+.3f}, blue {velocities[-3:, 1].mean():+.3f}")

shown = [0, 6, 12, 18, 23]
figure, axes = plt.subplots(1, len(shown) + 1, figsize=(13, 2.6),
                            gridspec_kw={"width_ratios": [1] * len(shown) + [1.6]})
size = video.shape[1]


def to_pixels(xy):
    """World (x, y) to image (column, row): pixel centres at (j + 0.5) / W of the world, y up."""
    return xy[..., 0] / 10 * size - 0.5, (1 - xy[..., 1] / 10) * size - 0.5


for axis, frame in zip(axes, shown):
    axis.imshow(video[frame])
    for ball, colour in ((0, "darkred"), (1, "navy")):
        columns, rows = to_pixels(parsed[:frame + 1, ball, :2])
        axis.plot(columns, rows, ".-", color=colour, markersize=3, linewidth=1)
    axis.set_title(f"frame {frame}")
    axis.axis("off")
time = np.arange(1, len(video)) * 0.1
axes[-1].plot(time, velocities[:, 0], "r.-", label="red, parsed")
axes[-1].plot(time, velocities[:, 1], "b.-", label="blue, parsed")
law = np.diff(truth[:, :, 0], axis=0) / 0.1
axes[-1].plot(time, law[:, 0], color="r", alpha=0.3, linewidth=4, label="the law")
axes[-1].plot(time, law[:, 1], color="b", alpha=0.3, linewidth=4)
axes[-1].set_xlabel("time (s)")
axes[-1].set_ylabel("x velocity (units/s)")
axes[-1].legend(fontsize=7)
figure.tight_layout()
plt.show()
