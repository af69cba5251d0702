"""The store's one-word ends of a task said in words for people: `attempts` is jargon for
"its attempts were used up", and the count says how many."""

from __future__ import annotations

_WORDS = {
    "timeout": "the queue timeout passed",
    "dependency_failed": "a task it was to run after did not finish",
}


def end_in_words(error: str, *, attempts: int, max_attempts: int) -> str:
    """'attempts' -> 'attempts used up (3 of 3)'; the other words of the store as a sentence;
    anything else as it is."""
    if error == "attempts":
        return (
            f"attempts used up ({attempts} of {max_attempts})"
            if max_attempts
            else ("attempts used up")
        )
    return _WORDS.get(error, error)
