"""The suite's schedule on the xdist workers (tests/scheduling.py): long modules split, the
longest units first, every other module one unit in collection order."""

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
    for module in (*scheduling.FIRST, *scheduling.SPREAD):
        assert (scheduling.ROOT / module).is_file(), module
    assert len(set(scheduling.FIRST)) == len(scheduling.FIRST)
    assert scheduling.SPREAD.issubset(scheduling.FIRST)
