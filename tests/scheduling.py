"""How a pass hands its tests to the pytest-xdist workers (`make test`: `--dist loadfile`, which
this plugin's scheduler refines): a module is one unit, so that its module and session fixtures
(a live server, a browser) start once, on the worker that runs it; the few long modules whose
tests share nothing are split one test per unit; and the longest units are handed out first, so
that no worker is left running one long file after the other has finished (xdist otherwise
hands out the modules with the most tests first, and a long module of three tests came last).

(xdist's own `loadgroup` would say the same with marks, but with pytest 9 its group never
reaches the node id, and every test became a unit of its own.)

The lists are a schedule, not a rule: a module missing from them runs as well, after them in
collection order. Their order is that of the units' run times in a `--durations` run of the
SQLite pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

# Modules whose tests may run on different workers, each test a unit of its own: they start
# nothing per module (no module or session fixture of theirs), each test builds its own store,
# server or processes.
SPREAD = frozenset(
    {
        "tests/reliability/test_power_loss_batches.py",
        "tests/test_serve_command.py",
        "tests/store/test_dependencies.py",
        "tests/store/test_model.py",
        "tests/api/test_schema.py",
        "tests/store/test_limits.py",
    }
)

# The longest units first (the spread modules by their tests' sum), longest first.
FIRST = (
    "tests/test_serve_command.py",
    "tests/reliability/test_power_loss_batches.py",
    "tests/store/test_dependencies.py",
    "tests/store/test_model.py",
    "tests/api/test_schema.py",
    "tests/store/test_limits.py",
    "tests/api_live/test_server_metrics_live.py",
    "tests/store/test_open_files.py",
    "tests/tasklogs/test_ingest_command.py",
    "tests/test_postgres_pass.py",
    "tests/tasklogs/test_ingest.py",
    "tests/api_live/test_cli_live.py",
    "tests/webhooks/test_deadlines.py",
    "tests/store/test_pg_store.py",
    "tests/browser/test_admin_forms_browser.py",
    "tests/test_pass_selection.py",
)
ROOT = Path(__file__).resolve().parent.parent  # the node ids' root
RANK = {module: n for n, module in enumerate(FIRST)}


def module_of(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def rank(nodeid: str) -> int:
    """Where a test's unit comes in the schedule (0: first)."""
    return RANK.get(module_of(nodeid), len(FIRST))


def unit_of(nodeid: str) -> str:
    """The unit a test is handed out in: its module's, or its own in a spread module."""
    module = module_of(nodeid)
    return nodeid if module in SPREAD else module


class LongestFirst(LoadFileScheduling):
    """Units by module, the spread modules' by test, handed out in the workers' collection
    order (which pytest_collection_modifyitems below sorts), not by how many tests they hold."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def schedule(self) -> None:
        self.config.option.loadscopereorder = False  # the collection's order is the schedule
        super().schedule()


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LongestFirst | None:
    """`--dist loadfile` on the controller: this module's scheduler."""
    return LongestFirst(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(trylast=True)  # after pytest-django's order, which each module keeps
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the longest units first (a stable sort, the same on every worker,
    as xdist requires)."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: rank(item.nodeid))
