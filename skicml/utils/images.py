"""Image and caption inputs, shared by every family that reads pictures or text.

What an estimator of images accepts (PIL images, file paths, arrays of one
image or of a batch, rows of flattened images), how those are checked and
brought to one canonical form, and open_clip's evaluation preprocessing
(resize, centre crop or pad, normalise) done in torch on float images, so
that a family needs neither torchvision nor open_clip to feed a CLIP-style
vision tower. PIL is imported only by the functions that need it.

Canonical forms:

- a batch of images is an ``(n, H, W, C)`` array with ``C`` in 1, 3 or 4,
  integers in 0..255 or floats (intensities in [0, 1]); an ``(n, H, W)``
  array of grey images becomes ``(n, H, W, 1)``;
- a list of images holds PIL images, paths (``str``) and ``(H, W)`` or
  ``(H, W, C)`` arrays, in input order;
- captions are a list of ``str``.
"""

from __future__ import annotations

import os

import numpy as np
import torch
from scipy import sparse

__all__ = [
    "OUT_OF_RANGE_ROW_CHECKS",
    "as_rgb",
    "check_captions",
    "check_images",
    "check_pixel_rows",
    "check_pixel_values",
    "image_input_kind",
    "images_from_rows",
    "out_of_range_row_checks",
    "pil_from_array",
    "preprocess_images",
]


def image_input_kind(X, image_column=None):
    """What an input of an image-or-text estimator holds.

    Parameters
    ----------
    X : object
        What a user passed to ``fit`` or ``transform``.
    image_column : str or None, default=None
        The column of images of the data frames the caller reads (the vlm
        estimators' ``"image"``), named by the error a data frame without it
        gets.

    Returns
    -------
    {"embedding", "strings", "image"}
        ``"strings"`` for captions or image paths (a list, tuple or 1-D
        array of ``str`` or path-like), ``"image"`` for a batch of images (a
        list of PIL images or of arrays with at least two dimensions, or a
        3-D or 4-D numeric array or tensor: ``(n, H, W)`` grey images or
        ``(n, H, W, C)``), and ``"embedding"`` for anything else, which is
        left to scikit-learn's validation (2-D rows, sparse matrices, data
        frames, an empty list). A 2-D array is always rows (flattened
        images or embeddings), never one image: pass a list to give one.

    Raises
    ------
    ValueError
        If ``X`` is a single string rather than one string per sample, or a
        data frame with a column of images, arrays or strings (a data frame
        is read as rows of numbers).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.utils.images import image_input_kind
    >>> image_input_kind(np.zeros((2, 32, 32, 3), dtype=np.uint8))
    'image'
    >>> image_input_kind(["a red circle", "a blue square"])
    'strings'
    >>> image_input_kind(np.zeros((2, 32, 32), dtype=np.uint8))
    'image'
    >>> image_input_kind(np.zeros((2, 8)))
    'embedding'
    """
    from PIL import Image

    if isinstance(X, str):
        raise ValueError(
            "X is a single string; pass a list of captions or image paths (one per sample)."
        )
    if isinstance(X, (list, tuple)):
        if not X:
            return "embedding"
        first = X[0]
        if isinstance(first, (str, os.PathLike)):
            return "strings"
        if isinstance(first, Image.Image) or (isinstance(first, np.ndarray) and first.ndim >= 2):
            return "image"
        return "embedding"
    if isinstance(X, torch.Tensor):
        return "image" if X.dim() in (3, 4) else "embedding"
    if sparse.issparse(X):
        return "embedding"
    if hasattr(X, "iloc"):
        if getattr(X, "ndim", 2) == 2:
            _check_frame_of_numbers(X, image_column)
            return "embedding"
        X = X.to_numpy()
    if not hasattr(X, "__array__"):
        return "embedding"
    array = np.asarray(X)
    if array.ndim == 1 and array.size and array.dtype.kind in "USO" and all(
            isinstance(v, (str, os.PathLike)) for v in array):
        return "strings"
    if array.ndim in (3, 4) and array.dtype.kind in "biuf":
        return "image"
    return "embedding"


