"""Who became whom: which generated face stands for which reference identity, and where it stands.

ID-Sim (:mod:`.faces`) already matches reference faces to generated faces; here that matching is kept
per image and read as a face recogniser would: an identity is *found* only when its matched face is
recognisably that person, and from the located identities follow the scores that a copy of the right
faces in the wrong places, a crowd of faces or one face repeated cannot win:

- **found**: the reference's Hungarian-matched face has cosine >= ``threshold`` (the face model's
  same-identity threshold) *and* resembles this reference more than any other reference of the prompt
  (a positive margin), so a lookalike stranger or a neighbour's face does not count;
- **missing**: a reference with a face that was not found;
- **swapped**: a found identity out of place: its rank from the left among the found identities (by
  the centre of its face) differs from its rank in the prompt's layout among the same identities;
- **cloned**: generated faces that repeat a person another generated face already shows. Two faces
  are one person when their cosine is >= ``threshold``, unless they were matched to two references
  that are themselves that alike (a prompt's persons are distinct identities); each group of k faces
  of one person counts k - 1 clones;
- **extra**: faces beyond the persons the prompt asks for, ``max(0, k - n)``;
- :func:`layout_score`: the share of the position graph's ``left_of`` edges that hold between the
  located identities (an identity not found fails its edges);
- :func:`id_sim_strict`: ID-Sim that padding cannot buy, matched cosines (negatives as 0) over
  ``max(n, k)``.

Everything here is pure numpy over face embeddings and boxes (upstream: aligned faces, L2-normalised
embeddings, boxes in the image's pixels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ._arrays import as_matrix
from .matching import hungarian_match
from .similarity import cosine_matrix


@dataclass(frozen=True)
class WhoBecameWhom:
    """The identity assignment of one generated image, indexed by the prompt's references (in the
    order given) and by the generated faces."""

    face: np.ndarray  #: (n,) int, the generated face matched to each reference, -1 if none
    cosine: np.ndarray  #: (n,) the matched cosine, NaN when no face was matched
    margin: np.ndarray  #: (n,) matched cosine minus that face's best cosine to another reference; NaN if none
    found: np.ndarray  #: (n,) bool, recognised as itself (see the module doc)
    has_reference: np.ndarray  #: (n,) bool, the reference image shows a face (else nothing can be located)
    in_place: np.ndarray  #: (n,) bool, found and at its layout rank among the found identities
    clone_group: np.ndarray  #: (k,) int, faces showing one person share a group id; -1 for a face alone
    n_faces: int  #: k

    @property
    def n_found(self) -> int:
        return int(self.found.sum())

    @property
    def n_missing(self) -> int:
        return int((self.has_reference & ~self.found).sum())

    @property
    def n_swapped(self) -> int:
        return int((self.found & ~self.in_place).sum())

    @property
    def n_cloned(self) -> int:
        groups = self.clone_group[self.clone_group >= 0]
        return int(len(groups) - len(np.unique(groups)))

    @property
    def n_extra(self) -> int:
        return max(0, self.n_faces - len(self.face))

    def as_evidence(self, slots: Sequence[str], boxes: Any) -> dict[str, Any]:
        """JSON-ready record for the model page: per reference its face box, cosine, margin and verdict."""
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        identities = []
        for i, slot in enumerate(slots):
            f = int(self.face[i])
            identities.append(
                {
                    "slot": slot,
                    "face": f,
                    "box": [round(float(v), 1) for v in boxes[f]] if f >= 0 else None,
                    "cosine": _json(self.cosine[i]),
                    "margin": _json(self.margin[i]),
                    "found": bool(self.found[i]),
                    "has_reference": bool(self.has_reference[i]),
                    "in_place": bool(self.in_place[i]),
                }
            )
        return {
            "identities": identities,
            "faces": [[round(float(v), 1) for v in box] for box in boxes],
            "clone_group": [int(g) for g in self.clone_group],
            "counts": {"found": self.n_found, "missing": self.n_missing, "swapped": self.n_swapped,
                       "cloned": self.n_cloned, "extra": self.n_extra, "faces": self.n_faces},
        }  # fmt: skip


def _json(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 4)


def face_centres_x(boxes: Any) -> np.ndarray:
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    return (boxes[:, 0] + boxes[:, 2]) / 2


def who_became_whom(
    ref_face_embs: Sequence[Any | None], gen_face_embs: Any, gen_boxes: Any, threshold: float
) -> WhoBecameWhom:
    """The assignment of one image. ``ref_face_embs``: one embedding per reference identity, in the
    prompt's layout order (left to right), None for a reference whose image shows no face;
    ``gen_face_embs`` (k, d) and ``gen_boxes`` (k, 4) every face found in the generation.

    >>> r = who_became_whom([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[0, 0, 10, 10], [50, 0, 60, 10]], 0.5)
    >>> r.found.tolist(), r.in_place.tolist(), r.n_swapped  # both recognised, standing the wrong way round
    ([True, True], [False, False], 2)
    """
    n = len(ref_face_embs)
    usable = [i for i, e in enumerate(ref_face_embs) if e is not None]
    has_reference = np.zeros(n, dtype=bool)
    has_reference[usable] = True
    face = np.full(n, -1, dtype=np.int64)
    cosine = np.full(n, np.nan)
    margin = np.full(n, np.nan)
    boxes = np.asarray(gen_boxes, dtype=np.float64).reshape(-1, 4)
    k = len(boxes)
    gens = np.asarray(gen_face_embs, dtype=np.float64).reshape(k, -1) if k else np.zeros((0, 1))
    if len(gens) != k:
        raise ValueError(f"who_became_whom: {len(gens)} face embeddings for {k} boxes")
    clone_group = np.full(k, -1, dtype=np.int64)
    if k:
        refs = np.stack([np.asarray(ref_face_embs[i], dtype=np.float64) for i in usable]) if usable else None
        gens = as_matrix(gens, "gen_face_embs", None if refs is None else refs.shape[1])
        gen_of_ref = np.zeros(0, dtype=np.int64)
        ref_sim = np.zeros((0, 0))
        if refs is not None:
            refs = as_matrix(refs, "ref_face_embs")
            sim = cosine_matrix(refs, gens)  # (u, k)
            gen_of_ref = hungarian_match(sim).gen_index
            ref_sim = cosine_matrix(refs, refs)
            for row, i in enumerate(usable):
                f = int(gen_of_ref[row])
                if f < 0:
                    continue
                face[i], cosine[i] = f, sim[row, f]
                others = np.delete(sim[:, f], row)
                margin[i] = sim[row, f] - others.max() if others.size else np.inf
        clone_group = _clone_groups(cosine_matrix(gens, gens), ref_sim, gen_of_ref, threshold)
    found = has_reference & (face >= 0) & (np.nan_to_num(cosine, nan=-np.inf) >= threshold) & (np.nan_to_num(margin, nan=-np.inf) > 0)
    margin[np.isinf(margin)] = np.nan  # a single reference has no other to be confused with
    in_place = _in_place(found, face, face_centres_x(boxes))
    return WhoBecameWhom(face, cosine, margin, found, has_reference, in_place, clone_group, k)


def _in_place(found: np.ndarray, face: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Found identities whose left-to-right rank among the found ones is their layout rank."""
    located = np.flatnonzero(found)  # layout order (references are given left to right)
    order = located[np.argsort(x[face[located]], kind="stable")]  # the same identities by where they stand
    in_place = np.zeros(len(found), dtype=bool)
    in_place[located] = located == order
    return in_place


