"""The scorer's one image loader: encoded bytes in, an 8-bit RGB ``PIL.Image`` out.

Every image the scorer looks at (a generation from a submission, a reference from the benchmark)
goes through :func:`normalize_image`, so every encoder sees the same pixels for the same bytes and
the feature cache can be keyed by :func:`content_hash` of the bytes alone.

What normalising means here:

- Only raster formats that carry generated images are opened (PNG, JPEG, WebP, ...); Pillow's other
  plugins (EPS runs Ghostscript, for one) are never reached with untrusted bytes.
- Size limits are checked on the header, before any pixel is decoded: more than ``MAX_IMAGE_BYTES``
  bytes or ``MAX_PIXELS`` pixels is refused, and so is anything Pillow itself calls a decompression
  bomb. The limits are the builders' (``idbench.builders.sources``), so a reference the builder accepted is
  never refused here.
- A submitted image (``normalize_image(..., submitted=True)``, what submission validation and scoring
  of a submission use) is also refused on its header when a side is over ``MAX_IMAGE_SIDE`` (8192)
  pixels or its aspect ratio is over ``MAX_ASPECT_RATIO`` (8:1): a 40,000,000 x 1 PNG is within the
  pixel limit, is 39 KB on disk, and breaks the encoders' resize. References are not held to these
  two bounds (the builder never was), only to the pixel and byte limits.
- The whole image is decoded, so a truncated or corrupt file fails here and not in an encoder.
- The EXIF orientation is applied (a phone photo tagged "rotate 90" is scored upright).
- Transparency (RGBA, LA, PA, a palette or a grey/RGB image with a transparent colour) is
  composited onto white: what a viewer shows, and what keeps "transparent black" from turning into a
  black background that only some encoders would see.
- 16-bit samples (``I;16*``, and ``I`` holding 16-bit values, as older Pillow decoded 16-bit PNGs)
  are scaled to 8 bits (65535 -> 255, 32768 -> 128); Pillow's own ``convert`` would clip them, turning
  almost every 16-bit image white. ``F`` (float) images are read as 0..1 intensities. CMYK, YCbCr,
  greyscale and 1-bit images use Pillow's conversions.
- Embedded ICC profiles are not applied, as the models' own processors do not apply them either.
- Only the first frame of a multi-frame file (animated GIF/WebP/PNG, multi-page TIFF) is used.
"""

from __future__ import annotations

import hashlib
import io

import numpy as np
from PIL import Image, ImageFile, ImageOps

from idbench.builders.sources import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from idbench.errors import IdbenchError

MAX_PIXELS = MAX_IMAGE_PIXELS
# Bounds on a submitted image's shape, read from its header before any pixel is decoded. Generators
# write squares, 16:9 or at most panoramas; nothing a model would score needs more.
MAX_IMAGE_SIDE = 8192
MAX_ASPECT_RATIO = 8.0

# The formats a generator plausibly writes. ``formats=`` makes Pillow try these plugins only.
# MPO is what Pillow calls a JPEG with an extra (e.g. depth) frame, as some cameras and phones write.
ALLOWED_FORMATS = ("PNG", "JPEG", "MPO", "WEBP", "BMP", "TIFF", "GIF", "AVIF")


def _open_formats() -> list[str]:
    """The allowed formats this Pillow build can open (AVIF, say, is an optional plugin)."""
    Image.init()  # registers every plugin; Image.open(formats=...) would fail on a not-yet-loaded one
    return [name for name in ALLOWED_FORMATS if name in Image.OPEN]

# Modes whose alpha channel Pillow can convert to RGBA directly.
_ALPHA_MODES = {"RGBA", "RGBa", "LA", "La", "PA"}
_SIXTEEN_BIT_MODES = {"I;16", "I;16L", "I;16B", "I;16N"}


