"""skicml.utils.images: the image and caption inputs shared across families."""

import numpy as np
import pytest
import torch

pytest.importorskip("PIL")

from skicml.utils.images import (  # noqa: E402
    as_rgb,
    check_captions,
    check_images,
    image_input_kind,
    images_from_rows,
    pil_from_array,
    preprocess_images,
)

CFG = {"size": (8, 8), "mean": (0.5, 0.25, 0.0), "std": (0.5, 0.25, 1.0)}


def test_kinds_of_input():
    assert image_input_kind(torch.zeros(2, 8, 8, 3)) == "image"
    assert image_input_kind([np.zeros((8, 8))]) == "image"
    assert image_input_kind(np.zeros((2, 8, 8), dtype=np.uint8)) == "image"
    assert image_input_kind(torch.zeros(2, 8, 8)) == "image"
    assert image_input_kind(np.zeros((2, 8))) == "embedding"
    assert image_input_kind(np.full((2, 8, 8), "a")) == "embedding"
    assert image_input_kind(np.array(["a.png", "b.png"])) == "strings"
    assert image_input_kind([]) == "embedding"
    with pytest.raises(ValueError, match="single string"):
        image_input_kind("a red circle")


def test_checks_name_what_is_wrong(tmp_path):
    assert check_captions(np.array(["a", "b"])) == ["a", "b"]
    with pytest.raises(ValueError, match="captions must be strings; got int"):
        check_captions(["a", 3])
    with pytest.raises(ValueError, match="4 dimensions"):
        check_images(np.zeros((2, 8, 8, 2)))
    with pytest.raises(ValueError, match="0..255"):
        check_images(np.full((1, 4, 4, 3), 300))
    grey = np.arange(2 * 4 * 5, dtype=np.uint8).reshape(2, 4, 5)
    np.testing.assert_array_equal(check_images(grey), grey[..., None])
    with pytest.raises(ValueError, match="single image"):
        check_images(np.zeros((4, 4, 3), dtype=np.uint8))
    assert check_images(np.zeros((2, 4, 3)), image_shape=(4, 3)).shape == (2, 4, 3, 1)
    assert check_images(np.zeros((2, 4, 1)), image_shape=(4, 1, 1)).shape == (2, 4, 1, 1)
    with pytest.raises(ValueError, match="NaN"):
        check_images([np.full((4, 4), np.nan)])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_images([str(tmp_path / "missing.png")])
    path = tmp_path / "image.png"
    path.write_bytes(b"")
    array = np.zeros((4, 4, 4), dtype=np.uint8)
    items = check_images([array, path])
    assert items[0] is array and items[1] == str(path)


def test_rows_become_images_of_the_model_size():
    rows = np.arange(2 * 3 * 8 * 8).reshape(2, -1) % 256
    images = images_from_rows(rows, (8, 8))
    assert images.shape == (2, 8, 8, 3) and images.dtype == np.float32 and images.max() <= 1
    assert images_from_rows(np.zeros((2, 64)), (8, 8)).shape == (2, 8, 8, 1)
    assert images_from_rows(np.zeros((2, 5)), (8, 8)).shape == (2, 1, 5, 1)
    with pytest.raises(ValueError, match="image_shape"):
        images_from_rows(np.zeros((2, 10)), (8, 8), image_shape=(3, 3))


def test_pil_and_rgb_conversions_drop_alpha_and_repeat_grey():
    rgba = np.random.default_rng(0).integers(0, 256, (5, 6, 4)).astype(np.uint8)
    np.testing.assert_array_equal(np.asarray(pil_from_array(rgba)), rgba[..., :3])
    assert pil_from_array(rgba[..., :1]).mode == "L"
    grey = np.random.default_rng(1).random((2, 5, 6))
    np.testing.assert_array_equal(as_rgb(grey), np.repeat(grey[..., None], 3, axis=-1))


def test_preprocessing_at_the_target_size_only_normalises():
    images = np.random.default_rng(0).random((3, 8, 8, 3)).astype(np.float32)
    x = preprocess_images(images, CFG)
    mean = torch.tensor(CFG["mean"]).view(1, 3, 1, 1)
    std = torch.tensor(CFG["std"]).view(1, 3, 1, 1)
    torch.testing.assert_close(x, (torch.from_numpy(images).permute(0, 3, 1, 2) - mean) / std)


@pytest.mark.parametrize("resize_mode", ["shortest", "longest", "squash"])
def test_preprocessing_gives_the_target_size_whatever_the_aspect(resize_mode):
    images = np.full((2, 12, 20), 0.5, dtype=np.float64)
    x = preprocess_images(images, dict(CFG, resize_mode=resize_mode, fill_color=128))
    assert x.shape == (2, 3, 8, 8) and x.dtype == torch.float64
    # A constant image stays constant through resize, crop and (mid-grey) padding.
    torch.testing.assert_close(x[:, 0], torch.zeros(2, 8, 8, dtype=torch.float64), atol=5e-3, rtol=0)
