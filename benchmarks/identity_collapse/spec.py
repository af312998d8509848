"""Identity Collapse: the stress test of multi-subject personalization (paper 002).

2, 4, 6, 8 or 10 subjects per prompt, in neutral / occlusion / interaction scenes, 5 prompts per
(subject level, scene) cell: 75 prompts with ids 01-75, 3 seeds each. Ids are laid out as in the paper:
01-15 hold 2 subjects (01-05 neutral, 06-10 occlusion, 11-15 interaction), 16-30 hold 4, and so on.
"""

from __future__ import annotations

from datasets import Features, Image, List, Value

from idbench.builders.spec import (
    BenchmarkSpec,
    ConfigSpec,
    DistinctNames,
    MetricSpec,
    Resampling,
    SourceColumn,
    UnitFactor,
    copy_floored,
)

NAME = "identity-collapse"
SUBJECT_LEVELS = (2, 4, 6, 8, 10)
SCENES = ("neutral", "occlusion", "interaction")
PROMPTS_PER_CELL = 5
SEEDS = (0, 1, 2)
SUBJECT_KINDS = ("human", "animal")
SCR_THRESHOLDS = (0.4, 0.5, 0.6)

SUBJECTS = Features(
    {
        "subject_id": Value("string"),
        "name": Value("string"),
        "image": Image(),
        "kind": Value("string"),
        "source": Value("string"),
        "license": Value("string"),
        "attribution": Value("string"),
    }
)

PROMPTS = Features(
    {
        "prompt_id": Value("string"),
        "n_subjects": Value("int32"),
        "scene": Value("string"),
        # In the order the prompt mentions them.
        "subject_ids": List(Value("string")),
        "prompt": Value("string"),
        "seeds": List(Value("int32")),
    }
)

RANKED_SCR = "scr@0.5"


def _scr(metric: MetricSpec) -> tuple[MetricSpec, ...]:
    """An SCR metric, with its copy-floored twin when it is the ranked one (floor 1: every reference
    collapsed, the worst share)."""
    return copy_floored(metric, floor=1.0) if metric.name == RANKED_SCR else (metric,)


