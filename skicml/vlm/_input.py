"""The input handling every estimator of the vlm domain shares: backbone, layers, the forms of ``X``.

``X`` is a batch of images ``(n, H, W, 3)`` with the estimator's ``prompt``,
a list of ``{"image", "prompt"}`` dicts, a data frame with ``image`` and
``prompt`` columns, or a 2-D array of flattened images (``image_shape``),
the form scikit-learn's checks use.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.utils.validation import validate_data

from ..utils.images import check_images, image_input_kind, images_from_rows
from ._backbone import as_backbone
from ._model import TinyVLM

#: The shipped TinyVLM, the backbone of every estimator here unless one is given.
DEFAULT_BACKBONE = "tiny-vlm-scenes"


class _VLMInputMixin:
    """The backbone, its layers and the four input forms of ``X``, for the estimators of this domain."""

    def _resolve_backbone(self):
        backbone = DEFAULT_BACKBONE if self.backbone is None else self.backbone
        if isinstance(backbone, TinyVLM):
            backbone = backbone.to(self._device()).eval()
        self.backbone_ = as_backbone(backbone)
        module = getattr(self.backbone_, "model", None)
        if isinstance(module, TinyVLM):
            self.backbone_.model = module.to(self._device()).eval()
        self.n_layers_ = len(self.backbone_.layers)
        self.hidden_size_ = int(self.backbone_.hidden_size)

    def _resolve_layers(self, layers, name):
        if layers is None:
            return list(range(self.n_layers_))
        resolved = [int(i) for i in layers]
        bad = [i for i in resolved if not 0 <= i < self.n_layers_]
        if bad or not resolved:
            raise ValueError(f"{name}={layers!r}: expected layer indices in 0..{self.n_layers_ - 1} "
                             f"(the backbone has {self.n_layers_} decoder layers); got {bad or 'none'}.")
        return sorted(set(resolved))

    def _read(self, X, reset):
        """``(images, prompts)`` of ``X`` in any of its four forms."""
        prompts = self.prompt
        if isinstance(X, (list, tuple)) and not X:
            raise ValueError("X holds no images: pass images (an array, a list, dicts or a data frame with an "
                             "'image' column), at least one.")
        if hasattr(X, "columns") and "image" in X.columns:
            prompts = list(X["prompt"]) if "prompt" in X.columns else prompts
            images = check_images(list(X["image"]))
        elif isinstance(X, (list, tuple)) and X and all(isinstance(item, dict) for item in X):
            missing = [i for i, item in enumerate(X) if "image" not in item]
            if missing:
                raise ValueError(f"X[{missing[0]}] has no 'image' key; each dict needs 'image' (and 'prompt').")
            prompts = [item.get("prompt", self.prompt) for item in X]
            images = check_images([item["image"] for item in X])
        elif image_input_kind(X, image_column="image") == "embedding":
            # "numeric" keeps uint8 rows as pixels: cast to float they would be refused as 0-255 intensities.
            X = validate_data(self, X, reset=reset, dtype="numeric", ensure_all_finite=True)
            size = getattr(self.backbone_, "image_size", None)
            size = (size, size) if size else (int(np.sqrt(X.shape[1] // 3)),) * 2
            # Rows of any width are read as images (grey strips without image_shape) and resized.
            return self._canonical_images(images_from_rows(X, size, self.image_shape), resize=True), prompts
        else:
            images = check_images(X, self.image_shape)
        return self._canonical_images(images), prompts

    def _canonical_images(self, images, resize=False):
        if not isinstance(images, np.ndarray):
            from PIL import Image

            arrays = [np.asarray(Image.open(i).convert("RGB")) if isinstance(i, str) else np.asarray(i)
                      for i in images]
            if len({a.shape for a in arrays}) > 1:
                raise ValueError(f"images must share one shape; got {sorted({a.shape for a in arrays})}.")
            images = np.stack(arrays)
        if images.ndim == 3:
            images = images[..., None]
        if images.shape[-1] == 4:
            images = images[..., :3]
        size = getattr(self.backbone_, "image_size", None)
        if images.shape[-1] == 1:
            images = np.repeat(images, 3, axis=-1)
        if size and images.shape[1:3] != (size, size):
            if not resize:
                raise ValueError(f"the backbone reads images of {size} x {size} pixels; got images of "
                                 f"{images.shape[1]} x {images.shape[2]}. Resize them first.")
            pixels = torch.as_tensor(images / 255.0 if images.dtype.kind in "iu" else images, dtype=torch.float32)
            pixels = F.interpolate(pixels.permute(0, 3, 1, 2), size=(size, size), mode="bilinear",
                                   align_corners=False)
            images = pixels.permute(0, 2, 3, 1).numpy()
        return images

    def _batches(self, images, prompts, size=None):
        """``(images, prompts)`` in batches of ``size`` (the estimator's ``batch_size`` by default)."""
        size = self.batch_size if size is None else size
        prompts = [prompts] * len(images) if isinstance(prompts, str) else list(prompts)
        for start in range(0, len(images), size):
            yield images[start:start + size], prompts[start:start + size]

    def _check_image_shape(self):
        if self.image_shape is not None and len(self.image_shape) not in (2, 3):
            raise ValueError(f"image_shape must be (height, width) or (height, width, channels); "
                             f"got {self.image_shape!r}.")
