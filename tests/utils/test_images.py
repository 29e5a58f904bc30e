"""skicml.utils.images: the image and caption inputs shared across families."""

import numpy as np
import pytest
import torch

pytest.importorskip("PIL")

from skicml.utils.images import (  # noqa: E402
    as_rgb,
    check_captions,
    check_images,
    check_pixel_rows,
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


def test_a_data_frame_of_images_or_strings_names_its_column():
    # Issue 64: it reached pandas' "setting an array element with a sequence".
    pd = pytest.importorskip("pandas")
    images = list(np.zeros((2, 4, 4, 3), dtype=np.uint8))
    assert image_input_kind(pd.DataFrame({"a": [0.5, 1.0], "b": [1, 2]})) == "embedding"
    for frame, holds in ((pd.DataFrame({"img": images}), "images or arrays"),
                         (pd.DataFrame({"x": [0.1, 0.2], "path": ["a.png", "b.png"]}), "strings")):
        name = frame.columns[-1]
        with pytest.raises(ValueError, match=rf"(?s)column '{name}' holds {holds}.*tolist"):
            image_input_kind(frame)
        with pytest.raises(ValueError, match=rf"(?s)without an 'image' column.*'{name}' holds {holds}"):
            image_input_kind(frame, image_column="image")


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


def test_rows_are_read_like_images_uint8_as_pixels_floats_checked():
    # Issue 64: rows of pixels cast to float were read as [0, 1] intensities (every estimator of the
    # 2-D path saw a white picture), and float 0-255 rows passed silently.
    pixels = np.random.default_rng(0).integers(0, 256, (2, 3 * 8 * 8)).astype(np.uint8)
    np.testing.assert_allclose(images_from_rows(pixels, (8, 8)), images_from_rows(pixels / 255.0, (8, 8)))
    for bad, found in ((pixels.astype(np.float32), "0-255"), (pixels / 127.5 - 1.0, "negative"),
                       (np.full((2, 5), 1e30), "1e\\+30")):
        with pytest.raises(ValueError, match=rf"(?s)rows of X are read as flattened images.*floats in \[0, 1\]"
                                             rf".*{found}.*divide by 255.*uint8"):
            images_from_rows(bad, (8, 8))
        with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
            check_pixel_rows(bad)
    with pytest.raises(ValueError, match=r"(?s)flattened images.*0..255.*300"):
        images_from_rows(np.full((1, 4), 300), (2, 2))
    check_pixel_rows(pixels)
    check_pixel_rows(np.ones((2, 5), dtype=np.float32))
    np.testing.assert_array_equal(images_from_rows(np.eye(4, dtype=bool), (2, 2))[..., 0].reshape(4, 4), np.eye(4))


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


@pytest.mark.parametrize("bad, found", [
    (np.full((2, 4, 4, 3), 200.0, dtype=np.float32), "0-255"),      # 0-255 floats
    (np.full((2, 4, 4, 3), -0.5), "-0.5"),                            # negative values
    (np.full((2, 4, 4, 3), 1e30), "1e\\+30"),                         # huge values
    ([np.full((4, 4, 3), 255.0)], "255"),                             # a list of float (H, W, C) arrays
    ([np.linspace(-1, 1, 16).reshape(4, 4)], "-1"),                   # a list of float (H, W) arrays
])
def test_float_images_outside_the_unit_range_are_refused(bad, found):
    with pytest.raises(ValueError, match=rf"(?s)floats in \[0, 1\].*{found}.*divide by 255"):
        check_images(bad)
    if isinstance(bad, np.ndarray):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            check_images(torch.from_numpy(bad))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_float_images_say_what_to_pass(value):
    images = np.full((1, 4, 4, 3), 0.5)
    images[0, 1, 2, 0] = value
    with pytest.raises(ValueError, match=r"(?s)NaN or infinity.*1 value.*uint8.*\[0, 1\]"):
        check_images(images)


def test_images_in_range_still_pass_and_integers_name_their_range():
    ok = [np.zeros((2, 4, 4, 3)), np.ones((2, 4, 4, 3), dtype=np.float32), np.full((2, 4, 4, 3), 255, np.uint8),
          np.zeros((2, 4, 4, 3), dtype=bool), [np.full((4, 4), 0.25, dtype=np.float16)]]
    for X in ok:
        check_images(X)
    with pytest.raises(ValueError, match=r"(?s)0\.\.255.*-3 to 300"):
        check_images(np.array([-3, 300] * 24, dtype=np.int64).reshape(1, 4, 4, 3))
    with pytest.raises(ValueError, match=r"0\.\.255.*1000"):
        check_images([np.full((4, 4), 1000, dtype=np.int32)])


def test_pil_and_preprocessing_read_floats_and_integers_on_one_scale():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (2, 8, 8, 3)).astype(np.uint8)
    # floats are [0, 1] intensities: the same picture as their 0..255 integers
    np.testing.assert_array_equal(np.asarray(pil_from_array(pixels[0] / 255.0)), pixels[0])
    np.testing.assert_array_equal(np.asarray(pil_from_array(np.eye(4, dtype=bool))), 255 * np.eye(4))
    torch.testing.assert_close(preprocess_images(pixels, CFG), preprocess_images(pixels / np.float32(255), CFG))
    with pytest.raises(ValueError, match="divide by 255"):
        pil_from_array(pixels[0].astype(np.float64))
    with pytest.raises(ValueError, match="0..255"):
        pil_from_array(np.full((4, 4), 256))