class ImageError(IdbenchError, ValueError):
    """An image cannot be used; ``str()`` is ``"<where>: <reason>"``, ``reason`` alone is kept too."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def content_hash(data: bytes) -> str:
    """The sha256 hex digest of the encoded bytes: the key of every cache of per-image results.

    The bytes, not the decoded pixels, are hashed: hashing is then cheap (no decoding) and two
    files differing in any byte are never mistaken for one another.
    """
    return hashlib.sha256(data).hexdigest()


def size_problem(width: int, height: int, *, submitted: bool) -> str | None:
    """What is wrong with an image of ``width`` x ``height`` pixels, or None: the one place of the size rules.

    Every image: not empty, at most ``MAX_PIXELS``. A submitted image also: no side over
    ``MAX_IMAGE_SIDE``, an aspect ratio of at most ``MAX_ASPECT_RATIO``:1.
    """
    if width <= 0 or height <= 0:
        return f"empty image ({width}x{height} pixels)"
    if width * height > MAX_PIXELS:
        return f"{width}x{height} pixels, over the {MAX_PIXELS}-pixel limit (decompression bomb?)"
    if not submitted:
        return None
    if max(width, height) > MAX_IMAGE_SIDE:
        return f"{width}x{height} pixels, a side over the {MAX_IMAGE_SIDE}-pixel limit"
    if max(width, height) / min(width, height) > MAX_ASPECT_RATIO:
        return f"{width}x{height} pixels, an aspect ratio over the {MAX_ASPECT_RATIO:g}:1 limit"
    return None


def normalize_image(data: bytes, *, where: str, submitted: bool = False) -> Image.Image:
    """Decode ``data`` fully into an 8-bit RGB image, upright, transparency on white.

    ``where`` names the image in errors (a file, a prompt id and seed, a reference id): every
    failure raises :class:`ImageError` with ``where`` and the reason. ``submitted`` holds the image to
    the bounds of a submitted image as well (side and aspect ratio, see :func:`size_problem`); every
    size rule is checked on the header, before decoding. Example::

        image = normalize_image(Path("images/01_s0.png").read_bytes(), where="images/01_s0.png")
        assert image.mode == "RGB"
    """
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(where, f"{len(data)} bytes, over the {MAX_IMAGE_BYTES}-byte limit")
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        # A process-wide Pillow switch that would let truncated files through as half-grey images.
        raise ImageError(where, "PIL.ImageFile.LOAD_TRUNCATED_IMAGES is set; refusing to decode with it")
    try:
        # Image.open reads the header only. Pillow raises DecompressionBombError at open() beyond twice
        # its own limit and merely warns below that; MAX_PIXELS is below Pillow's limit, so the check
        # here refuses every image Pillow would warn about (warnings.catch_warnings is not thread-safe,
        # and images are decoded in threads, so the warning is not turned into an error).
        with Image.open(io.BytesIO(data), formats=_open_formats()) as image:
            problem = size_problem(*image.size, submitted=submitted)
            if problem:
                raise ImageError(where, problem)
            image.load()  # decode every pixel now: a truncated file fails here, not at open()
            upright = ImageOps.exif_transpose(image)
            return _to_rgb(upright)
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise ImageError(where, f"refused as a decompression bomb ({err})") from None
    except Image.UnidentifiedImageError:
        raise ImageError(
            where, f"not an image in a supported format (supported: {', '.join(ALLOWED_FORMATS)})"
        ) from None
    except MemoryError:
        raise ImageError(where, "not enough memory to decode the image") from None
    except Exception as err:  # noqa: BLE001 - a malformed file can make a decoder raise anything
        raise ImageError(where, f"not a readable image ({type(err).__name__}: {err})") from None


def _to_rgb(image: Image.Image) -> Image.Image:
    """Any decoded Pillow image -> 8-bit RGB (see the module docstring for the rules)."""
    mode = image.mode
    if mode in _SIXTEEN_BIT_MODES or mode == "I":
        # I;16 -> I keeps the values (0..65535); values outside 16 bits in a 32-bit image are clipped.
        samples = np.asarray(image.convert("I") if mode != "I" else image, dtype=np.int64)
        samples = np.clip(samples, 0, 65535)
        image = Image.fromarray(((samples * 255 + 32767) // 65535).astype(np.uint8), mode="L")
    elif mode == "F":
        samples = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=1.0, neginf=0.0)
        image = Image.fromarray(np.round(np.clip(samples, 0.0, 1.0) * 255).astype(np.uint8), mode="L")

    if image.mode in _ALPHA_MODES or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image if image.mode == "RGB" else image.convert("RGB")
