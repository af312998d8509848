"""Conditioned vision models: an open-vocabulary detector (Grounding DINO) and a box-prompted segmenter (SAM 2).

They feed the region metrics of DESIGN.md: DINO-Sim on crops of the named object or fashion item
(detector box -> :func:`crop`), BG-Sim with the foreground masked out (detector boxes -> SAM 2 masks ->
:func:`union_mask`), and count accuracy (detections of "a person").

Unlike the plain image encoders of ``base.py`` these models answer a question about an image (which
boxes match these text queries; which pixels belong to these boxes), so each gets a small interface of
its own: :meth:`GroundingDinoDetector.detect` and :meth:`Sam2Segmenter.segment`. Both carry the same
``key`` / ``card`` / ``feature_version`` as the encoders, so the feature store can cache their answers
under a key that hashes the image together with its condition (``features.condition_hash``).

Loading goes through the registry like every other model family: a paper card reads its pinned
revision's snapshot from the Hugging Face cache with local files only (a missing model raises
``ModelNotAvailableError`` with the ``hf download`` command); a tiny card reads
``<models_dir>/tiny/<name>/``, made on first use by :func:`make_tiny_grounding_dino` /
:func:`make_tiny_sam2` in the file layout of the Hub repository it stands for.

SAM 2 runs through ``transformers`` (``Sam2Model`` + ``Sam2Processor``), not the ``sam2`` package: one
loading path, with pinned Hub revisions and the Hub cache, then serves every model of the scorer, and the
tiny test models are made with the very classes that run the real weights.

Preprocessing is each checkpoint's own: Grounding DINO's processor through transformers' PIL backend
(the original resizes PIL images, as the PIL backend does; the torchvision backend differs by up to 0.02
per normalised pixel), SAM 2's through its only (torchvision) backend, as the original's transforms.
"""

from __future__ import annotations

import json
import logging
import math
import string
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from idbench.evaluate_pkg.models import registry
from idbench.evaluate_pkg.models.base import ModelCard

__all__ = [
    "GROUNDING_DINO_FILES",
    "SAM2_FILES",
    "Detection",
    "GroundingDinoDetector",
    "Sam2Segmenter",
    "CROP_FILL",
    "SUBJECT_NMS_IOU",
    "crop",
    "load_grounding_dino",
    "load_sam2",
    "make_tiny_grounding_dino",
    "make_tiny_sam2",
    "nms_per_label",
    "square_crop",
    "union_mask",
]


#: Files the loaders read, the names they have in IDEA-Research/grounding-dino-tiny (which also holds a
#: pytorch_model.bin copy of the weights) and facebook/sam2.1-hiera-tiny (also the original .pt).
# The files each loader reads, named as in the Hub repositories (kept in the registry, which also
# builds the `hf download` command from them).
GROUNDING_DINO_FILES = registry.HUB_FILES["grounding-dino-tiny"]
SAM2_FILES = registry.HUB_FILES["sam2.1-hiera-tiny"]


@dataclass(frozen=True)
class Detection:
    """One detected region: the query it answers, its box and the detector's confidence."""

    label: str  # the text query, exactly as the caller passed it
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels of the original image
    score: float  # the detector's box confidence in [0, 1]


# --- helpers ------------------------------------------------------------------------------------------


def crop(image: Image.Image, box: Sequence[float], pad: float = 0.05) -> Image.Image:
    """The region ``box`` (xyxy pixels) of ``image``, grown by ``pad`` of the box size on every side.

    A little context around a tight detector box keeps object edges inside the crop (DINO features of
    a crop that cuts through the object's outline are noisier). The padded box is rounded outwards to
    whole pixels and clipped to the image; it is at least one pixel wide and high.

    >>> crop(Image.new("RGB", (100, 80)), (10, 10, 30, 50), pad=0.0).size
    (20, 40)
    """
    x0, y0, x1, y1 = _padded_pixel_box(box, pad, image.size)
    return image.crop((x0, y0, x1, y1))


#: Fill of the square canvas a crop is padded onto: ImageNet's mean colour (DINOv2's processor's
#: ``image_mean`` x 255, rounded), the pixel that normalises to 0 in every channel, i.e. "no signal" for
#: the encoder; plain grey (128) or black would be a colour of their own after normalisation.
CROP_FILL = (124, 116, 104)

