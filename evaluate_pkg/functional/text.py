"""Prompts longer than CLIP's text context: which are cut, and a whole-prompt CLIP-T named apart.

CLIP reads at most 77 tokens (start and end tokens included); the papers' CLIP-T truncates there, and
so does ``clip_t``. CogCanvas prompts pass that from three persons on (86-148 tokens), losing the
rightmost persons and the interaction sentences, and Identity Collapse prompts at ten subjects do
too. ``clip_t_whole`` reads all of it: the prompt is split into chunks of whole sentences that each
fit the context, every chunk is encoded on its own, and the score is the mean over the chunks of
the cosine between the image and the chunk (each chunk weighs the same: a sentence about one person
counts as much as one about another). A prompt that fits is one chunk, so there ``clip_t_whole``
equals ``clip_t``.

Token counting is the tokenizer's (``count_tokens(text) -> int``, start and end tokens included), so
this module needs no model and is tested with a counter made by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .similarity import cosine

#: CLIP's text context, start and end tokens included.
CLIP_CONTEXT = 77

# A sentence ends at ".", "!" or "?" followed by white space; the punctuation stays with it.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """``text`` split after each sentence-ending ".", "!" or "?"; empty pieces dropped.

    >>> sentences("Two cats sit. One sleeps!  The other eats")
    ['Two cats sit.', 'One sleeps!', 'The other eats']
    """
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def fits(text: str, count_tokens: Callable[[str], int], limit: int = CLIP_CONTEXT) -> bool:
    """Whether ``text`` is read whole within ``limit`` tokens."""
    return count_tokens(text) <= limit


def text_chunks(text: str, count_tokens: Callable[[str], int], limit: int = CLIP_CONTEXT) -> list[str]:
    """``text`` as consecutive chunks that each fit ``limit`` tokens, joined from whole sentences.

    Sentences are packed greedily in order (a chunk takes the next sentence while the joined text
    still fits). A single sentence longer than ``limit`` is split between words the same way; a single
    word that alone does not fit is kept as its own chunk (the encoder then cuts it: nothing shorter
    exists). A text that fits is returned as one chunk, unchanged.
    """
    text = text.strip()
    if fits(text, count_tokens, limit) or not text:
        return [text] if text else []
    # A sentence too long for one chunk is first cut between words on its own, so its first piece
    # starts a chunk rather than trailing the previous sentence.
    pieces = [
        p
        for s in sentences(text)
        for p in ([s] if fits(s, count_tokens, limit) else _pack(s.split(), count_tokens, limit))
    ]
    return _pack(pieces, count_tokens, limit)


def _pack(pieces: Sequence[str], count_tokens: Callable[[str], int], limit: int) -> list[str]:
    """Consecutive ``pieces`` joined by spaces, greedily, while the joined text fits ``limit``."""
    chunks: list[str] = []
    for piece in pieces:
        joined = f"{chunks[-1]} {piece}" if chunks else piece
        if chunks and fits(joined, count_tokens, limit):
            chunks[-1] = joined
        else:
            chunks.append(piece)
    return chunks


def clip_t_whole(image_embedding: Any, chunk_embeddings: Any) -> float:
    """Mean over the chunks of cosine(image, chunk): one image ``(d,)`` against its prompt's chunks ``(k, d)``.

    >>> clip_t_whole([1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
    0.5
    """
    chunks = np.atleast_2d(np.asarray(chunk_embeddings, dtype=np.float64))
    if chunks.shape[0] == 0:
        raise ValueError("clip_t_whole: a prompt has at least one chunk")
    image = np.broadcast_to(np.asarray(image_embedding, dtype=np.float64), chunks.shape)
    return float(np.mean(cosine(image, chunks)))
