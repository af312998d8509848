"""Adapters the generation tests run in child processes (``--model standin_adapters:...`` with this folder on
PYTHONPATH): deterministic images from the request alone, and one that stops to be killed."""

from __future__ import annotations

import sys

import numpy as np
from PIL import Image


def tinted(request):
    """The seed's tint with the references' mean colours in stripes: depends on the request only."""
    rng = np.random.default_rng(request.seed)
    canvas = Image.new("RGB", (request.resolution, request.resolution), tuple(int(v) for v in rng.integers(0, 256, 3)))
    for k, image in enumerate(request.images):
        colour = tuple(int(v) for v in np.asarray(image.convert("RGB").resize((8, 8))).reshape(-1, 3).mean(axis=0))
        canvas.paste(colour, (k * 4, 0, k * 4 + 4, request.resolution))
    return canvas


class StopsAfterThree:
    """Draws three images, then says so on stderr and waits on stdin (the test kills it there: no sleep)."""

    def __init__(self, options):
        self.calls = 0

    def __call__(self, request):
        self.calls += 1
        if self.calls > 3:
            print("STOPPED-AFTER-3", file=sys.stderr, flush=True)
            sys.stdin.read()
        return tinted(request)