#: IoU above which two boxes of one query are the same subject (``nms_per_label``; torchvision's nms
#: drops a box whose IoU with a better-scored kept box is strictly greater). Chosen from the collage
#: baseline's geometry (``evaluate_pkg/baselines.py``): in an N-column layout every subject box has the
#: same width, so two neighbours pushed together until they share a fraction f of their width have
#: IoU f / (2 - f). People who hug or stand shoulder to shoulder share up to about two thirds of their
#: boxes' width: IoU <= 0.5, which the former threshold 0.5 sat right on. A duplicate box of one
#: subject (Grounding DINO keeps several near-identical queries' boxes) whose edges move by up to 10 %
#: of the box has IoU >= 0.64 (shrunk) / 0.68 (shifted). 0.6 lies between the two: neighbours up to
#: 75 % width overlap survive, duplicates within 10 % merge (tests/scoring/test_regions.py).
#: A partial box of a subject (face or upper body, IoU ~0.3-0.5 with the whole-body box) is not a
#: duplicate by this rule and still counts twice.
SUBJECT_NMS_IOU = 0.6


def nms_per_label(boxes: Any, scores: Any, labels: Any, iou: float = SUBJECT_NMS_IOU) -> np.ndarray:
    """Indices of the boxes kept by non-maximum suppression run separately within each label, best first.

    ``boxes`` (k, 4) xyxy, ``scores`` (k,), ``labels`` (k,) ints (one query per label). Boxes of
    different labels never suppress each other (a person and the cup they hold overlap by design).

    >>> nms_per_label([[0, 0, 10, 10], [0, 0, 10, 9], [0, 0, 10, 10]], [0.9, 0.8, 0.7], [0, 0, 1]).tolist()
    [0, 2]
    """
    import torch
    from torchvision.ops import batched_nms

    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if not len(boxes) == len(scores) == len(labels):
        raise ValueError(f"{len(boxes)} boxes, {len(scores)} scores and {len(labels)} labels")
    if len(boxes) == 0:
        return np.zeros(0, dtype=np.int64)
    kept = batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores), torch.from_numpy(labels), iou)
    return kept.numpy().astype(np.int64)


