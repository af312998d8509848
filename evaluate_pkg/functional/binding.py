"""Binding grounded on the located person: which item is with the person whose face was recognised.

The paper's Attr-VQA asks about "the person on the far left", so a picture whose persons hold each
other's items in the right places passes, and one whose persons hold their own items in a shifted row
fails. Here the question is asked of the identity instead:

1. the located identity's face (:mod:`.identity`) gives its person box: the detected person box that
   holds the face's centre (:func:`person_for_face`), or, with none, a body box grown from the face
   (:func:`body_from_face`);
2. every detected item box goes to one person (:func:`assign_items`): the one whose box covers most
   of the item, else the nearest within one person width;
3. the item crops with an identity are compared with the prompt's item references (DINOv2 cosines):
   the identity is bound right when the reference its crops resemble most is its own item
   (:func:`bound_right`). An identity with no item crop, or not found at all, is not bound.

Boxes are ``(x0, y0, x1, y1)`` in image pixels. Pure numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# A body box grown from a face when no person box holds it: the face's width 1.5 times to either side,
# half a face above and seven faces below (a standing adult is about 7-8 heads tall), clipped to the image.
BODY_SIDE, BODY_ABOVE, BODY_BELOW = 1.5, 0.5, 7.0


def _boxes(boxes: Any) -> np.ndarray:
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 4)


def _area(boxes: np.ndarray) -> np.ndarray:
    return np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)


def _contains(boxes: np.ndarray, x: float, y: float) -> np.ndarray:
    return (boxes[:, 0] <= x) & (x <= boxes[:, 2]) & (boxes[:, 1] <= y) & (y <= boxes[:, 3])


def _centre(box: Any) -> tuple[float, float]:
    b = np.asarray(box, dtype=np.float64)
    return (b[0] + b[2]) / 2, (b[1] + b[3]) / 2


def person_for_face(face_box: Any, person_boxes: Any, other_faces: Any = ()) -> int:
    """Index of the person box that holds this face, -1 if none holds its centre.

    Among several, a box that holds no other located face's centre comes first (a loose box around
    two persons belongs to neither), then the smallest.

    >>> person_for_face([10, 10, 20, 20], [[0, 0, 100, 100], [5, 5, 40, 90], [50, 0, 90, 90]], [[60, 10, 70, 20]])
    1
    """
    persons = _boxes(person_boxes)
    x, y = _centre(face_box)
    holding = np.flatnonzero(_contains(persons, x, y))
    if not holding.size:
        return -1
    others = [_centre(b) for b in _boxes(other_faces)]
    shared = np.array([sum(bool(_contains(persons[i : i + 1], ox, oy)[0]) for ox, oy in others) for i in holding])
    order = np.lexsort((_area(persons[holding]), shared))
    return int(holding[order[0]])


def body_from_face(face_box: Any, image_size: tuple[int, int]) -> np.ndarray:
    """The body box a face implies when no person box holds it (see ``BODY_*``), clipped to the image."""
    x0, y0, x1, y1 = np.asarray(face_box, dtype=np.float64)
    w, h = x1 - x0, y1 - y0
    width, height = image_size
    box = np.array([x0 - BODY_SIDE * w, y0 - BODY_ABOVE * h, x1 + BODY_SIDE * w, y1 + BODY_BELOW * h])
    return np.clip(box, 0, [width, height, width, height])


def assign_items(person_boxes: Any, item_boxes: Any) -> np.ndarray:
    """(m,) the person each item box goes to, -1 for none.

    The person whose box covers the largest share of the item's area; an item that touches no person
    goes to the nearest one (by the horizontal gap between the boxes) when the gap is at most that
    person box's width, since a looked-at or leaned-on item may stand beside its person.

    >>> assign_items([[0, 0, 50, 100], [60, 0, 110, 100]], [[40, 50, 55, 60], [70, 50, 80, 60], [300, 0, 310, 10]]).tolist()
    [0, 1, -1]
    """
    persons, items = _boxes(person_boxes), _boxes(item_boxes)
    out = np.full(len(items), -1, dtype=np.int64)
    if not len(persons):
        return out
    for j, item in enumerate(items):
        ix0 = np.maximum(persons[:, 0], item[0])
        iy0 = np.maximum(persons[:, 1], item[1])
        ix1 = np.minimum(persons[:, 2], item[2])
        iy1 = np.minimum(persons[:, 3], item[3])
        inter = np.clip(ix1 - ix0, 0, None) * np.clip(iy1 - iy0, 0, None)
        if inter.max() > 0:
            out[j] = int(np.argmax(inter))
            continue
        gap = np.maximum(persons[:, 0] - item[2], item[0] - persons[:, 2])  # horizontal space between the two
        widths = persons[:, 2] - persons[:, 0]
        nearest = int(np.argmin(gap))
        if gap[nearest] <= widths[nearest]:
            out[j] = nearest
    return out


def bound_right(crop_item_sims: Any, own_item: int) -> bool:
    """Whether the item references the crops with a person resemble most is that person's own item.

    ``crop_item_sims`` is (c, J): each of the person's c item crops against the prompt's J item
    references. The person's affinity to item j is its best crop's cosine to j; bound right when the
    strict maximum of those affinities is ``own_item`` (a tie, e.g. every item pasted beside every
    person, is not a binding). No crop: not bound.

    >>> bound_right([[0.9, 0.2], [0.1, 0.3]], 0), bound_right([[0.2, 0.9]], 0), bound_right(np.zeros((0, 2)), 0)
    (True, False, False)
    """
    sims = np.asarray(crop_item_sims, dtype=np.float64)
    if sims.ndim != 2 or not sims.shape[0]:
        return False
    affinity = sims.max(axis=0)
    best = float(affinity[own_item])
    others = np.delete(affinity, own_item)
    return bool(not others.size or best > others.max())
