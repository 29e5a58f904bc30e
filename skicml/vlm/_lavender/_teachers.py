"""Teachers: where each word of a caption should look in the image.

A teacher has ``word_maps(images, captions) -> list of {word: (R, R) map}``
(and may have ``fit(images, captions)``). :class:`OracleMaskTeacher` reads
the answer off the scene generator's object masks: the upper bound a
diffusion teacher can approach, and the positive control of the tests.
:class:`PrecomputedTeacher` reads maps from the official code's on-disk
layout, which :func:`save_word_maps` writes (from any teacher's maps): the
layout the official repository loads but never documents how to produce
(its issue #3).

The layout, one folder per image named after the image file::

    <root>/<image name>/lpm_attention/<subdir>/attention_<word>.jpg

each file an 8-bit grey JPEG of the word's map (any square size), read as
values in [0, 1].
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from .._grounding import check_word_maps, oracle_word_maps, resize_map

__all__ = ["OracleMaskTeacher", "PrecomputedTeacher", "save_word_maps"]

_PREFIX, _SUFFIX = "attention_", ".jpg"


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


def _image_names(names):
    names = [Path(str(n)).name for n in names]
    bad = [n for n in names if not n or n in (".", "..")]
    if bad:
        raise ValueError(f"image names must be file names; got {bad[:3]}.")
    return names


def save_word_maps(root, names, word_maps, subdir="0", size=32):
    """Write per-word maps in the official on-disk layout that :class:`PrecomputedTeacher` reads.

    Parameters
    ----------
    root : path-like
        Folder to write under (created if needed).
    names : sequence of str
        The image file name of each entry of ``word_maps`` (a path's last
        component is used).
    word_maps : list of dict
        ``{word: (R, R) map}`` per image, values in [0, 1] (others are
        refused), as any teacher returns them.
    subdir : str, default="0"
        The folder level between ``lpm_attention`` and the files.
    size : int, default=32
        Side of the written JPEGs (the official maps are 32 x 32).

    Returns
    -------
    int
        Files written.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from skicml.vlm import PrecomputedTeacher, save_word_maps
    >>> root = tempfile.mkdtemp()
    >>> save_word_maps(root, ["cat.jpg"], [{"red": np.eye(8)}])
    1
    >>> maps = PrecomputedTeacher(root, resolution=8).word_maps(names=["cat.jpg"])
    >>> maps[0]["red"].shape
    (8, 8)
    """
    from PIL import Image

    names = _image_names(names)
    checked = check_word_maps(list(word_maps), len(names), size, name="word_maps")
    written = 0
    for name, maps in zip(names, checked):
        folder = Path(root) / name / "lpm_attention" / str(subdir)
        folder.mkdir(parents=True, exist_ok=True)
        for word, word_map in maps.items():
            if not word or os.sep in word or word in (".", ".."):
                continue
            pixels = np.clip(np.round(word_map * 255.0), 0, 255).astype(np.uint8)
            Image.fromarray(pixels, mode="L").save(folder / f"{_PREFIX}{word}{_SUFFIX}", quality=95)
            written += 1
    return written


class PrecomputedTeacher:
    """Per-word maps read from the official on-disk layout (Stable Diffusion maps made elsewhere).

    Parameters
    ----------
    root : path-like
        The folder holding one folder per image (see the module's layout).
    resolution : int, default=32
        Side the maps are area-resized to.

    Notes
    -----
    Maps are keyed by word, lower-cased; a word with files in several
    subfolders is averaged over them. An image with no folder under
    ``root`` raises an error naming it: a missing teacher map is not
    silently an empty one.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from skicml.vlm import PrecomputedTeacher, save_word_maps
    >>> root = tempfile.mkdtemp()
    >>> _ = save_word_maps(root, ["a.png", "b.png"], [{"circle": np.eye(4)}, {"red": np.ones((4, 4))}])
    >>> [sorted(m) for m in PrecomputedTeacher(root, resolution=4).word_maps(names=["b.png", "a.png"])]
    [['red'], ['circle']]
    """

    def __init__(self, root, resolution=32):
        self.root = root
        self.resolution = int(resolution)

    def fit(self, images=None, captions=None):
        return self

    def word_maps(self, images=None, captions=None, names=None):
        """``{word: (R, R) map}`` of each image, read from ``root/<name>/lpm_attention/*/attention_*.jpg``.

        Parameters
        ----------
        images : ignored
            The maps are found by name; kept for the teacher protocol.
        captions : ignored
        names : sequence of str
            The image file names (or paths: their last component is used).
        """
        from PIL import Image

        if names is None:
            raise ValueError("PrecomputedTeacher finds maps by image file name: pass names= (the tuner passes "
                             "them when X holds image paths).")
        maps = []
        for name in _image_names(names):
            folder = Path(self.root) / name / "lpm_attention"
            if not folder.is_dir():
                raise ValueError(f"no teacher maps for image {name!r}: {folder} does not exist.")
            found = {}
            for path in sorted(folder.glob(f"*/{_PREFIX}*{_SUFFIX}")):
                word = path.name[len(_PREFIX):-len(_SUFFIX)].strip().lower()
                with Image.open(path) as image:
                    pixels = np.asarray(image.convert("L"), dtype=np.float32) / 255.0
                if pixels.shape[0] != pixels.shape[1]:
                    raise ValueError(f"{path} is not square ({pixels.shape}).")
                found.setdefault(word, []).append(resize_map(pixels, self.resolution))
            maps.append({word: np.mean(stack, axis=0).astype(np.float32) for word, stack in found.items()})
        return maps