def square_crop(
    image: Image.Image,
    box: Sequence[float],
    pad: float = 0.05,
    keep: float = 1.0,
    fill: tuple[int, int, int] = CROP_FILL,
) -> Image.Image:
    """The region ``box`` of ``image`` (grown by ``pad`` as :func:`crop` does), centred on a square canvas.

    An encoder's processor that resizes the shortest side and centre-crops (DINOv2: 256, then 224) cuts a
    tall crop to its middle: a 1:2.5 standing person keeps its middle 35 % and loses the head. On a
    square canvas nothing is cut by the aspect ratio; ``keep`` is the fraction of a square image the
    processor keeps (DINOv2: 224 / 256, :meth:`DinoEncoder.square_keep`), and the canvas is made larger by
    1 / keep so that the centre crop removes only the padding. The padding is ``fill`` (``CROP_FILL``).

    >>> square_crop(Image.new("RGB", (100, 100)), (10, 0, 30, 50), pad=0.0, keep=0.5).size
    (100, 100)
    """
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    region = crop(image, box, pad).convert("RGB")
    side = math.ceil(max(region.size) / keep)
    canvas = Image.new("RGB", (side, side), fill)
    canvas.paste(region, ((side - region.width) // 2, (side - region.height) // 2))
    return canvas


def _padded_pixel_box(box: Sequence[float], pad: float, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """Integer (x0, y0, x1, y1) of ``box`` padded by ``pad`` of its size, rounded outwards, clipped to ``size``."""
    if len(box) != 4 or not all(math.isfinite(float(v)) for v in box):
        raise ValueError(f"a box is 4 finite numbers x0, y0, x1, y1; got {tuple(box)!r}")
    if pad < 0:
        raise ValueError(f"pad must be >= 0, got {pad}")
    width, height = size
    bx0, by0, bx1, by1 = (float(v) for v in box)
    if bx1 < bx0 or by1 < by0:
        raise ValueError(f"box {tuple(box)!r} has x1 < x0 or y1 < y0")
    dx, dy = pad * (bx1 - bx0), pad * (by1 - by0)
    x0 = min(max(math.floor(bx0 - dx), 0), width - 1)
    y0 = min(max(math.floor(by0 - dy), 0), height - 1)
    x1 = max(min(math.ceil(bx1 + dx), width), x0 + 1)
    y1 = max(min(math.ceil(by1 + dy), height), y0 + 1)
    return x0, y0, x1, y1


def union_mask(masks: np.ndarray | Sequence[np.ndarray], shape: tuple[int, int]) -> np.ndarray:
    """The pixels covered by any of ``masks`` ((k, H, W) bool), as an (H, W) bool array.

    ``shape`` is the image's (H, W): with no masks at all (nothing detected) the union is empty, and
    the shape cannot be read from an empty list.
    """
    height, width = shape
    union = np.zeros((height, width), dtype=bool)
    for index, mask in enumerate(masks):
        mask = np.asarray(mask)
        if mask.shape != (height, width):
            raise ValueError(f"mask {index} has shape {mask.shape}, expected {(height, width)}")
        union |= mask.astype(bool)
    return union


def _from_pretrained(loader: Any, card: ModelCard, folder: Path, **kwargs: Any) -> Any:
    """``loader.from_pretrained(folder)`` with local files only; a file transformers cannot read is a missing model."""
    try:
        return loader.from_pretrained(folder, local_files_only=True, **kwargs)
    except OSError as error:
        raise registry.missing_model_error(card, f"transformers could not read {folder}: {error}") from error


class _DropMessage(logging.Filter):
    def __init__(self, fragment: str):
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


@contextmanager
def _expected_sam2_video_warning() -> Iterator[None]:
    """Silence transformers' "model of type `sam2_video` ... `sam2`" warning, which is expected here.

    The Hub's SAM 2.1 checkpoints are ``sam2_video`` models; ``Sam2Model`` reads their image part (the
    key names match, transformers maps ``sam2_video`` to ``Sam2Model`` for mask generation).
    """
    config_logger = logging.getLogger("transformers.configuration_utils")
    drop = _DropMessage("to instantiate a model of type `sam2`")
    config_logger.addFilter(drop)
    try:
        yield
    finally:
        config_logger.removeFilter(drop)


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


# --- Grounding DINO -----------------------------------------------------------------------------------


class GroundingDinoDetector:
    """Open-vocabulary detection with Grounding DINO through transformers' own processor and post-processing.

    ``detect`` asks, for every image, for the boxes matching each of its text queries. The processor
    joins an image's queries into one caption ("a person. the red espresso cup."), exactly as Grounding
    DINO was trained; the model scores every box against every caption token; the processor's
    ``post_process_grounded_object_detection`` keeps the boxes whose best token beats ``box_threshold``
    and scales them to the original image. Its text labels are the caption tokens above
    ``text_threshold`` decoded together, which can mix words of two queries, so each kept box is
    assigned here to the *query* whose own tokens score highest (a box is kept only if that score beats
    ``text_threshold``). The token ranges of the queries are the caption's phrases as the model itself
    delimits them (between [CLS], ".", "?" and [SEP]).
    """

    #: bumped when pre- or post-processing changes (thresholds are part of the caller's cache key)
    feature_version = 1

    def __init__(self, card: ModelCard, key: str, model: Any, processor: Any, *, device: Any, dtype: Any):
        self.card = card
        self.key = key
        self.model = model
        self.processor = processor
        self.device = device
        self.dtype = dtype  # autocast precision on the device; the weights stay float32
        tokenizer = processor.tokenizer
        # The ids the model uses to cut the caption into phrases (SPECIAL_TOKENS in transformers'
        # modeling_grounding_dino: [CLS], [SEP], ".", "?"), read from this model's own tokenizer.
        self._delimiters = {tokenizer.cls_token_id, tokenizer.sep_token_id}
        self._delimiters |= {tokenizer.convert_tokens_to_ids(t) for t in (".", "?")} - {tokenizer.unk_token_id}
        self._pad_id = tokenizer.pad_token_id

    @staticmethod
    def _clean_queries(queries: Sequence[str], image_index: int) -> list[str]:
        """Queries as the processor should see them; "." would split a query into two phrases."""
        if isinstance(queries, str):
            raise TypeError(f"queries of image {image_index} must be a list of strings, not one string")
        cleaned = []
        for query in queries:
            text = str(query).strip().rstrip(".").strip()
            if not text:
                raise ValueError(f"image {image_index}: empty query {query!r}")
            if "." in text or "?" in text:
                raise ValueError(
                    f"image {image_index}: query {query!r} contains '.' or '?', which Grounding DINO reads as "
                    "the end of a phrase; rephrase it without them"
                )
            cleaned.append(text)
        return cleaned

    def _phrase_spans(self, input_ids: list[int]) -> list[list[int]]:
        """Token positions of each phrase of a caption: runs of tokens between delimiters, padding excluded."""
        spans: list[list[int]] = []
        current: list[int] = []
        for position, token in enumerate(input_ids):
            if token in self._delimiters or token == self._pad_id:
                if current:
                    spans.append(current)
                current = []
            else:
                current.append(position)
        if current:
            spans.append(current)
        return spans

    def detect(
        self,
        images: Sequence[Image.Image],
        queries: Sequence[Sequence[str]],
        box_threshold: float = 0.35,
        text_threshold: float = 0.25,
        batch_size: int = 8,
    ) -> list[list[Detection]]:
        """Detections for every image, best first; ``queries[i]`` are the texts looked for in ``images[i]``.

        Boxes are xyxy in pixels of the original image, clipped to it. An image with no queries gets no
        detections. The defaults are Grounding DINO's own demo thresholds.

        >>> detector.detect([photo], [["a person", "the red espresso cup"]])  # doctest: +SKIP
        [[Detection(label='a person', box=(12.0, 30.5, 140.2, 250.0), score=0.81), ...]]
        """
        import torch

        if len(images) != len(queries):
            raise ValueError(f"{len(images)} images but {len(queries)} query lists")
        cleaned = [self._clean_queries(q, i) for i, q in enumerate(queries)]
        results: list[list[Detection]] = [[] for _ in images]
        todo = [i for i, q in enumerate(cleaned) if q]
        max_tokens = self.model.config.max_text_len
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            batch_images = [_rgb(images[i]) for i in chunk]
            inputs = self.processor(
                images=batch_images, text=[cleaned[i] for i in chunk], return_tensors="pt", padding=True
            )
            if inputs["input_ids"].shape[1] > max_tokens:
                raise ValueError(
                    f"the queries of images {chunk} make a caption of {inputs['input_ids'].shape[1]} tokens; "
                    f"Grounding DINO reads at most {max_tokens}: ask for fewer or shorter queries per image"
                )
            with torch.inference_mode(), registry.autocast(self.device, self.dtype):
                outputs = self.model(**{name: value.to(self.device) for name, value in inputs.items()})
            # Post-processing in float32 on the CPU, whatever the model's dtype and device.
            outputs.logits = outputs.logits.float().cpu()
            outputs.pred_boxes = outputs.pred_boxes.float().cpu()
            input_ids = inputs["input_ids"].cpu()
            sizes = [(image.height, image.width) for image in batch_images]
            processed = self.processor.post_process_grounded_object_detection(
                outputs,
                input_ids=input_ids,
                threshold=box_threshold,
                text_threshold=text_threshold,
                target_sizes=sizes,
            )
            token_probs = torch.sigmoid(outputs.logits)  # (batch, boxes, max_text_len)
            for row, image_index in enumerate(chunk):
                results[image_index] = self._assign(
                    processed[row],
                    token_probs[row],
                    input_ids[row].tolist(),
                    queries[image_index],
                    box_threshold,
                    text_threshold,
                    sizes[row],
                )
        return results

    def _assign(
        self,
        processed: dict[str, Any],
        token_probs: Any,
        input_ids: list[int],
        queries: Sequence[str],
        box_threshold: float,
        text_threshold: float,
        size: tuple[int, int],
    ) -> list[Detection]:
        """The post-processed boxes of one image, each labelled with the query its tokens match best."""
        spans = self._phrase_spans(input_ids)
        if len(spans) != len(queries):  # e.g. a query the tokenizer reduces to nothing
            raise ValueError(
                f"the caption splits into {len(spans)} phrases for {len(queries)} queries {list(queries)!r}"
            )
        # The post-processing keeps boxes whose best token probability exceeds box_threshold, in box
        # order; the same rule picks the rows whose per-token probabilities give the phrase scores.
        kept = token_probs[token_probs.max(dim=-1).values > box_threshold]
        if kept.shape[0] != len(processed["scores"]):
            raise RuntimeError("post-processing kept a different set of boxes than its documented rule")
        height, width = size
        detections = []
        for probs, box, score in zip(kept, processed["boxes"].tolist(), processed["scores"].tolist()):
            phrase_scores = [float(probs[span].max()) for span in spans]
            best = int(np.argmax(phrase_scores))
            if phrase_scores[best] <= text_threshold:
                continue  # no token of any query is confident: the box answers none of them
            x0, y0, x1, y1 = (min(max(v, 0.0), float(limit)) for v, limit in zip(box, (width, height) * 2))
            detections.append(Detection(label=queries[best], box=(x0, y0, x1, y1), score=float(score)))
        detections.sort(key=lambda d: -d.score)
        return detections


def load_grounding_dino(
    card: ModelCard,
    *,
    device: Any = "cpu",
    dtype: Any = None,
    models_dir: str | Path | None = None,
) -> GroundingDinoDetector:
    """A ``GroundingDinoDetector`` for ``card`` from local files only (Hub cache snapshot or tiny folder)."""
    import torch
    from transformers import GroundingDinoForObjectDetection, GroundingDinoProcessor

    folder = registry.model_folder(card, GROUNDING_DINO_FILES, models_dir)
    target = torch.device(device)
    processor = _from_pretrained(GroundingDinoProcessor, card, folder, backend="pil")
    model = _from_pretrained(GroundingDinoForObjectDetection, card, folder, dtype=torch.float32)
    model.to(target).eval()
    key = registry.weights_key(card, folder, GROUNDING_DINO_FILES)
    compute = registry.compute_dtype(target, dtype)
    return GroundingDinoDetector(card, key, model, processor, device=target, dtype=compute)


# --- SAM 2 --------------------------------------------------------------------------------------------


class Sam2Segmenter:
    """Box-prompted segmentation with SAM 2 (transformers' ``Sam2Model`` + ``Sam2Processor``).

    The image encoder runs once per image, batched; the light prompt encoder and mask decoder then run
    per image on that image's boxes (the processor cannot pad box lists of different lengths). One mask
    per box (``multimask_output=False``, SAM's choice for an unambiguous box prompt), upscaled by the
    processor's ``post_process_masks`` to the original image size and thresholded at logit 0.
    """

    feature_version = 1

    def __init__(self, card: ModelCard, key: str, model: Any, processor: Any, *, device: Any, dtype: Any):
        self.card = card
        self.key = key
        self.model = model
        self.processor = processor
        self.device = device
        self.dtype = dtype  # autocast precision on the device; the weights stay float32

    def segment(
        self, images: Sequence[Image.Image], boxes: Sequence[np.ndarray], batch_size: int = 8
    ) -> list[np.ndarray]:
        """For every image, a (k, H, W) bool array: the mask of each of its k boxes (xyxy pixels)."""
        import torch

        if len(images) != len(boxes):
            raise ValueError(f"{len(images)} images but {len(boxes)} box arrays")
        box_arrays = []
        for index, image_boxes in enumerate(boxes):
            array = np.asarray(image_boxes, dtype=np.float64)
            if array.size == 0:
                array = array.reshape(0, 4)
            if array.ndim != 2 or array.shape[1] != 4 or not np.isfinite(array).all():
                raise ValueError(
                    f"image {index}: boxes must be a (k, 4) array of finite xyxy pixels, got shape {array.shape}"
                )
            box_arrays.append(array)

        results: list[np.ndarray] = [np.zeros((0, im.height, im.width), dtype=bool) for im in images]
        todo = [i for i, array in enumerate(box_arrays) if len(array)]
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            inputs = self.processor(images=[_rgb(images[i]) for i in chunk], return_tensors="pt")
            pixel_values = inputs["pixel_values"].to(self.device)
            with torch.inference_mode(), registry.autocast(self.device, self.dtype):
                embeddings = self.model.get_image_embeddings(pixel_values)
                for row, image_index in enumerate(chunk):
                    original_size = inputs["original_sizes"][row : row + 1]
                    prompts = self.processor(
                        original_sizes=original_size,
                        input_boxes=[box_arrays[image_index].tolist()],
                        return_tensors="pt",
                    )
                    outputs = self.model(
                        image_embeddings=[level[row : row + 1] for level in embeddings],
                        input_boxes=prompts["input_boxes"].to(self.device),
                        multimask_output=False,
                    )
                    masks = self.processor.post_process_masks(outputs.pred_masks.float().cpu(), original_size)[0]
                    results[image_index] = masks[:, 0].numpy().astype(bool)  # (k, 1, H, W) -> (k, H, W)
        return results


def load_sam2(
    card: ModelCard,
    *,
    device: Any = "cpu",
    dtype: Any = None,
    models_dir: str | Path | None = None,
) -> Sam2Segmenter:
    """A ``Sam2Segmenter`` for ``card`` from local files only (Hub cache snapshot or tiny folder)."""
    import torch
    from transformers import Sam2Model, Sam2Processor

    folder = registry.model_folder(card, SAM2_FILES, models_dir)
    target = torch.device(device)
    processor = _from_pretrained(Sam2Processor, card, folder)
    with _expected_sam2_video_warning():
        model = _from_pretrained(Sam2Model, card, folder, dtype=torch.float32)
    model.to(target).eval()
    key = registry.weights_key(card, folder, SAM2_FILES)
    compute = registry.compute_dtype(target, dtype)
    return Sam2Segmenter(card, key, model, processor, device=target, dtype=compute)


# --- tiny random models -------------------------------------------------------------------------------

# Words a test caption may use; anything else still tokenizes through the single-letter word pieces.
_TINY_WORDS = """
a an the of and with in on at to for from by near next behind under over left right front back top
bottom side middle one two three four five six some each other his her their its this that
person people man woman men women boy girl child children baby kid adult old young face head hair
hand hands arm arms leg legs eye eyes nose mouth ear beard smile body figure portrait subject
dog cat horse cow sheep bird fish bear elephant zebra giraffe animal pet puppy kitten rabbit
cup mug glass bottle plate bowl spoon fork knife table chair sofa couch bed lamp desk book phone
laptop computer screen camera clock vase plant flower tree car bus bike bicycle boat train plane
ball toy bag backpack handbag suitcase umbrella hat cap helmet glasses sunglasses scarf tie watch
shirt jacket coat dress skirt pants jeans shorts shoe shoes boot boots sock socks sweater hoodie
suit uniform belt glove gloves necklace ring earring bracelet jewelry item object thing
espresso coffee tea cake apple banana orange pizza sandwich bread food drink
red blue green yellow black white gray grey brown pink purple orange gold silver striped dotted
big small large little tall short long wooden metal plastic leather paper ceramic
sitting standing walking running holding wearing looking playing eating drinking reading
room street park beach forest field city house building wall floor window door sky water road
background scene image photo picture painting drawing cartoon sketch style
""".split()


def _tiny_bert_vocab() -> list[str]:
    """A small WordPiece vocabulary laid out like bert-base-uncased where the model hard-codes ids.

    transformers' Grounding DINO cuts captions into phrases at the token ids 101 ([CLS]), 102 ([SEP]),
    1012 (".") and 1029 ("?") of bert-base-uncased, whatever the tokenizer; so the tiny vocabulary puts
    [PAD] at 0, [UNK]/[CLS]/[SEP]/[MASK] at 100-103, and ASCII punctuation, digits and letters from 999
    on as BERT does ("!" = 999, so "." = 1012 and "?" = 1029), fills the gaps with [unused] entries, and
    ends with "##" letter pieces and a few hundred common words.
    """
    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [f"[unused{i}]" for i in range(99, 99 + 999 - len(vocab))]
    vocab += [chr(code) for code in range(33, 127) if not chr(code).isupper()]
    vocab += ["##" + letter for letter in string.ascii_lowercase] + ["##" + digit for digit in string.digits]
    seen = set(vocab)
    vocab += [word for word in dict.fromkeys(_TINY_WORDS) if word not in seen]
    assert (vocab.index("[CLS]"), vocab.index("[SEP]"), vocab.index("."), vocab.index("?")) == (101, 102, 1012, 1029)
    return vocab


def _check_size(size: str) -> None:
    if size not in ("tiny", "paper"):
        raise ValueError(f"unknown size {size!r}; sizes: tiny, paper")


def grounding_dino_config(size: str = "tiny", vocab_size: int | None = None) -> Any:
    """The ``GroundingDinoConfig`` of a random Grounding DINO: ``tiny`` or ``paper`` (grounding-dino-tiny's size).

    ``paper`` is ``configs/grounding-dino-tiny.json`` (Swin-T + BERT-base, 900 queries: 172 M parameters).
    ``vocab_size`` (tiny only): the text embedding's rows, the tiny vocabulary's length by default.
    """
    from transformers import GroundingDinoConfig, SwinConfig

    _check_size(size)
    if size == "paper":
        shipped = dict(registry.paper_config("grounding-dino-tiny")["config"])
        backbone = {key: value for key, value in shipped.pop("backbone_config").items() if key != "model_type"}
        return GroundingDinoConfig(backbone_config=SwinConfig(**backbone), **shipped)
    return GroundingDinoConfig(
        backbone_config=SwinConfig(
            embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1], window_size=7, out_indices=[2, 3, 4]
        ),
        text_config={
            "model_type": "bert",
            "vocab_size": vocab_size or len(_tiny_bert_vocab()),
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 32,
            "max_position_embeddings": 256,
        },
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,  # 2: the box heads of decoder layers are tied
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_n_points=2,
        decoder_n_points=2,
        num_queries=30,
        max_text_len=256,
    )


def random_grounding_dino(size: str = "tiny", device: Any = None) -> Any:
    """The ``GroundingDinoForObjectDetection`` of :func:`grounding_dino_config` (``"meta"``: shapes only)."""
    import contextlib

    import torch
    from transformers import GroundingDinoForObjectDetection

    config = grounding_dino_config(size)
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return GroundingDinoForObjectDetection(config)


def make_tiny_grounding_dino(path: Path, seed: int, size: str = "tiny") -> Path:
    """Write a random Grounding DINO (Swin + BERT, the same architecture) with its processor to ``path``.

    The files are those of IDEA-Research/grounding-dino-tiny (``GROUNDING_DINO_FILES``), so the folder
    can stand in for a Hub cache snapshot. ``size``: ``tiny`` (a few small layers, 256 px input) or
    ``paper`` (grounding-dino-tiny's real size and its processor's 800 px shortest edge; the tokenizer
    stays the small vocabulary below, since BERT's cannot be made offline: captions split into a few more
    word pieces than with BERT's). Same seed, same bytes; the caller's RNG state is left alone.
    """
    import torch
    from transformers import BertTokenizer, GroundingDinoForObjectDetection, GroundingDinoImageProcessor

    _check_size(size)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = _tiny_bert_vocab()
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=512)
    tokenizer.save_pretrained(path)  # tokenizer.json + tokenizer_config.json
    special = {
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "pad_token": "[PAD]",
        "sep_token": "[SEP]",
        "unk_token": "[UNK]",
    }
    _write_json(path / "special_tokens_map.json", special)
    _write_json(path / "added_tokens.json", {token: vocab.index(token) for token in sorted(special.values())})
    if size == "paper":  # the real processor: shortest edge 800, longest 1333
        processor_size = registry.paper_config("grounding-dino-tiny")["preprocessor"]["size"]
    else:  # real: shortest edge 800. 256 keeps one CPU forward at a few tens of milliseconds.
        processor_size = {"shortest_edge": 256, "longest_edge": 512}
    GroundingDinoImageProcessor(size=processor_size).save_pretrained(path)

    config = grounding_dino_config(size, vocab_size=len(vocab))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GroundingDinoForObjectDetection(config).eval()
    model.save_pretrained(path)  # config.json + model.safetensors, under the Hub checkpoint's key names
    return path


def sam2_config(size: str = "tiny") -> Any:
    """The ``Sam2VideoConfig`` of a random SAM 2.1: ``tiny`` (128 px) or ``paper`` (Hiera-T's real size).

    ``paper`` is ``configs/sam2.1-hiera-tiny.json`` (sam2.1_hiera_t.yaml's numbers: 38.9 M parameters).
    """
    from transformers import Sam2HieraDetConfig, Sam2VideoConfig, Sam2VisionConfig

    _check_size(size)
    if size == "paper":
        shipped = dict(registry.paper_config("sam2.1-hiera-tiny")["config"])
        vision = dict(shipped.pop("vision_config"))
        backbone = Sam2HieraDetConfig(**vision.pop("backbone_config"))
        return Sam2VideoConfig(vision_config=Sam2VisionConfig(backbone_config=backbone, **vision), **shipped)
    side = _TINY_SAM2_SIDE
    backbone = Sam2HieraDetConfig(
        hidden_size=12,
        image_size=side,
        blocks_per_stage=[1, 1, 2, 1],
        embed_dim_per_stage=[12, 24, 48, 96],
        num_attention_heads_per_stage=[1, 1, 1, 1],
        window_size_per_stage=[8, 4, 4, 2],
        # A global-attention block may not open a stage (its query pooling needs a window size).
        global_attention_blocks=[3],
        window_positional_embedding_background_size=[4, 4],
    )
    vision = Sam2VisionConfig(
        backbone_config=backbone,
        backbone_channel_list=[96, 48, 24, 12],
        backbone_feature_sizes=[[side // 4] * 2, [side // 8] * 2, [side // 16] * 2],
        fpn_hidden_size=32,
    )
    return Sam2VideoConfig(
        vision_config=vision,
        prompt_encoder_config={"hidden_size": 32, "image_size": side, "patch_size": 16, "mask_input_channels": 8},
        mask_decoder_config={
            "hidden_size": 32,
            "mlp_dim": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "iou_head_hidden_dim": 32,
        },
        memory_attention_hidden_size=32,
        memory_attention_num_layers=1,
        memory_attention_feed_forward_hidden_size=32,
        memory_attention_rope_feat_sizes=[side // 16, side // 16],
        memory_encoder_hidden_size=32,
        memory_encoder_output_channels=16,
        mask_downsampler_embed_dim=32,
        memory_fuser_num_layers=1,
        memory_fuser_embed_dim=32,
        memory_fuser_intermediate_dim=64,
    )


_TINY_SAM2_SIDE = 128  # the tiny SAM 2's input side (real: 1024)


def random_sam2(size: str = "tiny", device: Any = None) -> Any:
    """The ``Sam2VideoModel`` of :func:`sam2_config` (``device="meta"``: shapes only, nothing allocated)."""
    import contextlib

    import torch
    from transformers import Sam2VideoModel

    config = sam2_config(size)
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return Sam2VideoModel(config)


def make_tiny_sam2(path: Path, seed: int, size: str = "tiny") -> Path:
    """Write a random SAM 2.1 with its processor files to ``path``, as facebook/sam2.1-hiera-tiny holds it.

    That repository holds a ``sam2_video`` checkpoint (image model + video memory modules) and a
    ``Sam2VideoProcessor`` processor_config.json; the random one is the same kind, so loading it exercises
    exactly what loading the real one does. ``size``: ``tiny`` (128 px input, real: 1024; four Hiera
    stages of 1-2 blocks, one memory layer) or ``paper`` (Hiera-T's real size, 1024 px). Same seed, same
    bytes; the caller's RNG state is left alone.
    """
    import torch
    from transformers import Sam2ImageProcessor, Sam2VideoModel

    _check_size(size)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = sam2_config(size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Sam2VideoModel(config).eval()
    model.save_pretrained(path)
    if size == "paper":
        shipped = registry.paper_config("sam2.1-hiera-tiny")
        image_processor = Sam2ImageProcessor(**shipped["preprocessor"])
        processor = shipped["processor"]
    else:
        side = _TINY_SAM2_SIDE
        image_processor = Sam2ImageProcessor(
            size={"height": side, "width": side}, mask_size={"height": side // 4, "width": side // 4}
        )
        processor = {"point_pad_value": -10, "processor_class": "Sam2VideoProcessor", "target_size": side}
    image_processor.save_pretrained(path)  # preprocessor_config.json
    _write_json(path / "processor_config.json", processor)
    return path


def _write_json(file: Path, content: dict[str, Any]) -> None:
    file.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
