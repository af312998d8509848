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

Scoring decodes with :func:`working_image` instead: the same rules, then the image is reduced so that
its longest side is at most ``WORKING_SIDE`` (1536) pixels, once, before any model sees it. A JPEG is
decoded at a reduced DCT scale (Pillow's ``draft``), so a 40 MP JPEG never exists in memory at full
size; other formats are decoded whole once (Pillow has no partial decode), brought to a mode that can be
resampled without losing range or transparency, reduced with Lanczos, and only then turned upright and
to 8-bit RGB, so every later copy (processors' float arrays, dlib's upsampled pyramid, crops) is of the
bounded image. An image already within ``WORKING_SIDE`` is returned exactly as :func:`normalize_image`
returns it, so the features of ordinary submissions do not change. Why 1536: it is above the largest
input any scoring model's processor asks for (Grounding DINO resizes to a longest edge of 1333, SAM 2 to
1024, SCRFD to 640, the CLIP/DINOv2/aesthetic encoders to 224-518), it keeps every common generator
output (1024x1024, SDXL's 1344x768 and 1536x640) untouched, and a face a fifteenth of the width of a
five-person picture keeps about 100 pixels, close to the 112 pixels of ArcFace's aligned crop, and a
background face half that size keeps about 50, still above dlib HOG's 40-pixel minimum at upsample 1
(at 1024 it would be about 34). ``WORKING_RULE`` names the rule; the feature store puts it
in its cache paths, so features computed under another rule are never mixed with these.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

import numpy as np
from PIL import Image, ImageFile, ImageOps

from idbench.builders.sources import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from idbench.errors import IdbenchError

MAX_PIXELS = MAX_IMAGE_PIXELS
# Bounds on a submitted image's shape, read from its header before any pixel is decoded. Generators
# write squares, 16:9 or at most panoramas; nothing a model would score needs more.
MAX_IMAGE_SIDE = 8192
MAX_ASPECT_RATIO = 8.0

# The longest side, in pixels, of the image every scoring model receives (see the module docstring for
# why 1536). WORKING_RULE_VERSION changes whenever the reduction itself changes (filter, order, draft).
WORKING_SIDE = 1536
WORKING_RULE_VERSION = 1
WORKING_RULE = f"side{WORKING_SIDE}r{WORKING_RULE_VERSION}"
# The key under which working_image records the upright size of the image as submitted, in ``info``.
ORIGINAL_SIZE_KEY = "idbench_original_size"
# Lanczos, with Pillow's integer box reduction first while the image is over 3x the target: within
# about one grey level of a plain Lanczos resize and several times faster on a 40 MP image.
REDUCING_GAP = 3.0

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


@dataclass(frozen=True)
class ImageSource:
    """A loader of one image's encoded bytes that also says what to call the image in errors and whether
    it is a submitted image (held to the submitted bounds). Called like the plain ``() -> bytes``
    loaders the feature store also accepts; picklable when ``read`` is (DataLoader workers)."""

    read: Callable[[], bytes]
    where: str
    submitted: bool = False

    def __call__(self) -> bytes:
        return self.read()


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


def header_size(source: bytes | IO[bytes]) -> tuple[int, int] | None:
    """``(width, height)`` from an image's header, without decoding a pixel; None when no allowed format
    reads it. ``source``: the bytes, or a seekable binary file (a zip member) of which only the header is
    read. What the admission of an upload sums up (``idbench.leaderboard.admission``) and what the decode
    threads of validation hold their pixel budget by."""
    stream = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    try:
        with Image.open(stream, formats=_open_formats()) as image:
            return image.size
    except Exception:  # not an image, or a header Pillow refuses: validation says why
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
    return _decode(data, where=where, submitted=submitted, max_side=None)


def working_image(data: bytes, *, where: str, submitted: bool = False, max_side: int = WORKING_SIDE) -> Image.Image:
    """:func:`normalize_image`, reduced to a longest side of at most ``max_side``: what scoring models get.

    Decoded once, reduced before any other full-size copy is made (see the module docstring), so the
    memory of everything after the decode does not grow with the submitted resolution. The upright
    size of the image as submitted is kept in ``image.info[ORIGINAL_SIZE_KEY]`` (boxes found on the
    working image are reported in those pixels, see :func:`scale_to_original`). Every failure of the
    submitted content (header, decode, reduction) raises :class:`ImageError` naming ``where``. Example::

        image = working_image(six_thousand_pixel_png, where="01 seed 0")
        assert max(image.size) == WORKING_SIDE and image.info[ORIGINAL_SIZE_KEY] == (6000, 6000)
    """
    return _decode(data, where=where, submitted=submitted, max_side=max_side)


def load_working_image(loader: Callable[[], bytes], key: str) -> Image.Image:
    """The working image of one feature-store input: ``loader``'s bytes through :func:`working_image`.

    An :class:`ImageSource` names the image and says whether it was submitted; a plain loader is named
    by its cache ``key`` and held to the reference bounds only.
    """
    where = getattr(loader, "where", key)
    return working_image(loader(), where=where, submitted=getattr(loader, "submitted", False))


def working_size(width: int, height: int, max_side: int = WORKING_SIDE) -> tuple[int, int]:
    """The size an upright ``width`` x ``height`` image has once reduced to a longest side of ``max_side``.

    Unchanged when it already fits; otherwise scaled by ``max_side / longest`` and rounded, never
    below 1 pixel. ``working_size(6000, 3000) == (1536, 768)``.
    """
    longest = max(width, height)
    if longest <= max_side:
        return width, height
    scale = max_side / longest
    return max(1, round(width * scale)), max(1, round(height * scale))


def original_size(image: Image.Image) -> tuple[int, int]:
    """The upright size of the image as submitted: recorded by :func:`working_image`, else its own size."""
    return tuple(image.info.get(ORIGINAL_SIZE_KEY, image.size))


def scale_to_original(coordinates: np.ndarray, working: tuple[int, int], original: tuple[int, int]) -> np.ndarray:
    """Pixel coordinates on a working image of size ``working`` -> the same points on the ``original``.

    ``coordinates``' last axis holds (x, y) pairs: xyxy boxes (..., 4) or points (..., 2). Every model
    output that carries pixel positions (detector boxes, face boxes and landmarks) is stored in the
    submitted image's pixels, so crops, body boxes and the judge's drawings agree whatever the size.
    """
    array = np.asarray(coordinates, dtype=np.float32)
    if working == original or array.size == 0:
        return array
    factors = np.array([original[0] / working[0], original[1] / working[1]], dtype=np.float32)
    pairs = array.reshape(*array.shape[:-1], -1, 2) * factors
    return pairs.reshape(array.shape).astype(np.float32)


def scale_to_working(coordinates: np.ndarray, working: tuple[int, int], original: tuple[int, int]) -> np.ndarray:
    """The inverse of :func:`scale_to_original`: original-image pixel coordinates onto the working image."""
    return scale_to_original(coordinates, original, working)


# EXIF orientation -> the transpose that makes the image upright (what ImageOps.exif_transpose does).
_ORIENTATION_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_SWAPS_SIDES = {5, 6, 7, 8}


def _decode(data: bytes, *, where: str, submitted: bool, max_side: int | None) -> Image.Image:
    """The one decoder: header checks, decode (at a reduced scale where the format allows), reduction to
    ``max_side`` (None: none, the full image), upright, 8-bit RGB. Every failure is an :class:`ImageError`."""
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
            if max_side is None:
                image.load()  # decode every pixel now: a truncated file fails here, not at open()
                return _to_rgb(ImageOps.exif_transpose(image))
            return _reduced(image, max_side)
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
    except Exception as err:
        raise ImageError(where, f"not a readable image ({type(err).__name__}: {err})") from None


def _reduced(image: Image.Image, max_side: int) -> Image.Image:
    """An opened (header-checked) image -> upright 8-bit RGB of longest side <= ``max_side``.

    Order matters for memory: draft (JPEG) -> decode -> resample-safe mode -> reduce -> upright -> RGB,
    so at most the decoded frame and one same-size mode conversion ever exist at full size.
    """
    orientation = image.getexif().get(0x0112, 1)
    stored_width, stored_height = image.size
    upright = (stored_height, stored_width) if orientation in _SWAPS_SIDES else (stored_width, stored_height)
    target_upright = working_size(*upright, max_side)
    if target_upright == upright:
        # Within the working size: exactly normalize_image's pixels (and its cached features).
        image.load()
        result = _to_rgb(ImageOps.exif_transpose(image))
        result.info[ORIGINAL_SIZE_KEY] = result.size
        return result
    target = (target_upright[1], target_upright[0]) if orientation in _SWAPS_SIDES else target_upright
    if image.format in ("JPEG", "MPO"):
        # DCT scaling: decodes at 1/2, 1/4 or 1/8 scale, the largest that stays at or above ``target``.
        image.draft(None, target)
    image.load()  # a truncated or corrupt file fails here
    frame = _resample_safe(image)
    small = frame.resize(target, Image.Resampling.LANCZOS, reducing_gap=REDUCING_GAP)
    del frame
    transpose = _ORIENTATION_TRANSPOSE.get(orientation)
    if transpose is not None:
        small = small.transpose(transpose)
    result = _to_rgb(small)
    result.info.pop("transparency", None)
    result.info[ORIGINAL_SIZE_KEY] = upright
    return result


def _resample_safe(image: Image.Image) -> Image.Image:
    """The image in a mode Pillow resamples faithfully: transparency as RGBA (resized premultiplied),
    palettes expanded (Pillow resizes "P" and "1" by nearest neighbour only), 16-bit as "I" (values
    kept), float as "F", colour spaces other than RGB/L as RGB."""
    mode = image.mode
    # 16-bit and float samples first: normalize_image ignores a transparent colour on them too.
    if mode in _SIXTEEN_BIT_MODES:
        return image.convert("I")
    if mode in ("I", "F"):
        return image
    if mode in ("RGB", "L", "RGBA", "LA") and "transparency" not in image.info:
        return image
    if mode in _ALPHA_MODES or "transparency" in image.info:
        converted = image.convert("RGBA")
        converted.info.pop("transparency", None)
        return converted
    if mode == "1":
        return image.convert("L")
    return image.convert("RGB")


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


BACKGROUND_TOLERANCE = 16  # grey levels: a border this uniform is a background, not part of the subject


def subject_mask(rgb: np.ndarray) -> np.ndarray:
    """The subject of a reference: the pixels unlike its border's colour, holes filled, when the border is
    one colour (a subject on white, a cut-out render); the whole picture otherwise (a photograph). A copy
    is measured as a share of this: the white around a drawing is nobody's identity."""
    import cv2

    h, w = rgb.shape[:2]
    edge = np.concatenate(
        [rgb[:2].reshape(-1, 3), rgb[-2:].reshape(-1, 3), rgb[:, :2].reshape(-1, 3), rgb[:, -2:].reshape(-1, 3)]
    )
    edge = edge.astype(np.float32)
    colour = np.median(edge, axis=0)
    if float((np.abs(edge - colour).max(axis=1) <= BACKGROUND_TOLERANCE).mean()) < 0.9:
        return np.ones((h, w), dtype=bool)
    unlike = (np.abs(rgb.astype(np.float32) - colour).max(axis=2) > BACKGROUND_TOLERANCE).astype(np.uint8)
    unlike = cv2.morphologyEx(unlike, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    # The background is what reaches the border through pixels like it; everything else is the subject.
    reach = (1 - unlike).astype(np.uint8)
    seeds = np.zeros((h + 2, w + 2), np.uint8)
    for y, x in ((0, 0), (0, w - 1), (h - 1, 0), (h - 1, w - 1)):
        if reach[y, x] == 1:
            cv2.floodFill(reach, seeds, (x, y), 2)
    subject = reach != 2
    return subject if subject.mean() >= 0.01 else np.ones((h, w), dtype=bool)
