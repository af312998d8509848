"""Whole-prompt CLIP-T (evaluate_pkg/functional/text.py) against a hand-made token counter and loops."""

from __future__ import annotations

import numpy as np
import pytest

from idbench.evaluate_pkg.functional import clip_t
from idbench.evaluate_pkg.functional.text import clip_t_whole, sentences, text_chunks

pytestmark: list = []  # the fast tier: no model, browser or subprocess here


def words_plus_two(text: str) -> int:
    """A token counter with CLIP's shape: one token per word plus the start and end tokens."""
    return len(text.split()) + 2


def test_a_prompt_that_fits_is_one_chunk_and_scores_as_clip_t():
    prompt = "A cat and a dog sit on a sofa."
    assert text_chunks(prompt, words_plus_two, limit=77) == [prompt]
    rng = np.random.default_rng(0)
    image, text = rng.normal(size=8), rng.normal(size=8)
    assert clip_t_whole(image, [text]) == pytest.approx(float(clip_t(image[None], text[None])[0]))


def test_sentences_are_packed_in_order_and_every_chunk_fits():
    # Sentences of 5, 4, 6 and 3 words: 7, 6, 8, 5 tokens alone. Limit 14 tokens = 12 words.
    text = "one two three four five. six seven eight nine. a b c d e f. x y z."
    chunks = text_chunks(text, words_plus_two, limit=14)
    assert chunks == ["one two three four five. six seven eight nine.", "a b c d e f. x y z."]
    assert all(words_plus_two(c) <= 14 for c in chunks)
    assert " ".join(chunks) == text  # nothing lost, nothing reordered


def test_a_sentence_longer_than_the_context_is_split_between_words():
    text = " ".join(f"w{i}" for i in range(25)) + "."  # 25 words: 27 tokens
    chunks = text_chunks(text, words_plus_two, limit=12)  # 10 words a chunk
    assert [len(c.split()) for c in chunks] == [10, 10, 5]
    assert " ".join(chunks) == text


def test_sentence_split_keeps_the_punctuation():
    assert sentences("Hi there. How are you?  Fine!") == ["Hi there.", "How are you?", "Fine!"]
    assert text_chunks("", words_plus_two) == []


def test_whole_prompt_score_is_the_mean_cosine_over_chunks():
    rng = np.random.default_rng(1)
    image = rng.normal(size=16)
    chunks = rng.normal(size=(3, 16))
    by_hand = np.mean([image @ c / np.linalg.norm(image) / np.linalg.norm(c) for c in chunks])
    assert clip_t_whole(image, chunks) == pytest.approx(by_hand)
    with pytest.raises(ValueError, match="at least one chunk"):
        clip_t_whole(image, np.zeros((0, 16)))


def test_a_long_sentence_starts_its_own_chunk():
    # "a b." (4 tokens) then a 15-word sentence (17 tokens), limit 12 tokens (10 words): the long one is
    # cut between its own words and does not trail the short one mid-sentence.
    long = " ".join(f"w{i}" for i in range(15)) + "."
    chunks = text_chunks(f"a b. {long}", words_plus_two, limit=12)
    assert chunks == ["a b.", " ".join(f"w{i}" for i in range(10)), " ".join(f"w{i}" for i in range(10, 15)) + "."]
