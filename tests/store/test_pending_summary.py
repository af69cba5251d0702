"""The pending index's kept counts (queues/store/pending_summary.py) always say what a pass over
its entries would: after any sequence of changes, and at any moment asked, earlier ones too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from queues.store.pending_summary import Key, PendingEntries, Waiting

IDS = st.sampled_from([f"{i:016x}" for i in range(6)])
TIMES = st.integers(min_value=0, max_value=40)
KEYS = st.tuples(st.just(0), TIMES, TIMES, st.booleans(), st.just(0))
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), IDS, KEYS),
        st.tuples(st.just("pop"), IDS, st.none()),
        st.tuples(st.just("del"), IDS, st.none()),
        st.tuples(st.just("look"), TIMES, st.none()),
    ),
    max_size=60,
)


def counted(entries: dict[str, Key], now: int) -> Waiting:
    later = [key for key in entries.values() if key[2] > now]
    return Waiting(sum(1 for k in later if not k[3]), sum(1 for k in later if k[3]))


@settings(max_examples=400, deadline=None)
@given(STEPS)
def test_the_kept_counts_are_a_pass_s_counts(steps):
    kept, plain = PendingEntries(), {}
    for step, what, key in steps:
        if step == "set":
            kept[what], plain[what] = key, key
        elif step == "pop":
            assert kept.pop(what, None) == plain.pop(what, None)
        elif step == "del" and what in plain:
            del kept[what], plain[what]
        elif step == "look":
            assert kept.waiting(what) == counted(plain, what)
            oldest = min((k[1] for k in plain.values()), default=None)
            assert kept.oldest() == oldest
        assert dict(kept) == plain


def test_a_taken_entry_pops_without_a_default():
    kept = PendingEntries()
    kept["a"] = (0, 5, 10, False, 0)
    assert kept.waiting(0) == Waiting(1, 0)
    assert kept.pop("a") == (0, 5, 10, False, 0)
    assert kept.waiting(0) == Waiting(0, 0) and kept.oldest() is None