def _check_frame_of_numbers(X, image_column):
    """Refuse a data frame with a column of images, arrays or strings, naming the column and what to pass."""
    from PIL import Image

    for name in X.columns:
        column = X[name]
        if column.dtype.kind in "biufcmM":
            continue
        values = column.dropna()
        first = values.iloc[0] if len(values) else None
        if isinstance(first, (str, os.PathLike)):
            holds = "strings"
        elif isinstance(first, Image.Image) or (
                isinstance(first, (np.ndarray, list, tuple, torch.Tensor)) and np.ndim(first) >= 1):
            holds = "images or arrays"
        else:
            continue
        if image_column is not None:
            raise ValueError(
                f"X is a data frame without an {image_column!r} column, and its column {name!r} holds {holds}: "
                f"put the images in a column named {image_column!r} (a data frame without one is read as rows "
                "of numbers, flattened images), or pass the images as an array or a list."
            )
        raise ValueError(
            f"X is a data frame whose column {name!r} holds {holds}; a data frame is read as rows of numbers "
            f"(flattened images). Pass the images as an array or a list (X[{name!r}].tolist())."
        )


def check_captions(X):
    """Captions as a non-empty list of strings.

    Parameters
    ----------
    X : list, tuple, 1-D array or Series of str

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        If ``X`` is a single string, not one-dimensional, holds anything but
        strings, or is empty.
    """
    if isinstance(X, str):
        raise ValueError("X is a single string; pass a list of captions.")
    if hasattr(X, "to_numpy"):
        X = X.to_numpy()
    if isinstance(X, np.ndarray):
        if X.ndim != 1:
            raise ValueError(
                f"captions must be a 1-D sequence of strings; got an array with {X.ndim} dimensions."
            )
        X = X.tolist()
    try:
        texts = list(X)
    except TypeError as exc:
        raise ValueError(f"captions must be a list of strings, got {type(X).__name__}.") from exc
    bad = [type(t).__name__ for t in texts if not isinstance(t, str)]
    if bad:
        raise ValueError(f"captions must be strings; got {bad[0]} among them.")
    if not texts:
        raise ValueError("Found 0 captions (0 samples); at least one is required.")
    return texts


def check_images(X, image_shape=None):
    """Images in one of the two canonical forms, checked.

    Parameters
    ----------
    X : array-like, tensor or sequence
        A batch of shape ``(n, H, W, C)`` (array or tensor) with 1, 3 or 4
        channels, a batch of grey images of shape ``(n, H, W)`` (returned
        as ``(n, H, W, 1)``), or a sequence of PIL images, paths of existing
        files and ``(H, W)`` / ``(H, W, C)`` arrays.
    image_shape : tuple of int or None, default=None
        The ``(height, width)`` the caller expects, if any. A 3-D batch
        whose last axis has 1, 3 or 4 entries could also be one ``(H, W,
        C)`` image, so it is refused unless its ``(H, W)`` equal
        ``image_shape``.

    Returns
    -------
    ndarray of shape (n, H, W, C) or list
        The batch as an array, or a list of PIL images, paths (as ``str``)
        and arrays. Pixel values are checked by :func:`check_pixel_values`.

    Raises
    ------
    ValueError
        If a batch has the wrong shape, an item is not an image, there are
        no images, or pixel values are out of range (integers outside
        0..255, floats outside [0, 1] or not finite).
    FileNotFoundError
        If a path names no file.
    """
    from PIL import Image

    if isinstance(X, str):
        raise ValueError("X is a single string; pass a list of image paths.")
    if isinstance(X, torch.Tensor):
        X = X.detach().cpu().numpy()
    if hasattr(X, "to_numpy") and getattr(X, "ndim", 2) == 1:
        X = X.to_numpy()
    if isinstance(X, np.ndarray) and X.dtype.kind not in "USO":
        if X.ndim == 3 and X.dtype.kind in "biuf":
            expected = None if image_shape is None else tuple(int(v) for v in image_shape)
            if expected is not None and len(expected) == 3 and expected[-1] == 1:
                expected = expected[:2]
            if X.shape[-1] in (1, 3, 4) and X.shape[1:] != expected:
                raise ValueError(
                    f"a 3-D array of shape {X.shape} is read as grey images (n_images, height, width), "
                    f"but its last axis ({X.shape[-1]}) looks like the channels of a single image. Pass "
                    "one image as X[None] or [X], or grey images as X[..., None]."
                )
            X = X[..., None]
        if X.ndim != 4 or X.shape[-1] not in (1, 3, 4):
            raise ValueError(
                f"images as an array must have 4 dimensions (n_images, height, width, channels) with "
                f"1, 3 or 4 channels, or 3 (n_images, height, width) for grey images; got shape "
                f"{X.shape}. A 2-D array is read as flattened images."
            )
        if X.shape[0] == 0:
            raise ValueError("Found 0 images (0 samples); at least one is required.")
        check_pixel_values(X)
        return X
    try:
        items = list(X)
    except TypeError as exc:
        raise ValueError(
            f"images must be a list of PIL images, paths or arrays, got {type(X).__name__}."
        ) from exc
    if not items:
        raise ValueError("Found 0 images (0 samples); at least one is required.")
    out = []
    for item in items:
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if isinstance(item, str):
            if not os.path.isfile(item):
                raise FileNotFoundError(f"image file {item!r} does not exist.")
            out.append(item)
        elif isinstance(item, Image.Image):
            out.append(item)
        else:
            array = np.asarray(item)
            if array.dtype.kind not in "biuf" or array.ndim not in (2, 3) or (
                    array.ndim == 3 and array.shape[-1] not in (1, 3, 4)):
                raise ValueError(
                    f"an image must be a PIL image, a path, or an array of shape (H, W) or (H, W, 1|3|4); "
                    f"got {type(item).__name__} with shape {getattr(array, 'shape', None)}."
                )
            check_pixel_values(array)
            out.append(array)
    return out


