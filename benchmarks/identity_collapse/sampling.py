"""The Identity Collapse prompt grid: 5 subject levels x 3 scene types x 5 prompts = 75 prompts.

Ids follow the paper's layout: the first 15 prompts hold 2 subjects (5 neutral, 5 occlusion,
5 interaction), the next 15 hold 4, and so on up to 10. Every prompt names distinct subjects; across the
grid, subjects are used as evenly as the pool allows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from idbench.benchmarks.identity_collapse.spec import PROMPTS_PER_CELL, SCENES, SEEDS, SUBJECT_LEVELS

# One setting per prompt of a cell, so the 5 prompts of a cell differ in more than their subjects.
SETTINGS = (
    "in a sunlit park",
    "on a busy city sidewalk",
    "in a cozy living room",
    "on a sandy beach at sunset",
    "in a snowy field",
)

# Physical-contact verbs that read correctly for people and animals alike.
CONTACT_PHRASES = (
    "{a} hugging {b}",
    "{a} leaning against {b}",
    "{a} pressed cheek to cheek with {b}",
    "{a} cuddled up against {b}",
    "{a} holding on to {b}",
)


def join_names(names: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def write_prompt(scene: str, names: Sequence[str], variant: int) -> str:
    """The prompt text for one cell variant; ``names`` in the order the subjects are mentioned.

    Occlusion and interaction pair the subjects in mention order (1 with 2, 3 with 4, ...): every
    subject level is even, so nobody is left without a partner.
    """
    setting = SETTINGS[variant % len(SETTINGS)]
    pairs = [(names[i], names[i + 1]) for i in range(0, len(names), 2)]
    if scene == "neutral":
        return (
            f"A photo of {join_names(names)} standing side by side {setting}, "
            f"spaced apart so that none of them overlap."
        )
    if scene == "occlusion":
        clauses = [f"{a} stands partly hidden behind {b}" for a, b in pairs]
        return f"A photo {setting} where {join_names(clauses)}."
    if scene == "interaction":
        clauses = [
            CONTACT_PHRASES[(variant + k) % len(CONTACT_PHRASES)].format(a=a, b=b) for k, (a, b) in enumerate(pairs)
        ]
        return f"A photo {setting} of {join_names(clauses)}."
    raise ValueError(f"unknown scene type {scene!r}; expected one of {', '.join(SCENES)}")


def sample_collapse_prompts(subjects: Sequence[Mapping], seed: int, per_cell: int = PROMPTS_PER_CELL) -> list[dict]:
    """The prompt grid over ``subjects`` (dicts with ``subject_id`` and ``name``): ``per_cell`` prompts in
    each (subject level, scene) cell, 75 with the paper's 5; ids run 01, 02, ... in the paper's order.

    Each prompt takes the least-used subjects so far (random tie-break), so usage counts across the grid
    differ by at most one; within a prompt no subject repeats.
    """
    needed = max(SUBJECT_LEVELS)
    if len(subjects) < needed:
        raise ValueError(f"identity-collapse needs at least {needed} distinct subjects, the source has {len(subjects)}")
    rng = random.Random(seed)
    pool = sorted(subjects, key=lambda s: s["subject_id"])
    usage = {s["subject_id"]: 0 for s in pool}
    prompts = []
    for level in SUBJECT_LEVELS:
        for scene in SCENES:
            for variant in range(per_cell):
                order = sorted(pool, key=lambda s: (usage[s["subject_id"]], rng.random()))
                chosen = order[:level]
                rng.shuffle(chosen)  # mention order (and so pairing) should not follow usage order
                for s in chosen:
                    usage[s["subject_id"]] += 1
                prompts.append(
                    {
                        "prompt_id": f"{len(prompts) + 1:02d}",
                        "n_subjects": level,
                        "scene": scene,
                        "subject_ids": [s["subject_id"] for s in chosen],
                        "prompt": write_prompt(scene, [s["name"] for s in chosen], variant),
                        "seeds": list(SEEDS),
                    }
                )
    return prompts
