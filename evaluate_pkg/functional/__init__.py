"""Pure metric math over precomputed features (numpy/scipy; no models, no torch).

The feature store encodes each image once per encoder; everything here is cheap math over those
embeddings, patch tokens and masks. Values are raw: a cosine stays a cosine in [-1, 1], never x100,
never clamped; display conventions are separate, named helpers. The ``evaluate`` modules in
``evaluate_pkg/metrics/`` are thin wrappers over these functions.

=========================  =====================================================================
metric                     functions
=========================  =====================================================================
cosine                     :func:`l2_normalize`, :func:`cosine`, :func:`cosine_matrix`
CLIP-T / CLIP-I            :func:`clip_t`, :func:`clip_i`, :func:`clipscore_torchmetrics_convention`,
                           :func:`torchmetrics_clipscore_of_mean`
DINO-Sim                   :func:`dino_sim`
SCR@tau (paper 002)        :func:`subject_collapse_rate` (whole image), :func:`instance_collapse_rate`
matching                   :func:`hungarian_match`
ID-Sim                     :func:`id_sim`, :func:`id_sim_with_faceless`
who became whom            :func:`who_became_whom`, :func:`layout_score`, :func:`id_sim_strict`,
                           :func:`placed`, :func:`id_arranged`
grounded binding           :func:`person_for_face`, :func:`body_from_face`, :func:`assign_items`,
                           :func:`bound_right`
BG-Sim                     :func:`mask_to_patch_grid`, :func:`pooled_masked_features`, :func:`bg_sim`,
                           :func:`background_patches`
Aesth.                     :func:`aesthetic_score` (LAION aesthetic predictor v2 head)
count accuracy             :func:`count_correct`, :func:`count_accuracy`
retrieval P@k / R@k        :func:`precision_recall_at_k`, :func:`retrieval_precision_recall`,
                           :func:`random_expected_precision_recall` (a random ranker's mean)
confidence intervals       :func:`bootstrap_ci` (prompts resampled: :func:`cluster_bootstrap_weights`,
                           :func:`percentile_interval`)
agreement with people      :func:`pearson`, :func:`spearman`, :func:`kendall_tau_b`, :func:`weighted_kappa`,
                           :func:`ordinal_alpha`, each with a bootstrap CI: :func:`item_correlation`,
                           :func:`rank_correlation`, :func:`system_correlation`, :func:`categorical_agreement`
=========================  =====================================================================
"""

from .aesthetic import AESTHETIC_V2_LAYERS, aesthetic_score
from .agreement import (
    Correlation,
    categorical_agreement,
    item_correlation,
    kendall_tau_b,
    ordinal_alpha,
    pearson,
    rank_correlation,
    spearman,
    system_correlation,
    weighted_kappa,
)
from .background import PATCH_THRESHOLD, background_patches, bg_sim, mask_to_patch_grid, pooled_masked_features
from .binding import assign_items, body_from_face, bound_right, person_for_face
from .bootstrap import CI_METHOD, BootstrapCI, bootstrap_ci, cluster_bootstrap_weights, percentile_interval
from .collapse import SCR_TAUS, instance_collapse_rate, subject_collapse_rate
from .counting import count_accuracy, count_correct
from .faces import IdSim, id_sim, id_sim_with_faceless
from .identity import WhoBecameWhom, id_arranged, id_sim_strict, layout_score, placed, who_became_whom
from .matching import UNMATCHED_SIMILARITY, Match, hungarian_match
from .retrieval import precision_recall_at_k, random_expected_precision_recall, retrieval_precision_recall
from .similarity import (
    DinoSim,
    clip_i,
    clip_t,
    clipscore_torchmetrics_convention,
    cosine,
    cosine_matrix,
    dino_sim,
    l2_normalize,
    torchmetrics_clipscore_of_mean,
)

__all__ = [
    "AESTHETIC_V2_LAYERS",
    "CI_METHOD",
    "PATCH_THRESHOLD",
    "SCR_TAUS",
    "UNMATCHED_SIMILARITY",
    "BootstrapCI",
    "Correlation",
    "DinoSim",
    "IdSim",
    "Match",
    "WhoBecameWhom",
    "aesthetic_score",
    "assign_items",
    "background_patches",
    "bg_sim",
    "body_from_face",
    "bootstrap_ci",
    "bound_right",
    "categorical_agreement",
    "clip_i",
    "clip_t",
    "clipscore_torchmetrics_convention",
    "cluster_bootstrap_weights",
    "cosine",
    "cosine_matrix",
    "count_accuracy",
    "count_correct",
    "dino_sim",
    "hungarian_match",
    "id_arranged",
    "id_sim",
    "id_sim_strict",
    "id_sim_with_faceless",
    "instance_collapse_rate",
    "item_correlation",
    "kendall_tau_b",
    "l2_normalize",
    "layout_score",
    "mask_to_patch_grid",
    "ordinal_alpha",
    "pearson",
    "percentile_interval",
    "person_for_face",
    "placed",
    "pooled_masked_features",
    "precision_recall_at_k",
    "random_expected_precision_recall",
    "rank_correlation",
    "retrieval_precision_recall",
    "spearman",
    "subject_collapse_rate",
    "system_correlation",
    "torchmetrics_clipscore_of_mean",
    "weighted_kappa",
    "who_became_whom",
]
