import pytest

from queues.text.durations import readable_ms, readable_seconds


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "0 s"),
        (1, "1 s"),
        (59, "59 s"),
        (60, "1 min"),
        (90, "1 min 30 s"),
        (3_600, "1 hour"),
        (5_400, "1 hour 30 min"),
        (86_400, "1 day"),
        (90_061, "1 day 1 hour"),
        (604_800, "7 days"),
        (-5, "0 s"),
    ],
)
def test_seconds_in_words(seconds, words):
    assert readable_seconds(seconds) == words


@pytest.mark.parametrize(
    ("ms", "words"), [(0, "0 ms"), (999, "999 ms"), (1_500, "1.5 s"), (125_000, "2 min 5 s")]
)
def test_milliseconds_in_words(ms, words):
    assert readable_ms(ms) == words
