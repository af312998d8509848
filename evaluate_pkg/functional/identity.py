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
  ``max(n, k)``;
- :func:`placed`: the found persons that stand where the position graph says, with respect to every
  other found person;
- :func:`id_arranged`: ``id_sim_strict`` in which a person counts only when found *and* placed (and,
  given a binding, bound), so the right faces in the wrong places cannot match the right arrangement.

Everything here is pure numpy over face embeddings and boxes (upstream: aligned faces, L2-normalised
embeddings, boxes in the image's pixels).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
            "counts": {
                "found": self.n_found,
                "missing": self.n_missing,
                "swapped": self.n_swapped,
                "cloned": self.n_cloned,
                "extra": self.n_extra,
                "faces": self.n_faces,
            },
        }


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
    found = (
        has_reference
        & (face >= 0)
        & (np.nan_to_num(cosine, nan=-np.inf) >= threshold)
        & (np.nan_to_num(margin, nan=-np.inf) > 0)
    )
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


def placed(
    slots: Sequence[str], position_graph: Sequence[Mapping[str, str]], assignment: WhoBecameWhom, boxes: Any
) -> np.ndarray:
    """(n,) bool, indexed like ``slots``: the found persons standing where the position graph says.

    The graph's ``left_of`` edges are closed transitively (``A left_of B`` and ``B left_of C`` give
    ``A left_of C``), so a person is held to its place in the whole row, not only next to its neighbours.
    A found person is placed when, for every other found person the closed graph orders it with, the
    order of their face centres (left to right) is the graph's. Persons not found (and references
    without a face) are not placed, and are not held against the others: their own score is already 0
    (or missing). A found person that the graph orders with no other found person is placed.

    >>> r = who_became_whom([[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[0, 0, 10, 10], [50, 0, 60, 10]], 0.5)
    >>> placed(["A", "B"], [{"source": "A", "relation": "left_of", "target": "B"}], r, [[0, 0, 10, 10], [50, 0, 60, 10]]).tolist()
    [False, False]
    """
    index = {slot: i for i, slot in enumerate(slots)}
    n = len(slots)
    before = np.zeros((n, n), dtype=bool)  # before[i, j]: the graph puts i left of j
    for e in position_graph:
        if e["relation"] != "left_of":
            raise ValueError(f"position graph: relation {e['relation']!r} is not left_of")
        before[index[e["source"]], index[e["target"]]] = True
    for k in range(n):  # transitive closure (n <= 5)
        before |= before[:, [k]] & before[[k], :]
    x = face_centres_x(boxes)
    found = np.flatnonzero(assignment.found)
    out = np.zeros(n, dtype=bool)
    for i in found:
        xi = x[assignment.face[i]]
        out[i] = all(
            (not before[i, j] or xi < x[assignment.face[j]]) and (not before[j, i] or x[assignment.face[j]] < xi)
            for j in found
            if j != i
        )
    return out


def id_arranged(
    assignment: WhoBecameWhom, where: Any, without_face: int = 0, bound: Any | None = None
) -> tuple[float, np.ndarray]:
    """(the image's value, the per-person values): identity credited only to a person in its place.

    Per person with a reference face: its matched cosine (negative as 0) when it is found and
    ``where`` (:func:`placed`) holds, and, given ``bound`` (a per-person bool, e.g. a judge confirming
    its own item), that holds too; else 0. A reference without a face is NaN per person and left out.
    The image's value sums the persons over ``max(n, k - without_face)`` as :func:`id_sim_strict`
    does, so a crowd of faces cannot raise it; NaN when no reference has a face.

    Every factor is a per-person 0 or 1, so ``id_arranged <= id_sim_strict`` on every image, equal when
    every person is found in its place; a person missing, unrecognisable, out of place or (with
    ``bound``) holding the wrong item loses its whole share.
    """
    keep = assignment.found & np.asarray(where, dtype=bool)
    if bound is not None:
        keep &= np.asarray(bound, dtype=bool)
    cosines = np.clip(np.nan_to_num(assignment.cosine, nan=0.0), 0.0, None)
    per = np.where(assignment.has_reference, np.where(keep, cosines, 0.0), np.nan)
    n = int(assignment.has_reference.sum())
    if n == 0:
        return float("nan"), per
    return float(np.nansum(per) / max(n, assignment.n_faces - without_face)), per