def _clone_groups(gen_sim: np.ndarray, ref_sim: np.ndarray, ref_of_gen: np.ndarray, threshold: float) -> np.ndarray:
    """Connected groups of generated faces that show one person; -1 for a face alone.

    ``ref_of_gen`` maps each usable reference (row) to its generated face: two faces matched to two
    references that are themselves at least ``threshold`` alike are not counted as one person.
    """
    k = len(gen_sim)
    matched_ref = np.full(k, -1, dtype=np.int64)
    for row, f in enumerate(ref_of_gen):
        if f >= 0:
            matched_ref[f] = row
    alike = gen_sim >= threshold
    np.fill_diagonal(alike, False)
    for a in range(k):
        for b in range(k):
            ra, rb = matched_ref[a], matched_ref[b]
            if alike[a, b] and ra >= 0 and rb >= 0 and ref_sim[ra, rb] >= threshold:
                alike[a, b] = False
    group = np.full(k, -1, dtype=np.int64)
    next_id = 0
    for start in range(k):
        if group[start] >= 0 or not alike[start].any():
            continue
        stack = [start]
        group[start] = next_id
        while stack:
            a = stack.pop()
            for b in np.flatnonzero(alike[a] & (group < 0)):
                group[b] = next_id
                stack.append(b)
        next_id += 1
    return group


def layout_score(
    slots: Sequence[str], position_graph: Sequence[Mapping[str, str]], assignment: WhoBecameWhom, boxes: Any
) -> tuple[float, int]:
    """(share of the ``left_of`` edges that hold between the located identities, edges not judged).

    ``slots`` name the references of ``assignment`` in order. An edge holds when both its persons were
    found and the source's face centre is left of the target's; an identity not found fails its edges.
    An edge touching a reference without a face cannot be judged: it is left out and counted; NaN when
    no edge can be judged.

    >>> r = who_became_whom([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[0, 0, 10, 10], [50, 0, 60, 10]], 0.5)
    >>> layout_score(["A", "B"], [{"source": "A", "relation": "left_of", "target": "B"}], r, [[0, 0, 10, 10], [50, 0, 60, 10]])
    (0.0, 0)
    """
    index = {slot: i for i, slot in enumerate(slots)}
    x = face_centres_x(boxes)
    held = judged = skipped = 0
    for e in position_graph:
        s, t = index[e["source"]], index[e["target"]]
        if not (assignment.has_reference[s] and assignment.has_reference[t]):
            skipped += 1
            continue
        judged += 1
        if assignment.found[s] and assignment.found[t]:
            held += int(x[assignment.face[s]] < x[assignment.face[t]])
    return (held / judged if judged else float("nan")), skipped


def id_sim_strict(assignment: WhoBecameWhom, without_face: int = 0) -> float:
    """ID-Sim that extra faces cannot raise: the matched cosines (a negative one counted as 0, like an
    unmatched reference) summed over ``max(n, k - without_face)``, where n counts the references with a
    face and k the faces found. A reference without a face is left out of n, and its person may show a
    face in the generation, so that face is not counted as padding. NaN when no reference has a face.

    A picture of every pool identity for a two-person prompt (k = 12) keeps at most 2/12 of the
    collage's value, while ``id_sim`` (surplus faces ignored) keeps all of it.
    """
    n = int(assignment.has_reference.sum())
    if n == 0:
        return float("nan")
    total = np.nansum(np.clip(assignment.cosine[assignment.has_reference], 0.0, None))
    return float(total / max(n, assignment.n_faces - without_face))
