"""Offline data for skicml: ``make_*`` synthetic generators and ``load_*``
readers of data that installed packages ship. Nothing here downloads.

The method families add their generators here (``make_shape_scenes``,
``make_wearable_cohort``, ...) as they land.
"""

from ._contexture import make_context_blobs, make_planted_spectrum
from ._graph_domains import make_graph_domains, make_semantic_graph_domains
from ._molecules import HARTREE_TO_EV, load_nci_tpsa, load_qm9, make_triangle_graphs, qm9_split
from ._object_scenes import (
    free_object_scene_words,
    make_free_object_scenes,
    make_object_scenes,
    object_classes,
    object_partners,
)
from ._physics import (
    PHYSICS_ID_RANGES,
    PHYSICS_OOD_VALUES,
    make_attribute_pair_split,
    make_collision_hole_split,
    make_flip_split,
    make_gap_split,
    make_physics_eval,
    make_physics_videos,
    ood_bucket,
)
from ._physics_templates import (
    HELD_OUT_TEMPLATES,
    PHYSICS_TEMPLATES,
    TEMPLATE_OBJECTS,
    make_template_scenes,
    make_template_split,
)
from ._physics_world import (
    PHYSICS_COLORS,
    PHYSICS_SCENARIOS,
    PHYSICS_SHAPES,
    physics_pixel_centers,
    render_videos,
    simulate_physics,
)
from ._point_clouds import POINT_CLOUD_CLASSES, make_point_clouds
from ._shapes import (
    CAPTION_PERTURBATIONS,
    CORRUPTIONS,
    SHAPE_COLORS,
    SHAPE_NAMES,
    SHAPE_SIZES,
    SHAPE_TEXTURES,
    corrupt_images,
    make_shape_scenes,
    perturb_captions,
)
from ._video import load_sample_videos, make_needle_embeddings, make_needle_videos
from ._wearable import load_wearable_example, make_wearable_cohort, wearable_variables, wearable_week_labels

__all__ = [
    "CAPTION_PERTURBATIONS",
    "CORRUPTIONS",
    "HARTREE_TO_EV",
    "HELD_OUT_TEMPLATES",
    "PHYSICS_COLORS",
    "PHYSICS_ID_RANGES",
    "PHYSICS_OOD_VALUES",
    "PHYSICS_SCENARIOS",
    "PHYSICS_SHAPES",
    "PHYSICS_TEMPLATES",
    "POINT_CLOUD_CLASSES",
    "SHAPE_COLORS",
    "SHAPE_NAMES",
    "SHAPE_SIZES",
    "SHAPE_TEXTURES",
    "TEMPLATE_OBJECTS",
    "corrupt_images",
    "free_object_scene_words",
    "load_nci_tpsa",
    "load_qm9",
    "load_sample_videos",
    "load_wearable_example",
    "make_attribute_pair_split",
    "make_collision_hole_split",
    "make_context_blobs",
    "make_flip_split",
    "make_free_object_scenes",
    "make_gap_split",
    "make_graph_domains",
    "make_needle_embeddings",
    "make_needle_videos",
    "make_object_scenes",
    "make_physics_eval",
    "make_physics_videos",
    "make_planted_spectrum",
    "make_point_clouds",
    "make_semantic_graph_domains",
    "make_shape_scenes",
    "make_template_scenes",
    "make_template_split",
    "make_triangle_graphs",
    "make_wearable_cohort",
    "object_classes",
    "object_partners",
    "ood_bucket",
    "perturb_captions",
    "physics_pixel_centers",
    "qm9_split",
    "render_videos",
    "simulate_physics",
    "wearable_variables",
    "wearable_week_labels",
]