def check_pixel_values(array):
    """Check that integer pixels lie in 0..255 and float pixels in [0, 1].

    Float images are intensities: a float image of 0-255 values (or of
    values already normalised with a mean and a standard deviation) would
    otherwise be read as far too bright, or clipped, without a word.

    Parameters
    ----------
    array : ndarray
        One image or a batch, of any shape. Booleans are intensities 0 and 1.

    Raises
    ------
    ValueError
        If an integer value is outside 0..255, or a float value is NaN,
        infinite or outside [0, 1]; the message gives the range found and
        what to pass instead.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.utils.images import check_pixel_values
    >>> check_pixel_values(np.full((2, 4, 4, 3), 255, dtype=np.uint8))
    >>> check_pixel_values(np.full((2, 4, 4, 3), 255.0))
    Traceback (most recent call last):
    ...
    ValueError: images must be uint8 (0..255) or floats in [0, 1]; these are floats from 255 to 255 ...
    """
    if not array.size or array.dtype.kind == "b":
        return
    if np.issubdtype(array.dtype, np.integer):
        low, high = array.min(), array.max()
        if low < 0 or high > 255:
            raise ValueError(
                f"integer images must hold 0..255 pixel values (uint8); got values from {low} to {high}."
            )
        return
    finite = np.isfinite(array)
    if not finite.all():
        bad = int(array.size - np.count_nonzero(finite))
        raise ValueError(
            f"images contain NaN or infinity ({bad} value{'s' if bad > 1 else ''} of {array.size}); pass "
            "uint8 images (0..255) or finite floats in [0, 1]."
        )
    low, high = float(array.min()), float(array.max())
    if low < 0 or high > 1:
        if low >= 0 and high <= 255:
            looks = " (0-255 pixel values, it seems)"
        elif low < 0:
            looks = (" (negative values: already normalised with a mean and std? pass the raw pixels, "
                     "normalisation is done for you)")
        else:
            looks = ""
        raise ValueError(
            f"images must be uint8 (0..255) or floats in [0, 1]; these are floats from {low:.4g} to "
            f"{high:.4g}{looks}. For 0-255 pixel values, divide by 255 (or pass them as uint8); clip or "
            "rescale other values to [0, 1]."
        )


def check_pixel_rows(X):
    """Check rows of flattened images as images are checked: integers 0..255, floats in [0, 1].

    The 2-D path of an image estimator reads each row as a flattened image,
    so its values are pixels like any image's: integer rows are 0..255
    pixel values, float rows intensities in [0, 1]. Anything else (float
    rows of 0-255 values, standardised features) would be read as a far
    too bright or clipped picture without a word.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Raises
    ------
    ValueError
        As :func:`check_pixel_values`, the message saying that the rows are
        read as flattened images.

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.utils.images import check_pixel_rows
    >>> check_pixel_rows(np.full((2, 12), 255, dtype=np.uint8))
    >>> check_pixel_rows(np.full((2, 12), 255.0))
    Traceback (most recent call last):
    ...
    ValueError: the rows of X are read as flattened images: images must be uint8 (0..255) or floats in [0, 1]; ...
    """
    try:
        check_pixel_values(np.asarray(X))
    except ValueError as error:
        raise ValueError(f"the rows of X are read as flattened images: {error}") from None


