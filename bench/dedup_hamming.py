"""Pairwise pHash distances: the vectorised matrix vs the obvious Python double loop.

Run: .venv/bin/python bench/dedup_hamming.py [N]   (N hashes, default 2000, about a CogCanvas-sized pool)
"""

from __future__ import annotations

import random
import sys
import time

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from idbench.builders.dedup import hamming_matrix


def naive(hashes: list[int]) -> list[list[int]]:
    return [[bin(a ^ b).count("1") for b in hashes] for a in hashes]


def main(n: int) -> None:
    rng = random.Random(0)
    hashes = [rng.getrandbits(64) for _ in range(n)]
    start = time.perf_counter()
    fast = hamming_matrix(hashes)
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    slow = naive(hashes)
    t_slow = time.perf_counter() - start
    assert fast.tolist() == slow
    print(f"N={n}: numpy {t_fast * 1e3:.1f} ms, Python loop {t_slow * 1e3:.1f} ms, ratio {t_slow / t_fast:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
