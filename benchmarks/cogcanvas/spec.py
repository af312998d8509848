"""CogCanvas: multi-subject, reference-based composition (paper 001).

Each prompt holds 2-5 persons; each person is bound to one object or fashion item through an afforded
interaction; one background scene; an explicit left-to-right layout; pairwise person-person
interactions. The interaction and position graphs are typed edge lists whose nodes are person slots
("A".."E") and item entity ids; the yes/no questions of Attr-VQA are derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasets import Features, Image, List, Value

from idbench.builders.spec import (
    JUDGE_ROLE,
    BenchmarkSpec,
    ConfigSpec,
    DistinctNames,
    MetricSpec,
    Resampling,
    SourceColumn,
    SubjectBreakdown,
    UnitFactor,
    copy_floored,
)

NAME = "cogcanvas"
KINDS = ("person", "object", "fashion", "background")
ITEM_KINDS = ("object", "fashion")
GROUP_SIZES = (2, 3, 4, 5)
# The paper's 1,361 prompts by group size (41.0 / 28.1 / 16.5 / 14.4 %).
PAPER_GROUP_COUNTS = {2: 558, 3: 382, 4: 225, 5: 196}
PAPER_PROMPTS = sum(PAPER_GROUP_COUNTS.values())
PAPER_IDENTITIES = 100
SEEDS = (0,)
SLOTS = ("A", "B", "C", "D", "E")
# The retrieval task's cut-offs (paper 001, section 3.5); the metric names come from them.
RETRIEVAL_KS = (1, 3, 5)
# The retrieval task's slot groups, scored apart: metric-name prefix -> the slot kinds (the retrieval
# config's ``kind``) it covers. The paper's task is the identity slots, the headline ``retrieval_p@k`` /
# ``retrieval_r@k``; item and background slots are reported under their own names beside it.
RETRIEVAL_GROUPS = {
    "retrieval": ("person",),
    "retrieval_item": ("object", "fashion"),
    "retrieval_background": ("background",),
}
RETRIEVAL_GROUP_WORDS = {
    "retrieval": "identity (person)",
    "retrieval_item": "item (object, fashion)",
    "retrieval_background": "background",
}
# Suffix of the diagnostic that stores beside each retrieval metric what a random ordering of the same
# candidates scores on average (exact, per slot then per prompt): the chance level to read it against.
RANDOM_SUFFIX = ".random"

AGE_GROUPS = ("child", "young_adult", "adult", "senior")
SIZE_CATEGORIES = ("small", "medium", "large")
SCENE_TYPES = ("landmark", "landscape", "cityscape", "indoor")
STRENGTHS = ("close", "medium", "loose")


@dataclass(frozen=True)
class Relation:
    """How a relation reads in a prompt and in a yes/no question."""

    strength: str  # close contact -> loose, the sampler's second diversity axis
    present: str  # "holds", used as "<person> holds <item>"
    progressive: str  # "holding", used in questions


# Person -> item interactions an item may afford (the manifest's `interactions` column).
ITEM_INTERACTIONS = {
    "hold": Relation("close", "holds", "holding"),
    "wear": Relation("close", "wears", "wearing"),
    "carry": Relation("close", "carries", "carrying"),
    "sit_on": Relation("close", "sits on", "sitting on"),
    "lean_on": Relation("medium", "leans on", "leaning on"),
    "use": Relation("medium", "uses", "using"),
    "point_at": Relation("loose", "points at", "pointing at"),
    "look_at": Relation("loose", "looks at", "looking at"),
    "stand_beside": Relation("loose", "stands beside", "standing beside"),
}

# Person <-> person interactions (symmetric): "<A> and <B> hold hands".
PERSON_INTERACTIONS = {
    "holds_hands_with": Relation("close", "hold hands", "holding hands"),
    "hugs": Relation("close", "hug", "hugging each other"),
    "shakes_hands_with": Relation("close", "shake hands", "shaking hands"),
    "high_fives": Relation("medium", "high-five", "giving each other a high five"),
    "talks_to": Relation("loose", "talk to each other", "talking to each other"),
    "faces": Relation("loose", "face each other", "facing each other"),
}

# Where the display convention of Aesth. comes from (evidence: docs/display-conventions.md): the paper
# does not state it; it is inferred from the range of its Table 2. Cosines (ID-Sim, DINO-Sim, CLIP-T,
# BG-Sim) are shown raw, as every benchmark shows them: one scale per metric across the suite (Table 2's
# CLIP-T reads as 250 x cosine, the CLIPScore scale; its ID-Sim and DINO-Sim fit 100 x cosine).
AESTHETIC_SOURCE = "inferred from CogCanvas Table 2: Aesth. 36.54-56.40 = LAION scores 3.65-5.64"

POSITION_RELATIONS = ("left_of",)
QUESTION_KINDS = ("binding", "interaction", "position")

_EDGE = {"source": Value("string"), "relation": Value("string"), "target": Value("string")}

REFERENCES = Features(
    {
        "ref_id": Value("string"),
        "entity_id": Value("string"),
        "kind": Value("string"),
        "name": Value("string"),
        "image": Image(),
        "description": Value("string"),
        # person metadata (null for other kinds)
        "age_group": Value("string"),
        "gender": Value("string"),
        "ethnicity": Value("string"),
        # object / fashion metadata
        "size_category": Value("string"),
        "interactions": List(Value("string")),
        # background metadata
        "scene_type": Value("string"),
        "landmark": Value("string"),
        "source": Value("string"),
        "license": Value("string"),
        "attribution": Value("string"),
    }
)

PROMPTS = Features(
    {
        "prompt_id": Value("string"),
        "n_persons": Value("int32"),
        "persons": List(
            {
                "slot": Value("string"),
                "entity_id": Value("string"),
                "ref_id": Value("string"),
                "item_entity_id": Value("string"),
                "item_ref_id": Value("string"),
                "item_kind": Value("string"),
                "item_size": Value("string"),
                "interaction": Value("string"),
                "interaction_strength": Value("string"),
            }
        ),
        "background_entity_id": Value("string"),
        "background_ref_id": Value("string"),
        "interaction_graph": List(_EDGE),
        "position_graph": List(_EDGE),
        # person slots from left to right
        "layout": List(Value("string")),
        "prompt": Value("string"),
        "questions": List(
            {
                "question_id": Value("string"),
                "kind": Value("string"),
                "question": Value("string"),
                "answer": Value("string"),
                # the id of the "yes" question a "no" question negates; "" for a "yes" question
                "negates": Value("string"),
                **_EDGE,
            }
        ),
    }
)

RETRIEVAL = Features(
    {
        "prompt_id": Value("string"),
        # "A" for person A, "A.item" for the item bound to person A, "background"
        "slot": Value("string"),
        "kind": Value("string"),
        "entity_id": Value("string"),
        "query": Value("string"),
        "ground_truth_ref_id": Value("string"),
        "candidate_ref_ids": List(Value("string")),
    }
)

_ID = r"[a-z0-9][a-z0-9_\-]*"

SPEC = BenchmarkSpec(
    name=NAME,
    title="CogCanvas",
    # 0.2: item crops padded to square, person count from its own query (NMS 0.6), BG-Sim masks both images; clip_t_whole and clip_t.truncated; intervals resample prompts; Attr-VQA over the ground-truth facts, with paired variants
    # 0.3: who became whom (found / missing / swapped / cloned / extra), id_sim_strict (the default ranking), layout and binding grounded on the located identities, items found for DINO-Sim; retrieval headline over identity slots with several candidates (items and background apart), the random ranker's expectation beside each
    # 0.4: attr_vqa_itt (judge failures count as not confirmed; it replaces attr_vqa in the ranking), judge controls and card
    # 0.5: id_arranged, the default ranking: a person's cosine counts only when found where the position graph puts it (id_sim_strict ranked a swapped, crossed or shifted row within 0.03 of the collage); id_arranged_vqa also needs the judge's paired binding
    # 0.6: every shown judged column is intent to treat or the paper's beside its twin (issue 28): igc and attr_vqa.binding (the paper's) beside igc_itt and attr_vqa.binding_itt (the T2I ranking); attr_vqa_paired, igc_paired, binding_grounded_vqa and binding_grounded_vqa_paired (not the paper's) count a failed answer as not confirmed under their own names
    # 0.7: a copied image earns nothing (issue 39): every ranked column of the image tracks moves to its copy-floored twin (id_arranged_floored, ..., count_accuracy_floored), where an image the copy check flagged scores the floor (0 for a share or a score with negative cosines as 0, -1 for a raw cosine); the metrics themselves are unchanged, shown beside their twins, never ranked
    suite_version="0.7",
    summary=(
        "Multi-subject reference-based generation: 2-5 persons, each bound to an object or fashion "
        "item, in a given background, with interaction and position graphs and yes/no questions "
        "derived from them."
    ),
    paper="CogCanvas: A Benchmark for Evaluating Multi-Subject Reference-Based Image Generation",
    citation=(
        "@misc{cogcanvas,\n"
        "  title = {CogCanvas: A Benchmark for Evaluating Multi-Subject Reference-Based Image Generation}\n"
        "}"
    ),
    configs={
        "references": ConfigSpec(
            "references",
            REFERENCES,
            "Reference images of persons, objects, fashion items and backgrounds with per-kind metadata.",
            ("ref_id",),
        ),
        "prompts": ConfigSpec(
            "prompts",
            PROMPTS,
            "Compositional prompts with bindings, layout, interaction and position graphs, yes/no questions.",
            ("prompt_id",),
        ),
        "retrieval": ConfigSpec(
            "retrieval",
            RETRIEVAL,
            "Reference retrieval auxiliary task: for every slot of every prompt, the ground-truth reference "
            "among the entity's candidates.",
            ("prompt_id", "slot"),
        ),
    },
    source_columns=(
        SourceColumn("ref_id", "unique id of this reference image", pattern=_ID),
        SourceColumn("entity_id", "the identity, object, item or scene it shows; shared by its images", pattern=_ID),
        SourceColumn("kind", "entity kind", choices=KINDS),
        SourceColumn("file", "image path, relative to the manifest's folder"),
        SourceColumn("name", "how prompts name the entity, e.g. 'the red handbag'"),
        SourceColumn("description", "what this image shows; grounds the retrieval task"),
        SourceColumn("age_group", "person: age group", required=False, choices=AGE_GROUPS),
        SourceColumn("gender", "person: gender as annotated", required=False),
        SourceColumn("ethnicity", "person: ethnicity as annotated", required=False),
        SourceColumn("size_category", "object/fashion: size", required=False, choices=SIZE_CATEGORIES),
        SourceColumn(
            "interactions",
            "object/fashion: afforded interactions, ';'-separated",
            required=False,
            choices=tuple(ITEM_INTERACTIONS),
            is_list=True,
        ),
        SourceColumn("scene_type", "background: scene type", required=False, choices=SCENE_TYPES),
        SourceColumn("landmark", "background: landmark name, if any", required=False),
        SourceColumn("source", "where the image comes from"),
        SourceColumn("license", "the image's license"),
        SourceColumn("attribution", "who to credit", required=False),
    ),
    breakdowns=(("n_persons",),),
    metric_suite=(
        *copy_floored(
            MetricSpec(
                "id_sim",
                "ArcFace cosine of aligned faces, Hungarian-matched; unmatched reference = 0, reference without a face = NaN (counted)",
                roles=("face",),
                missing_evidence="id_sim.reference_without_face",
            ),
            floor=-1.0,  # matched cosines are raw and may be negative: a cosine's bound
        ),
        *copy_floored(
            MetricSpec(
                "id_sim_strict",
                "not in the paper: ID-Sim that extra faces cannot raise, matched cosines (negatives as 0) over max(N, faces found)",
                roles=("face",),
                missing_evidence="id_sim.reference_without_face",
            ),
            floor=0.0,  # negative cosines count 0: its bound
        ),
        *copy_floored(
            MetricSpec(
                "id_arranged",
                "not in the paper, the default ranking through its copy-floored twin: per person its matched face cosine if it is found (recognised as itself) "
                "and stands where the position graph puts it among the found persons, else 0; summed over max(N, faces found) "
                "as id_sim_strict, so a right face in the wrong place scores nothing",
                roles=("face",),
                missing_evidence="id_arranged.not_located",
            ),
            floor=0.0,  # negative cosines count 0: its bound
        ),
        *copy_floored(
            MetricSpec(
                "id_arranged_vqa",
                "not in the paper: id_arranged with a third factor per person, the judge confirming the located person (marked in "
                "red) with its own item and denying another person's; a failed answer counts 0 (id_arranged_vqa.judge_failed)",
                roles=(JUDGE_ROLE, "face", "detector"),
                missing_evidence="id_arranged.not_located",
            ),
            floor=0.0,  # negative cosines count 0: its bound
        ),
        MetricSpec(
            "layout_grounded",
            "not in the paper: share of the position graph's left-of edges that hold between the located identities "
            "(faces recognised as each person); a person not found fails its edges",
            display="percent",
            roles=("face",),
            missing_evidence="layout_grounded.not_located",
        ),
        MetricSpec(
            "binding_grounded",
            "not in the paper: share of the persons found with their own item (item boxes given to the located person's box, "
            "the crop most like its own item reference among the prompt's items, DINOv2)",
            display="percent",
            roles=("face", "detector", "dinov2"),
            missing_evidence="binding_grounded.not_located",
        ),
        MetricSpec(
            "binding_grounded_vqa",
            "not in the paper, intent to treat: the judge confirms the located person (marked in red) does the prompt's thing "
            "with its own item; a person not found, or whose answer failed (counted in binding_grounded_vqa.failure_rate), "
            "is not confirmed",
            display="percent",
            roles=(JUDGE_ROLE, "face", "detector"),
            missing_evidence="binding_grounded_vqa.not_located",
            defined_in="0.6",  # until 0.5 a failed answer was left out (NaN)
        ),
        MetricSpec(
            "binding_grounded_vqa_paired",
            "not in the paper, intent to treat: binding_grounded_vqa credited only when the judge also denies the located person "
            "has another person's item; a failed answer is not confirmed",
            display="percent",
            roles=(JUDGE_ROLE, "face", "detector"),
            missing_evidence="binding_grounded_vqa.not_located",
            defined_in="0.6",  # until 0.5 a failed answer was left out (NaN)
        ),
        *copy_floored(
            MetricSpec(
                "dino_sim",
                "DINOv2 cosine of detected object/fashion crops vs their references",
                roles=("detector", "dinov2"),
            ),
            floor=-1.0,  # a raw cosine's bound
        ),
        *copy_floored(
            MetricSpec(
                "clip_t",
                "CLIP ViT-L/14 cosine between prompt and generation, the prompt cut at 77 tokens as in the paper",
                roles=("clip",),
            ),
            floor=-1.0,  # a raw cosine's bound
        ),
        MetricSpec(
            "clip_t_whole",
            "not in the paper: mean CLIP cosine over sentence chunks of at most 77 tokens, so the whole prompt is read",
            roles=("clip",),
        ),
        MetricSpec(
            "bg_sim",
            "DINOv3 background patch tokens (foreground masked) vs the reference background",
            roles=("detector", "segmenter", "dinov3"),
        ),
        MetricSpec(
            "aesthetic",
            "LAION aesthetic predictor v2 on the L2-normalised CLIP ViT-L/14 embedding",
            display="x10",
            roles=("clip", "aesthetic"),
            display_source=AESTHETIC_SOURCE,
        ),
        MetricSpec(
            "attr_vqa",
            "the paper's Attr-VQA: share of the ground-truth facts (binding, interaction, position) an MLLM confirms, "
            "over the facts it answered (a failed answer is left out, and counted in attr_vqa.failure_rate)",
            display="percent",
            roles=(JUDGE_ROLE,),
            display_source="CogCanvas Table 2: Attr-VQA 1.28-35.12, a mean accuracy in percent",
            itt_twin="attr_vqa_itt",
        ),
        *copy_floored(
            MetricSpec(
                "attr_vqa_itt",
                "not in the paper: Attr-VQA over every fact asked, a fact whose judge answer failed (after the client's "
                "retries) counted as not confirmed, so judge failures cannot raise a score; the ranked Attr-VQA (through its copy-floored twin)",
                display="percent",
                roles=(JUDGE_ROLE,),
            ),
            floor=0.0,  # a share's bound
        ),
        MetricSpec(
            "igc",
            "the paper's interaction graph consistency (IGC): share of the interaction and position facts an MLLM confirms, "
            "over the facts it answered (a failed answer is left out, and counted in igc.failure_rate)",
            display="percent",
            roles=(JUDGE_ROLE,),
            itt_twin="igc_itt",
        ),
        MetricSpec(
            "igc_itt",
            "not in the paper: IGC over every interaction and position fact asked, a failed answer counted as not confirmed",
            display="percent",
            roles=(JUDGE_ROLE,),
        ),
        MetricSpec(
            "attr_vqa_paired",
            "yes-bias-robust Attr-VQA (not in the paper), intent to treat: a fact counts when confirmed and its paired "
            "negative denied; a fact whose answer (or its negative's) failed is not confirmed",
            display="percent",
            roles=(JUDGE_ROLE,),
            defined_in="0.6",  # until 0.5 a failed pair was left out
        ),
        MetricSpec(
            "igc_paired",
            "yes-bias-robust IGC (not in the paper), intent to treat: interaction and position facts confirmed with their "
            "negatives denied; a failed pair is not confirmed",
            display="percent",
            roles=(JUDGE_ROLE,),
            defined_in="0.6",  # until 0.5 a failed pair was left out
        ),
        MetricSpec(
            "attr_vqa.binding",
            "Attr-VQA on the binding facts only (which person holds or wears which item), over the answered ones; the "
            "paper's T2I Attr-VQA",
            display="percent",
            roles=(JUDGE_ROLE,),
            tasks=("reference", "text-to-image"),
            itt_twin="attr_vqa.binding_itt",
        ),
        *copy_floored(
            MetricSpec(
                "attr_vqa.binding_itt",
                "not in the paper: attr_vqa.binding over every binding fact asked, a failed answer counted as not confirmed; "
                "the T2I task's ranking through its copy-floored twin",
                display="percent",
                roles=(JUDGE_ROLE,),
                tasks=("reference", "text-to-image"),
            ),
            floor=0.0,  # a share's bound
        ),
        *copy_floored(
            MetricSpec(
                "count_accuracy",
                "detected persons == N (the T2I task's count accuracy)",
                display="percent",
                roles=("detector",),
                tasks=("reference", "text-to-image"),
            ),
            floor=0.0,  # a share's bound
        ),
        # The retrieval task: a ranking of each slot's candidate references (no images), per slot then
        # per prompt (the mean over its slots of one group), each group named apart. A slot with one
        # candidate cannot be ranked wrong and is left out (counted). P@k keeps k as its denominator:
        # with one relevant image per slot min(1, k)/k = 1/k is its ceiling.
        *(
            MetricSpec(
                f"{group}_{m}@{k}",
                f"retrieval task: {what}@{k} of the ranked candidates, mean over a prompt's "
                f"{RETRIEVAL_GROUP_WORDS[group]} slots with two or more candidates",
                display="percent",
                tasks=("retrieval",),
                chance=f"{group}_{m}@{k}{RANDOM_SUFFIX}",
            )
            for group in RETRIEVAL_GROUPS
            for m, what in (("p", "precision"), ("r", "recall"))
            for k in RETRIEVAL_KS
        ),
    ),
    seeds=SEEDS,
    # The first one a track's results computed ranks it: the reference task by id_arranged, identity
    # credited only to a person in its place and padding-proof like id_sim_strict (the paper's id_sim
    # ignores surplus faces, so a picture of every identity of the pool would top it; id_sim_strict ranks
    # the right faces in the wrong places within 0.03 of the collage; docs/identity-grounding.md); its
    # judged twin id_arranged_vqa is a headline beside it (every run computes id_arranged first, so it
    # never takes the default); the T2I task by binding Attr-VQA by intent to treat (with a judge) or count accuracy,
    # the retrieval task by the identity slots' P@1: whether the one reference a ranker would pick is
    # relevant, the paper's "select the best-matching reference". Its ceiling is 1 however many
    # references are relevant, where R@1's is 1/|relevant|; with one relevant image (today's data) the
    # two are equal.
    # Every ranked column of an image track is a copy-floored twin (issue 39): an image the copy check
    # flagged scores the floor there, so copying a few images cannot lift it; the retrieval task submits
    # no images.
    ranking=(
        "id_arranged_floored",
        "id_arranged_vqa_floored",
        "id_sim_strict_floored",
        "id_sim_floored",
        "dino_sim_floored",
        "attr_vqa_itt_floored",
        "clip_t_floored",
        "attr_vqa.binding_itt_floored",
        "count_accuracy_floored",
        "retrieval_p@1",
    ),
    limitations=(
        "Persons are identified by reference images; identities that a generator saw in pre-training can "
        "score well through memorization.",
        "Questions and prompts are written from templates over the graphs; the MLLM judge that answers "
        "them has blind spots of its own.",
    ),
    recipe="idbench.benchmarks.cogcanvas.recipe:recipe",
    unique_source_column="ref_id",
    # A prompt names 2-5 persons and their items side by side, and its one background beside them; two
    # backgrounds never meet. The images of one entity share its name.
    distinct_names=DistinctNames("name", entity_column="entity_id", kind_column="kind", alone_kinds=("background",)),
    reference_config="references",
    reference_id="ref_id",
    suite="idbench.benchmarks.cogcanvas.suite",
    baselines="idbench.benchmarks.cogcanvas.suite:BASELINES",
    # The paper names where its dataset and evaluation code were released (the latter an anonymised link).
    links=(
        ("dataset (as the paper gives it)", "https://huggingface.co/datasets/multimedia-synergy-lab/CogCanvas"),
        ("evaluation code (as the paper gives it, an anonymised link)", "https://anonymous.4open.science/r/cogcanvas"),
    ),
    controls="idbench.benchmarks.cogcanvas.controls:CONTROLS",
    rankings="idbench.benchmarks.cogcanvas.retrieval",
    group_size_axis="n_persons",
    group_sizes=GROUP_SIZES,
    # Every finding of the paper is per group size (Table 2 by N, N = 2 first), and N = 2 holds 41 % of
    # its prompts: a pooled mean mostly ranks the easiest setting. So the leaderboard ranks within one
    # N by default, N = 2 first, and offers the pooled mean as a choice labelled as such.
    default_group_size=2,
    # The slices by the references' metadata that section 3.4 promises. Person metrics (ID-Sim per
    # person, rows "A".."E") by the person's annotated age group, gender and ethnicity; item metrics
    # (DINO-Sim per item, rows "A.item") by the item's size; both by how close the person-item
    # interaction is (a hug or a held cup occludes a face and an item); whole-image metrics (BG-Sim
    # above all) by the background's scene type.
    slot_records="persons",
    subject_breakdowns=(
        SubjectBreakdown("age_group", ("slot",), "age_group", via="ref_id", description="the person's age group"),
        SubjectBreakdown("gender", ("slot",), "gender", via="ref_id", description="the person's gender as annotated"),
        SubjectBreakdown(
            "ethnicity", ("slot",), "ethnicity", via="ref_id", description="the person's ethnicity as annotated"
        ),
        SubjectBreakdown(
            "item_size", ("item",), "size_category", via="item_ref_id", description="the item's size category"
        ),
        SubjectBreakdown(
            "interaction_strength",
            ("slot", "item"),
            "interaction_strength",
            description="how close the person-item interaction is, close contact to loose",
        ),
        SubjectBreakdown(
            "scene_type", ("image",), "scene_type", via="background_ref_id", description="the background's scene type"
        ),
    ),
    card_template="idbench.benchmarks.cogcanvas:cogcanvas.md.j2",
    page_order=2,
    # Identities, items and backgrounds are reused across prompts (by entity: one identity's several
    # reference images are one unit): each crossed with the prompts (multi-way bootstrap; docs/statistics.md).
    resampling=Resampling(
        (
            UnitFactor("identity", "persons", key="entity_id", description="the persons' identities"),
            UnitFactor("item", "persons", key="item_entity_id", description="the items bound to the persons"),
            UnitFactor("background", "background_entity_id", description="the background scene"),
        )
    ),
)
