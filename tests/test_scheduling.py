"""The suite's schedule on the xdist workers (tests/scheduling.py): long modules split, the
longest units first, every other module one unit in collection order."""

import pytest

from tests import scheduling

SPLIT = "tests/store/test_dependencies.py::test_a_chain_runs_in_order_with_four_worker_processes"
WHOLE = "tests/test_durations.py::test_seconds_in_words[0-0 s]"
LONG = "tests/reliability/test_power_loss_batches.py::test_power_loss_in_a_batch[post_many-fsync]"


def test_a_spread_module_is_handed_out_test_by_test_and_any_other_module_whole():
    assert scheduling.unit_of(f"{SPLIT}[files]") != scheduling.unit_of(f"{SPLIT}[postgres]")
    assert scheduling.unit_of(WHOLE) == "tests/test_durations.py"
    assert scheduling.LongestFirst._split_scope(None, WHOLE) == "tests/test_durations.py"


def test_the_longest_units_come_first_and_the_rest_keep_their_order():
    later = ["tests/a/test_x.py::t", WHOLE, "tests/a/test_b.py::t"]
    ordered = sorted([*later, LONG, SPLIT], key=scheduling.rank)
    assert ordered == [LONG, SPLIT, *later]


def test_every_listed_module_exists_and_each_is_listed_once():
    for listed in (scheduling.FIRST_SQLITE, scheduling.FIRST_POSTGRES):
        for module in (*listed, *scheduling.SPREAD):
            assert (scheduling.ROOT / module).is_file(), module
        assert len(set(listed)) == len(listed)
    # the PostgreSQL pass leaves out most store modules: the SQLite pass has them all
    assert scheduling.SPREAD.issubset(scheduling.FIRST_SQLITE)


def test_a_spread_modules_slow_tests_come_before_its_others(request):
    module = "tests/store/test_groups.py"
    items = [item for item in request.session.items if item.nodeid.startswith(module + "::")]
    slow = [item for item in items if item.get_closest_marker("slow")]
    if not slow or len(slow) == len(items):
        pytest.skip(f"this run did not collect both slow and other tests of {module}")
    assert max(map(scheduling.order, slow)) < min(
        scheduling.order(item) for item in items if item not in slow
    )
    # a module run whole keeps its own order, slow or not
    whole = [
        item
        for item in request.session.items
        if scheduling.module_of(item.nodeid) not in scheduling.SPREAD
    ]
    assert {scheduling.order(item)[1] for item in whole} == {True}
