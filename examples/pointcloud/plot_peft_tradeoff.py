"""
Accuracy against trainable parameters
=====================================

Every fine-tuning method of :class:`~skicml.pointcloud.GAPromptClassifier`
runs on one code path, so they can be compared on equal terms: the same
shipped backbone, the same data, the same head, epochs and seed. This is a
small, fast run (a few epochs on shapes in clutter); the recorded benchmark
(``benchmarks/bench_pointcloud_peft.py``, doc/performance.rst) trains longer,
on the occluded variant, over three seeds.

The x axis is the share of the model's parameters each method trains: full
fine-tuning trains everything, the others train the head plus their own
small modules on the frozen backbone.
"""

import matplotlib.pyplot as plt

from skicml.datasets import make_point_clouds
from skicml.pointcloud import GAPromptClassifier

train = make_point_clouds(160, n_points=128, variant="obj_bg", random_state=0)
test = make_point_clouds(100, n_points=128, variant="obj_bg", random_state=1)

results = {}
for method in ("gaprompt", "full", "linear", "prompt", "adapter"):
    model = GAPromptClassifier(peft=method, n_points=128, n_groups=16, max_epochs=3, lr=2e-3, warmup_epochs=1,
                               validation_fraction=None, random_state=0)
    model.fit(train.points, train.target)
    results[method] = (model.trainable_ratio_, model.score(test.points, test.target))
    print(f"{method:9s} trains {model.n_trainable_params_:9,d} parameters ({model.trainable_ratio_:6.1%}), "
          f"test accuracy {results[method][1]:.2f}")

fig, ax = plt.subplots(figsize=(6, 4))
for method, (ratio, accuracy) in results.items():
    ax.scatter(100 * ratio, accuracy, s=60)
    ax.annotate(method, (100 * ratio, accuracy), textcoords="offset points", xytext=(6, 4))
ax.set_xscale("log")
ax.set_xlabel("trainable parameters (% of the model, log scale)")
ax.set_ylabel("test accuracy")
ax.set_title("fine-tuning methods on one backbone (3 epochs)")
fig.tight_layout()
plt.show()
