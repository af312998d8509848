"""What the metric modules share: citations and the summary of per-sample values."""

from __future__ import annotations

from typing import Any

import numpy as np

CITATION_CLIP = """\
@inproceedings{radford2021clip,
  title     = {Learning Transferable Visual Models From Natural Language Supervision},
  author    = {Radford, Alec and others},
  booktitle = {International Conference on Machine Learning (ICML)},
  year      = {2021}
}
"""

CITATION_CLIPSCORE = """\
@inproceedings{hessel2021clipscore,
  title     = {{CLIPScore}: A Reference-free Evaluation Metric for Image Captioning},
  author    = {Hessel, Jack and Holtzman, Ari and Forbes, Maxwell and Le Bras, Ronan and Choi, Yejin},
  booktitle = {Empirical Methods in Natural Language Processing (EMNLP)},
  year      = {2021}
}
"""

CITATION_DINOV2 = """\
@article{oquab2024dinov2,
  title   = {{DINOv2}: Learning Robust Visual Features without Supervision},
  author  = {Oquab, Maxime and others},
  journal = {Transactions on Machine Learning Research},
  year    = {2024}
}
"""

CITATION_DINOV3 = """\
@misc{simeoni2025dinov3,
  title  = {{DINOv3}},
  author = {Sim{\\'e}oni, Oriane and others},
  year   = {2025}
}
"""

CITATION_ARCFACE = """\
@inproceedings{deng2019arcface,
  title     = {{ArcFace}: Additive Angular Margin Loss for Deep Face Recognition},
  author    = {Deng, Jiankang and Guo, Jia and Xue, Niannan and Zafeiriou, Stefanos},
  booktitle = {Computer Vision and Pattern Recognition (CVPR)},
  year      = {2019}
}
"""

CITATION_HUNGARIAN = """\
@article{kuhn1955hungarian,
  title   = {The Hungarian Method for the Assignment Problem},
  author  = {Kuhn, Harold W.},
  journal = {Naval Research Logistics Quarterly},
  volume  = {2},
  year    = {1955}
}
"""

CITATION_LAION_AESTHETIC = """\
@misc{schuhmann2022aesthetic,
  title  = {{LAION} Aesthetics Predictor (improved-aesthetic-predictor)},
  author = {Schuhmann, Christoph},
  year   = {2022},
  url    = {https://github.com/christophschuhmann/improved-aesthetic-predictor}
}
"""

# The two benchmark papers are cited by title only: their author lists are not in our copies.
CITATION_COGCANVAS = """\
@misc{cogcanvas,
  title = {{CogCanvas}: A Benchmark for Evaluating Multi-Subject Reference-Based Image Generation}
}
"""

CITATION_IDENTITY_COLLAPSE = """\
@misc{identitycollapse,
  title = {When Identities Collapse: A Stress-Test Benchmark for Multi-Subject Personalization}
}
"""


def floats(values: Any) -> list[float]:
    """Per-sample values as plain Python floats (NaN kept), for results that are serialised."""
    return [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def mean_of_defined(values: Any) -> tuple[float, int]:
    """``(mean over non-NaN values, number of NaN values)``; the mean is NaN when none is defined.

    NaN marks a sample where the metric is undefined (e.g. BG-Sim of an all-foreground image): it
    is counted and reported, never replaced by a number.
    """
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    defined = arr[~np.isnan(arr)]
    return (float(defined.mean()) if defined.size else float("nan")), int(arr.size - defined.size)


def collapse_taus(module: str, config_name: str, taus: Any | None, default: tuple[float, ...]) -> tuple[float, ...]:
    """Thresholds for a collapse-rate module: the ``taus`` keyword, else the config name, else ``default``.

    The config name is ``"default"`` (all default thresholds) or one number, e.g. ``"0.5"``.
    """
    if taus is not None:
        return tuple(float(t) for t in np.atleast_1d(taus))
    if config_name == "default":
        return default
    try:
        return (float(config_name),)
    except ValueError:
        raise ValueError(
            f"{module}: config name {config_name!r} is not a threshold; use 'default' "
            f"({', '.join(f'{t:g}' for t in default)}) or one number such as '0.5'"
        ) from None
