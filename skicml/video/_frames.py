"""Frame-array input of the video domain, shared by its methods."""

from __future__ import annotations

import numpy as np

from ..utils.images import check_pixel_values

__all__ = ["check_video_frames"]


def check_video_frames(video, name="video"):
    """One video as a ``(n_frames, height, width, 3)`` array, or a clear error.

    uint8 frames are taken as they are; float frames must be intensities in
    [0, 1]; grey ``(n_frames, height, width)`` videos get three channels and
    an alpha channel is dropped.

    Parameters
    ----------
    video : array-like
    name : str, default="video"
        How the error messages call it.

    Returns
    -------
    ndarray of shape (n_frames, height, width, 3)
        uint8, or float32 for float input.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.video import check_video_frames
    >>> check_video_frames(np.zeros((4, 8, 8), dtype=np.uint8)).shape
    (4, 8, 8, 3)
    """
    array = np.asarray(video)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.integer) or
                                     np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"{name} must be a numeric array of frames, got dtype {array.dtype}.")
    if array.ndim == 3:
        array = np.repeat(array[..., None], 3, axis=-1)
    if array.ndim != 4 or array.shape[-1] not in (1, 3, 4):
        raise ValueError(f"{name} must be (n_frames, height, width, 3) frames, got shape {array.shape}.")
    if array.shape[0] == 0:
        raise ValueError(f"{name} has no frames.")
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    array = array[..., :3]
    try:
        check_pixel_values(array)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    dtype = np.float32 if np.issubdtype(array.dtype, np.floating) else np.uint8
    return np.ascontiguousarray(array, dtype=dtype)
