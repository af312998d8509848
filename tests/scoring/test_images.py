"""The scorer's image loader: every mode comes back as upright 8-bit RGB with the expected pixels.

Expectations are computed independently (numpy rotations, hand-worked colour arithmetic), not by
calling Pillow's conversions that the loader itself uses.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib

import numpy as np
import pytest
from helpers import noise_jpeg
from PIL import Image

from idbench.evaluate_pkg import images
from idbench.evaluate_pkg.images import ImageError, content_hash, normalize_image

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def encode(image: Image.Image, fmt: str = "PNG", **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def pixels(data: bytes) -> np.ndarray:
    image = normalize_image(data, where="test.png")
    assert image.mode == "RGB"
    return np.asarray(image)


def png_bytes(width: int, height: int, bit_depth: int, color_type: int, raw_rows: bytes) -> bytes:
    """A PNG written by hand (so sizes Pillow would refuse to create can still be tested)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw_rows, 9)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def blank_bilevel_png(width: int, height: int) -> bytes:
    """A real, complete 1-bit PNG of ``width`` x ``height`` black pixels: tiny file, huge image."""
    row = b"\x00" + bytes((width + 7) // 8)  # filter byte + packed bits
    return png_bytes(width, height, 1, 0, row * height)


# --- orientation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("orientation", "turns"),
    [(1, 0), (3, 2), (6, -1), (8, 1)],  # EXIF: 6 = rotate 90 clockwise to display, 8 = counter-clockwise
)
def test_exif_orientation_is_applied(orientation: int, turns: int) -> None:
    original = np.random.default_rng(0).integers(0, 256, size=(3, 5, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = orientation
    data = encode(Image.fromarray(original), "PNG", exif=exif)
    np.testing.assert_array_equal(pixels(data), np.rot90(original, k=turns))


def test_exif_orientation_in_a_jpeg() -> None:
    original = np.zeros((16, 32, 3), dtype=np.uint8)
    original[:, :16] = 255  # left half white, right half black
    exif = Image.Exif()
    exif[0x0112] = 6
    out = pixels(encode(Image.fromarray(original), "JPEG", exif=exif, quality=95))
    assert out.shape == (32, 16, 3)  # portrait now
    # rotated clockwise: the original left (white) half is now on top
    assert out[:12].mean() > 240 and out[20:].mean() < 15


# --- colour modes --------------------------------------------------------------------------------


def test_rgba_transparency_is_white() -> None:
    rgba = np.array(
        [[[255, 0, 0, 0], [0, 0, 255, 255], [0, 0, 0, 128]]],  # transparent red, opaque blue, half-black
        dtype=np.uint8,
    )
    out = pixels(encode(Image.fromarray(rgba, mode="RGBA")))
    assert out[0, 0].tolist() == [255, 255, 255]
    assert out[0, 1].tolist() == [0, 0, 255]
    # 50% black over white: 255 * (1 - 128/255) = 127
    assert np.abs(out[0, 2].astype(int) - 127).max() <= 1


def test_greyscale_with_alpha() -> None:
    la = Image.new("LA", (2, 1))
    la.putpixel((0, 0), (10, 0))
    la.putpixel((1, 0), (10, 255))
    out = pixels(encode(la))
    assert out[0].tolist() == [[255, 255, 255], [10, 10, 10]]


def test_palette_and_palette_transparency() -> None:
    palette_image = Image.new("P", (3, 1))
    palette_image.putpalette([255, 0, 0, 0, 255, 0, 0, 0, 255] + [0] * (256 - 3) * 3)
    for x, index in enumerate([2, 0, 1]):
        palette_image.putpixel((x, 0), index)
    assert pixels(encode(palette_image))[0].tolist() == [[0, 0, 255], [255, 0, 0], [0, 255, 0]]
    # index 0 (red) declared transparent: white instead
    with_transparency = pixels(encode(palette_image, transparency=0))
    assert with_transparency[0].tolist() == [[0, 0, 255], [255, 255, 255], [0, 255, 0]]
    assert pixels(encode(palette_image, "GIF", transparency=0))[0, 1].tolist() == [255, 255, 255]


def test_cmyk() -> None:
    cmyk = Image.new("CMYK", (4, 1))
    for x, value in enumerate([(0, 0, 0, 0), (0, 255, 255, 0), (0, 0, 0, 255), (0, 0, 0, 128)]):
        cmyk.putpixel((x, 0), value)
    out = pixels(encode(cmyk, "TIFF"))
    assert out[0, :3].tolist() == [[255, 255, 255], [255, 0, 0], [0, 0, 0]]
    assert np.abs(out[0, 3].astype(int) - 127).max() <= 1  # half the black ink


def test_sixteen_bit_greyscale_is_scaled_not_clipped() -> None:
    values = np.array([[0, 257, 32768, 65535]], dtype=np.uint16)
    expected = [0, 1, 128, 255]  # round(v * 255 / 65535)
    for fmt in ("PNG", "TIFF"):
        out = pixels(encode(Image.fromarray(values), fmt))
        assert out[0, :, 0].tolist() == expected, fmt
        assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()
    # a hand-made 16-bit PNG, so the test does not depend on how Pillow writes one
    raw = b"\x00" + values.astype(">u2").tobytes()
    assert pixels(png_bytes(4, 1, 16, 0, raw))[0, :, 0].tolist() == expected


def test_32_bit_integer_and_float_images() -> None:
    integer = Image.fromarray(np.array([[0, 32768, 65535, 100000]], dtype=np.int32), mode="I")
    assert pixels(encode(integer, "TIFF"))[0, :, 0].tolist() == [0, 128, 255, 255]
    floats = Image.fromarray(np.array([[0.0, 0.5, 1.0, 2.0]], dtype=np.float32), mode="F")
    assert pixels(encode(floats, "TIFF"))[0, :, 0].tolist() == [0, 128, 255, 255]


def test_greyscale_and_bilevel() -> None:
    grey = Image.fromarray(np.array([[0, 77, 255]], dtype=np.uint8), mode="L")
    assert pixels(encode(grey))[0].tolist() == [[0, 0, 0], [77, 77, 77], [255, 255, 255]]
    bilevel = Image.new("1", (2, 1))
    bilevel.putpixel((1, 0), 1)
    assert pixels(encode(bilevel))[0].tolist() == [[0, 0, 0], [255, 255, 255]]


def test_rgb_jpeg_passes_through() -> None:
    data = noise_jpeg(3)
    with Image.open(io.BytesIO(data)) as reference:
        np.testing.assert_array_equal(pixels(data), np.asarray(reference.convert("RGB")))


# --- refusals ------------------------------------------------------------------------------------


def refused(data: bytes, *fragments: str) -> ImageError:
    with pytest.raises(ImageError) as info:
        normalize_image(data, where="gen/01_s0.png")
    message = str(info.value)
    assert message.startswith("gen/01_s0.png: ")
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def test_decompression_bomb_refused() -> None:
    data = blank_bilevel_png(20_000, 20_000)  # 400 Mpx in about 50 kB
    assert len(data) < 100_000
    refused(data, "decompression bomb")


def test_over_the_pixel_limit_refused() -> None:
    # just over the limit, and below Pillow's own bomb threshold: our check is what refuses it
    side = int(images.MAX_PIXELS**0.5) + 1
    assert side * side < Image.MAX_IMAGE_PIXELS
    refused(blank_bilevel_png(side, side), f"{side}x{side}", str(images.MAX_PIXELS))
    # and just under the limit decodes
    ok = int(images.MAX_PIXELS**0.5) - 1
    assert normalize_image(blank_bilevel_png(ok, 8), where="x").size == (ok, 8)


def test_over_the_byte_limit_refused(monkeypatch) -> None:
    data = noise_jpeg(1)
    monkeypatch.setattr(images, "MAX_IMAGE_BYTES", len(data) - 1)
    refused(data, f"{len(data)} bytes", "limit")


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_image_refused(fmt: str) -> None:
    noise = np.random.default_rng(1).integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    data = encode(Image.fromarray(noise), fmt)
    refused(data[: len(data) // 2], "not a readable image")


def test_garbage_and_unsupported_formats_refused() -> None:
    refused(b"definitely not an image", "not an image in a supported format")
    refused(b"", "not an image")
    # EPS would be handed to Ghostscript by Pillow: never opened
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"
    refused(eps, "supported format")


def test_content_hash_is_sha256_of_the_bytes() -> None:
    data = noise_jpeg(5)
    assert content_hash(data) == hashlib.sha256(data).hexdigest()
    assert content_hash(data) != content_hash(noise_jpeg(6))
