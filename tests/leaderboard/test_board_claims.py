"""Joint rank claims (evaluate_pkg/functional/ranks.py): the whole board holds its error rate.

The truth is known by construction: boards of models of identical true quality (any tier split or
disjoint pair of rank intervals is a false claim) and boards with one planted better model. The
figures of bench/rank_claims.py (400 boards, three designs, the rule before beside) are in
docs/statistics.md; here fewer boards keep the test short, and the bound allows for their noise.
"""

from __future__ import annotations

import numpy as np
import pytest

from idbench.evaluate_pkg.functional.bootstrap import design_factors
from idbench.evaluate_pkg.functional.ranks import board_claims, rank_sets, stepdown_pairwise, tiers

pytestmark: list = []  # the fast tier, but for the tests marked one by one below

BOARDS = 200
NOMINAL = 0.05
SLACK = 2 * np.sqrt(NOMINAL * (1 - NOMINAL) / BOARDS)  # two binomial standard errors of the share


def charis_board(rng):
    """CHARIS's sample shape: 29 subjects x 7 prompts; a shared subject effect, a model x subject
    effect (sd 0.5, which pairing does not cancel) and prompt noise."""
    subjects, per = 29, 7
    prompts = [f"p{i:03d}" for i in range(subjects * per)]
    subject = np.repeat(np.arange(subjects), per)
    design = design_factors({p: {"subject": [f"s{s}"]} for p, s in zip(prompts, subject)}, prompts, ("subject",))

    def values(offsets):
        k = len(offsets)
        return (
            rng.normal(size=(subjects, 1))[subject]
            + rng.normal(0, 0.5, size=(subjects, k))[subject]
            + rng.normal(size=(len(prompts), k))
            + np.asarray(offsets)
        )

    return design, values


# No model, but seconds of computing (measured on one core): kept out of the fast tier's 2 minutes.
# Monte Carlo checks of the tiering rule's error rate.
@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 10, 20, 50])
def test_equal_models_are_split_into_tiers_at_most_at_the_nominal_rate(k):
    rng = np.random.default_rng(100 + k)
    design, values = charis_board(rng)
    split = disjoint = 0
    for _ in range(BOARDS):
        board = values(np.zeros(k))
        claims = board_claims(board, design, n_draws=1000, seed=0)
        split += tiers(board.mean(axis=0), claims.better).max() > 1
        low, high = rank_sets(claims.better, claims.equal)
        disjoint += bool((high[:, None] < low[None, :]).any())
    print(f"K={k}: tiers split on {split}/{BOARDS} boards, rank intervals disjoint on {disjoint}/{BOARDS}")
    assert split / BOARDS <= NOMINAL + SLACK and disjoint / BOARDS <= NOMINAL + SLACK


def test_a_planted_gap_is_found_among_ten_models():
    # One model 5 standard deviations of a pair's difference above nine equal ones; found = shown better
    # than some other model (bench/rank_claims.py: 79 % at 3 sd, 100 % from 4.5 sd on).
    rng = np.random.default_rng(5)
    design, values = charis_board(rng)
    sd = np.sqrt(2 * (0.5**2 / 29 + 1 / 203))  # model x subject and prompt variance of one model's mean
    found = 0
    for _ in range(60):
        board = values([5 * sd] + [0.0] * 9)
        found += board_claims(board, design, n_draws=1000, seed=0).better[0].any()
    assert found / 60 >= 0.7


def test_identical_and_constant_shift_models_are_decided_without_a_test():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(40, 1))
    board = np.hstack([base, base, base + 0.01])  # a copy, and the same model 0.01 better on every prompt
    design = design_factors({}, [f"p{i}" for i in range(40)], ("prompt",))
    claims = board_claims(board, design, n_draws=500, seed=0)
    assert claims.equal[0, 1] and not claims.better[0, 1] and not claims.better[1, 0]
    assert claims.better[2, 0] and claims.better[2, 1]
    low, high = rank_sets(claims.better, claims.equal)
    assert low.tolist() == [2, 2, 1] and high.tolist() == [2, 2, 1]
    assert tiers(board.mean(axis=0), claims.better).tolist() == [2, 2, 1]


def test_rank_sets_count_claims_by_hand():
    # 0 > 2 and 1 > 2 are claimed, 0 vs 1 is not: 0 and 1 rank 1-2, 2 ranks 3.
    better = np.zeros((3, 3), bool)
    better[0, 2] = better[1, 2] = True
    low, high = rank_sets(better)
    assert low.tolist() == [1, 1, 3] and high.tolist() == [2, 2, 3]
    assert tiers(np.array([0.9, 0.8, 0.1]), better).tolist() == [1, 1, 2]


def test_step_down_rejects_more_than_its_first_step_only_when_the_rest_support_it():
    # Two clearly different groups of models: the first step rejects the pairs across the groups; with
    # them removed, the maximum over the remaining (within-group) pairs is smaller, yet nothing within
    # a group is claimed, because those models are equal.
    rng = np.random.default_rng(9)
    design, values = charis_board(rng)
    board = values([0.0, 0.0, 0.0, 2.0, 2.0, 2.0])
    claims = board_claims(board, design, n_draws=1000, seed=0)
    assert claims.better[3:, :3].all() and not claims.better[:3, :3].any() and not claims.better[3:, 3:].any()
    assert tiers(board.mean(axis=0), claims.better)[[3, 4, 5]].tolist() == [1, 1, 1]


def test_stepdown_checks_its_inputs():
    with pytest.raises(ValueError):
        stepdown_pairwise(np.zeros(2), [np.zeros((3, 2))], [np.ones((10, 3))], level=1.5)
    one = stepdown_pairwise(np.zeros(1), [np.zeros((3, 1))], [np.ones((10, 3))])
    assert not one.better.any()
