"""Distinct hand-made pictures for the copy check's pool tests and benchmarks (tests/scoring/
test_copy_index.py, bench/copy_scaling.py): no model, no sample file, one picture per seed."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw


def procedural(seed: int, side: int = 192) -> Image.Image:
    """A distinct picture per seed: smooth colour fields at three scales under random flat shapes."""
    rng = np.random.default_rng(seed)

    def field(cells: int, amplitude: float) -> np.ndarray:
        small = rng.normal(0, amplitude, (cells, cells, 3)).astype(np.float32)
        return np.stack(
            [
                np.asarray(Image.fromarray(small[..., c]).resize((side, side), Image.Resampling.BICUBIC))
                for c in range(3)
            ],
            axis=-1,
        )

    image = Image.fromarray(np.clip(128 + field(4, 50) + field(12, 30) + field(40, 12), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(6, 14))):
        x, y = (int(v) for v in rng.integers(0, side, 2))
        w, h = (int(v) for v in rng.integers(side // 16, side // 3, 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        shape = int(rng.integers(3))
        if shape == 0:
            draw.ellipse((x, y, x + w, y + h), fill=colour)
        elif shape == 1:
            draw.rectangle((x, y, x + w, y + h), fill=colour)
        else:
            draw.polygon(
                [tuple(int(v) for v in rng.integers(0, side, 2)) for _ in range(int(rng.integers(3, 6)))], fill=colour
            )
    return image
