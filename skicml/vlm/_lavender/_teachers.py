"""Teachers: where each word of a caption should look in the image.

A teacher has ``word_maps(images, captions) -> list of {word: (R, R) map}``
(and may have ``fit(images, captions)``). :class:`OracleMaskTeacher` reads
the answer off the scene generator's object masks: the upper bound a
diffusion teacher can approach, and the positive control of the tests.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .._grounding import oracle_word_maps

__all__ = ["OracleMaskTeacher"]


def _fingerprint(image):
    image = np.ascontiguousarray(image)
    return hashlib.sha1(image.tobytes() + str(image.shape).encode()).hexdigest()


class OracleMaskTeacher:
    """Per-word maps from ground-truth object masks: each colour and shape word covers its objects.

    Built from scenes of :func:`skicml.datasets.make_object_scenes` drawn
    with ``return_masks=True``; ``word_maps`` finds each image among them by
    its pixels, so any subset or order of those images can be asked for.

    Parameters
    ----------
    images : ndarray of shape (n, S, S, 3)
        The scenes' images.
    objects : pandas.DataFrame
        Their objects table.
    masks : ndarray of shape (n, max_objects, S, S), dtype bool
        Their object masks.
    resolution : int, default=8
        Side of the maps.

    Examples
    --------
    >>> from skicml.datasets import make_object_scenes
    >>> from skicml.vlm import OracleMaskTeacher
    >>> images, captions, objects, masks = make_object_scenes(4, return_masks=True, random_state=0)
    >>> teacher = OracleMaskTeacher(images, objects, masks)
    >>> maps = teacher.word_maps(images[:2], captions[:2])
    >>> sorted(maps[0]) == sorted(set(objects[objects.scene == 0][["color", "shape"]].to_numpy().ravel()))
    True
    """

    def __init__(self, images, objects, masks, resolution=8):
        images = np.asarray(images)
        if len(images) != len(masks):
            raise ValueError(f"images has {len(images)} scenes but masks has {len(masks)}.")
        self.resolution = int(resolution)
        self._maps = oracle_word_maps(objects, masks, self.resolution)
        self._index = {_fingerprint(image): i for i, image in enumerate(images)}

    def fit(self, images=None, captions=None):
        return self

    def word_maps(self, images, captions=None):
        """``{word: (R, R) map}`` of each image, for the colour and shape words of its objects."""
        found = []
        for i, image in enumerate(images):
            index = self._index.get(_fingerprint(np.asarray(image)))
            if index is None:
                raise ValueError(f"image {i} is not one of the scenes this OracleMaskTeacher was built from; "
                                 "build it from the scenes you fit on (make_object_scenes(..., return_masks=True)).")
            found.append(self._maps[index])
        return found