#: scikit-learn's checks that feed an estimator float rows outside [0, 1] (standardised blobs,
#: uniform values up to 3, values near 100) and fail when its 2-D path reads rows as flattened
#: images, which refuses them (:func:`check_pixel_rows`).
OUT_OF_RANGE_ROW_CHECKS = (
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_estimators_dtypes",
    "check_estimators_fit_returns_self", "check_estimators_overwrite_params", "check_estimators_pickle",
    "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample", "check_fit2d_predict1d",
    "check_fit_check_is_fitted", "check_fit_idempotent", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_n_features_in", "check_n_features_in_after_fitting",
    "check_pipeline_consistency", "check_positive_only_tag_during_fit", "check_readonly_memmap_input",
    "check_transformer_data_not_an_array", "check_transformer_general",
)


def out_of_range_row_checks():
    """``{check: reason}`` of :data:`OUT_OF_RANGE_ROW_CHECKS`, for the tags of an estimator of image rows.

    What those checks test is tested on rows of pixels by
    ``tests/utils/test_images_rows.py`` for every such estimator.

    Returns
    -------
    dict
    """
    reason = ("the check feeds float rows outside [0, 1], which the 2-D path refuses as flattened images (uint8 "
              "rows are pixels, float rows intensities in [0, 1]); tests/utils/test_images_rows.py checks the "
              "same properties on rows of pixels")
    return dict.fromkeys(OUT_OF_RANGE_ROW_CHECKS, reason)


def images_from_rows(X, size, image_shape=None, dtype=np.float32):
    """Rows of flattened images as a batch of float images on the [0, 1] scale.

    The 2-D array path of an image estimator, so that scikit-learn's checks
    can feed it plain feature rows.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Read like images (:func:`check_pixel_rows`): integer rows (0..255)
        are divided by 255, float rows must be intensities in [0, 1],
        boolean rows are intensities 0 and 1. Keep the dtype of uint8 rows:
        cast to float, their 0-255 values are refused.
    size : tuple of int
        ``(height, width)`` of the model's input, used when ``image_shape``
        is None.
    image_shape : tuple of int or None, default=None
        ``(height, width)`` or ``(height, width, channels)`` of every row.
        None reads rows of ``3 * height * width`` values as RGB images of
        ``size``, rows of ``height * width`` values as grey ones, and any
        other row as a one-pixel high grey strip.
    dtype : numpy dtype, default=np.float32

    Returns
    -------
    ndarray of shape (n_samples, H, W, C)

    Raises
    ------
    ValueError
        If integer values lie outside 0..255, float values outside [0, 1]
        (or are not finite), or the rows do not have the width
        ``image_shape`` needs.
    """
    n, d = X.shape
    check_pixel_rows(X)
    if np.issubdtype(X.dtype, np.integer):
        X = X / 255.0
    X = X.astype(dtype, copy=False)
    h, w = size
    if image_shape is not None:
        shape = tuple(int(s) for s in image_shape)
        shape = shape if len(shape) == 3 else shape + (1,)
        if int(np.prod(shape)) != d:
            raise ValueError(
                f"X has {d} features per row, but image_shape={image_shape!r} needs "
                f"{int(np.prod(shape))}."
            )
        return X.reshape((n,) + shape)
    if d == 3 * h * w:
        return X.reshape(n, h, w, 3)
    if d == h * w:
        return X.reshape(n, h, w, 1)
    return X.reshape(n, 1, d, 1)


def pil_from_array(array):
    """A PIL image of an image array, alpha dropped.

    Parameters
    ----------
    array : array-like of shape (H, W) or (H, W, C)
        Integer pixel values in 0..255, or float intensities in [0, 1]
        (rounded to the nearest of 256 levels); ``C`` is 1, 3 or 4.

    Returns
    -------
    PIL.Image.Image
        Grey (mode ``"L"``) for one channel, RGB otherwise.

    Raises
    ------
    ValueError
        If the values are outside those ranges (see :func:`check_pixel_values`).
    """
    from PIL import Image

    array = np.asarray(array)
    check_pixel_values(array)
    if array.dtype.kind in "fb":
        array = np.rint(array * 255.0)
    array = array.astype(np.uint8, copy=False)
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim == 3 and array.shape[-1] == 4:
        array = array[..., :3]
    return Image.fromarray(np.ascontiguousarray(array))