SPEC = BenchmarkSpec(
    name=NAME,
    title="Identity Collapse",
    # 0.2: instance-SCR crops padded to square and deduplicated by NMS; clip_t_whole and clip_t.truncated; intervals resample prompts
    # 0.3: a copied image earns nothing (issue 39): dino_sim_floored, scr@0.5_floored and clip_t_floored, the ranking,
    # score every image the copy check flagged at the floor (-1, 1, -1); dino_sim, scr@0.5 and clip_t (the paper's)
    # are unchanged, shown beside their twins, never ranked
    suite_version="0.3",
    summary=(
        "A stress test for multi-subject personalization: 75 prompts with 2 to 10 reference subjects "
        "in neutral, occlusion and interaction scenes, 3 seeds each, scored by whole-image DINOv2 "
        "similarity and the Subject Collapse Rate."
    ),
    paper="When Identities Collapse: A Stress-Test Benchmark for Multi-Subject Personalization",
    citation=(
        "@misc{identitycollapse,\n"
        "  title = {When Identities Collapse: A Stress-Test Benchmark for Multi-Subject Personalization}\n"
        "}"
    ),
    configs={
        "subjects": ConfigSpec(
            "subjects",
            SUBJECTS,
            "The subject pool: one reference image per identity, ids S001, S002, ...",
            ("subject_id",),
        ),
        "prompts": ConfigSpec(
            "prompts",
            PROMPTS,
            "5 subject levels x 3 scene types x 5 prompts (75; a smaller build keeps the first k of each cell), "
            "each to be generated with seeds 0, 1, 2.",
            ("prompt_id",),
        ),
    },
    source_columns=(
        SourceColumn("file", "image path, relative to the manifest's folder"),
        SourceColumn("name", "a short noun phrase the prompts use for the subject, e.g. 'the tabby cat'"),
        SourceColumn("kind", "subject kind", choices=SUBJECT_KINDS),
        SourceColumn("source", "where the image comes from"),
        SourceColumn("license", "the image's license"),
        SourceColumn("attribution", "who to credit", required=False),
    ),
    breakdowns=(("n_subjects",), ("scene",), ("n_subjects", "scene")),
    metric_suite=(
        *copy_floored(
            MetricSpec(
                "clip_t",
                "CLIP ViT-L/14 cosine between prompt and generation, the prompt cut at 77 tokens as in the paper",
                roles=("clip",),
                display_source="Identity Collapse Sec. 4: CLIP-T 0.261-0.309, raw cosines",
            ),
            floor=-1.0,  # a raw cosine's bound
        ),
        MetricSpec(
            "clip_t_whole",
            "not in the paper: mean CLIP cosine over sentence chunks of at most 77 tokens, so the whole prompt is read",
            roles=("clip",),
        ),
        *copy_floored(
            MetricSpec(
                "dino_sim",
                "whole-image DINOv2 cosine, averaged over the N references",
                roles=("dinov2",),
                display_source="Identity Collapse Sec. 4: DINOv2 0.101-0.425, raw cosines",
            ),
            floor=-1.0,  # a raw cosine's bound
        ),
        *(
            metric
            for tau in SCR_THRESHOLDS
            for metric in _scr(
                MetricSpec(
                    f"scr@{tau}",
                    f"Subject Collapse Rate: share of references with whole-image DINOv2 cosine below {tau}",
                    higher_is_better=False,
                    display="percent",
                    roles=("dinov2",),
                    display_source="Identity Collapse Sec. 4: SCR in percent (48.9 % for MOSAIC at 2 subjects, tau 0.4)",
                )
            )
        ),
        *(
            MetricSpec(
                f"scr_instance@{tau}",
                f"instance-level SCR: per-subject crops, Hungarian-matched to references, cosine below {tau}",
                higher_is_better=False,
                display="percent",
                roles=("detector", "dinov2"),
            )
            for tau in SCR_THRESHOLDS
        ),
    ),
    seeds=SEEDS,
    # The paper's headline numbers, each by its copy-floored twin: a flagged image scores the floor, so
    # copying a few images (under the 5 % that marks a run) cannot lift a ranked column.
    ranking=("dino_sim_floored", "scr@0.5_floored", "clip_t_floored"),
    limitations=(
        "Scene types are defined by the prompt wording alone; how much occlusion or contact a model "
        "renders is left to the model.",
        "Whole-image DINOv2 similarity against single-subject references is a proxy: it mixes scene "
        "content into the score. The instance-level SCR variant is reported separately.",
    ),
    recipe="idbench.benchmarks.identity_collapse.recipe:recipe",
    unique_source_column=None,  # ids are assigned by the recipe, in manifest order
    distinct_names=DistinctNames("name"),  # up to 10 subjects share a prompt, named side by side
    reference_config="subjects",
    reference_id="subject_id",
    suite="idbench.benchmarks.identity_collapse.suite",
    baselines="idbench.benchmarks.identity_collapse.suite:BASELINES",
    group_size_axis="n_subjects",
    group_sizes=SUBJECT_LEVELS,
    # Ranked by the pooled mean by default (no default_group_size), unlike CogCanvas: the grid is
    # balanced (15 prompts at every level), so the pooled mean weighs 2, 4, 6, 8 and 10 subjects
    # equally and summarises the whole collapse curve the stress test exists to measure (paper 002's
    # finding is the fall from 2 to 10, Table 1 per level); no one level dominates it as N = 2 (41 %)
    # dominates CogCanvas's. The per-level ranking is one choice away, and the "vs N" plot shows each.
    default_group_size=None,
    card_template="idbench.benchmarks.identity_collapse:identity-collapse.md.j2",
    page_order=0,  # the stress test: the leaderboard's first page
    # Each prompt holds 2-10 of the subjects, and a subject returns in many prompts: subjects crossed
    # with prompts (multi-way bootstrap; docs/statistics.md).
    resampling=Resampling((UnitFactor("subject", "subject_ids", description="the subjects the prompt shows"),)),
)
