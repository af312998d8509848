"""The names of the baselines (:mod:`.baselines`) and the retrieval rankers (:mod:`.retrieval`).

No imports: the command line offers them as choices without loading the image stack.
"""

BASELINES = (
    "collage",
    "swap",
    "impostor",
    "clone",
    "background",
    "blank",
    "noise",
    "copy",
    "crossed",
    "crowd",
    "mannequin",
    "stranger",
    "stranger-clone",
)
RANKERS = ("retrieval-clip", "retrieval-metadata")