def as_rgb(images):
    """Images with three channels: grey repeated, alpha dropped.

    Parameters
    ----------
    images : array-like of shape (n, H, W) or (n, H, W, C)
        ``C`` is 1, 3 or 4.

    Returns
    -------
    ndarray of shape (n, H, W, 3)
        Same dtype as ``images``.
    """
    array = np.asarray(images)
    if array.ndim == 3:
        array = array[..., None]
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    elif array.shape[-1] == 4:
        array = array[..., :3]
    return array


def preprocess_images(images, cfg, squash=False):
    """open_clip's evaluation preprocessing of float images, batched in torch.

    Matches ``open_clip.transform.image_transform_v2(cfg, is_train=False)``
    applied to PIL images exactly when the images already have the target
    size, and up to interpolation otherwise (bicubic or bilinear with
    antialiasing, PIL's kernel).

    Parameters
    ----------
    images : array-like of shape (n, H, W) or (n, H, W, C)
        Float intensities in [0, 1], or integer pixel values in 0..255
        (divided by 255); grey and alpha images are made RGB first
        (:func:`as_rgb`). The values are not checked here (the 2-D rows
        path of an estimator feeds any floats through): check images from
        users with :func:`check_images` first.
    cfg : dict
        open_clip's preprocessing settings: ``size`` as ``(height, width)``,
        ``mean`` and ``std`` (three values each), and optionally
        ``interpolation`` (``"bicubic"`` or ``"bilinear"``), ``resize_mode``
        (``"shortest"``: resize the shortest side and centre crop, the
        default; ``"longest"``: resize the longest side and pad with
        ``fill_color``; ``"squash"``: resize to ``size`` ignoring the aspect
        ratio) and ``fill_color`` (0..255).
    squash : bool, default=False
        Use ``"squash"`` whatever ``cfg`` says (for strips of pixels that
        no crop would keep).

    Returns
    -------
    torch.Tensor of shape (n, 3, height, width)
        Normalised, in the dtype of ``images`` (float32 for integer input).

    Examples
    --------
    >>> import numpy as np
    >>> from skicml.utils.images import preprocess_images
    >>> cfg = {"size": (16, 16), "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    >>> x = preprocess_images(np.ones((2, 24, 32), dtype=np.float32), cfg)
    >>> tuple(x.shape), round(float(x.max()), 4)
    ((2, 3, 16, 16), 1.0)
    """
    import torch.nn.functional as F

    images = as_rgb(images)
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2)
    if not x.is_floating_point():
        x = x.float() if x.dtype == torch.bool else x.float() / 255.0
    th, tw = cfg["size"]
    h, w = x.shape[-2:]
    mode = "bilinear" if cfg.get("interpolation") == "bilinear" else "bicubic"
    resize_mode = "squash" if squash else cfg.get("resize_mode", "shortest")

    def resize(t, size):
        if tuple(t.shape[-2:]) == tuple(size):
            return t
        # antialias=True also upsamples with PIL's bicubic kernel (a = -0.5), as torchvision does
        return F.interpolate(t, size=size, mode=mode, align_corners=False, antialias=True)

    if resize_mode == "squash":
        x = resize(x, (th, tw))
    elif resize_mode == "longest":
        scale = min(th / h, tw / w)
        x = resize(x, (max(1, round(h * scale)), max(1, round(w * scale))))
        pad_h, pad_w = th - x.shape[-2], tw - x.shape[-1]
        fill = float(cfg.get("fill_color", 0)) / 255.0
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), value=fill)
    else:  # shortest side to the target, then centre crop (torchvision's Resize(int) + CenterCrop)
        if th == tw:
            short, long = min(h, w), max(h, w)
            new_long = int(th * long / short)
            size = (th, new_long) if h <= w else (new_long, th)
        else:
            scale = max(th / h, tw / w)
            size = (round(h * scale), round(w * scale))
        x = resize(x, size)
        top = int(round((x.shape[-2] - th) / 2.0))
        left = int(round((x.shape[-1] - tw) / 2.0))
        x = x[..., top:top + th, left:left + tw]
    mean = torch.tensor(cfg["mean"], dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(cfg["std"], dtype=x.dtype).view(1, 3, 1, 1)
    return (x - mean) / std
