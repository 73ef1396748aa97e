"""What the ``<memory-context>`` block of a prompt may hold: the rules that make it earn its tokens.

- **A prompt memory cannot help gets no search.** A greeting, an acknowledgement or a generic
  instruction ("hi", "continue", "run the tests", "fix it") has no word that could find a
  memory worth reading: only its *specific* words (:func:`specific_terms`: content words that
  are not filler or generic agent verbs) can, and without one there is no search. The session
  start block (MEMORY.md and the recent sessions) does not depend on the prompt and stays on the
  first prompt of a session.
- **Nothing below a relevance floor.** The prompt path searches words only (it never waits for an
  embedding model), and a word search always finds *something* once any word matches, however
  common. A hit is injected only when its line shares a specific word (:func:`stems`: the first
  five letters) with the prompt: a line that shares none cannot show the model why it is there,
  and MemorySearch finds more when the model wants it.
- **No line twice.** An entry is shown once per session (until a compaction drops the context
  that held it); within a block, the same text (two sessions' identical observations, one
  session's summary from a resumed run) is shown once; a session listed among the recent
  sessions is not listed again as a relevant memory.
"""

from __future__ import annotations

import re

from agentkeel.memory.retrieval import query_terms

FILLER = frozenset(
    (
        "hi hello hey yo thanks thank thx ok okay yes yep yeah nope please pls sure fine good great nice cool "
        "perfect right alright continue go ahead proceed keep going carry resume again retry next done finish "
        "start stop wait now more try run rerun test tests testing check lint build fix it that this those these "
        "same one something anything everything thing things let lets us make"
    ).split()
)
_STEM = 5


def specific_terms(prompt: str) -> list[str]:
    """The prompt's words that could find a memory: content words that are not filler, of at
    least three letters (or a number)."""
    return [t for t in query_terms(prompt) if t not in FILLER and (len(t) >= 3 or t.isdigit())]


def can_help(prompt: str) -> bool:
    """Whether a memory search is worth running for this prompt."""
    return bool(specific_terms(prompt))


def stems(text: str) -> set[str]:
    """The words of a text, cut to their first five letters (a stem good enough for "shares a word")."""
    return {t[:_STEM] for t in query_terms(text) if len(t) >= 3 or t.isdigit()}


def shares_a_word(line: str, prompt_stems: set[str]) -> bool:
    return not prompt_stems.isdisjoint(stems(line))


def same_text(text: str) -> str:
    """The key two lines are "the same" under: their words, lower-cased, in order."""
    return " ".join(re.findall(r"\w+", text.lower()))
