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

import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

# Modules whose tests may run on different workers, each test a unit of its own: they start
# nothing per module (no module or session fixture of theirs), each test builds its own store,
# server or processes. Within one, the tests marked `slow` go first.
SPREAD = frozenset(
    {
        "tests/reliability/test_power_loss_batches.py",
        "tests/test_serve_command.py",
        "tests/store/test_dependencies.py",
        "tests/store/test_groups.py",
        "tests/store/test_model.py",
        "tests/api/test_schema.py",
        "tests/store/test_limits.py",
    }
)

# The units longer than ~10 s, longest first, in each pass (a spread module where its longest
# test would come). The SQLite pass:
FIRST_SQLITE = (
    "tests/store/test_groups.py",  # its 10,000-member kill test, ~60 s alone
    "tests/test_readme_tour.py",  # a first `make run` and the README's tour, ~45 s
    "tests/client/test_reconnect.py",  # a server stopped for 18 s under work and watch, ~40 s
    "tests/test_postgres_pass.py",
    "tests/webhooks/test_deadlines.py",
    "tests/api_live/test_cli_live.py",
    "tests/api_live/test_server_metrics_live.py",
    "tests/browser/test_dashboard_browser.py",
    "tests/store/test_selecting.py",
    "tests/tasklogs/test_ingest.py",
    "tests/browser/test_console_browser.py",
    "tests/store/test_group_model.py",
    "tests/browser/test_recovery_browser.py",
    "tests/api_live/test_django_tasks_live.py",
    "tests/test_settings.py",
    "tests/store/test_pg_store.py",
    "tests/tasklogs/test_ingest_command.py",
    "tests/client/test_django_backend.py",
    "tests/client/test_cli_messages.py",
    "tests/browser/test_admin_forms_browser.py",
    "tests/test_serve_command.py",
    "tests/api/test_schema.py",
    "tests/store/test_open_files.py",
    "tests/test_pass_selection.py",
    "tests/browser/test_state_badges_browser.py",
    "tests/reliability/test_pg_chaos.py",
    "tests/store/test_limits.py",
    "tests/reliability/test_power_loss_batches.py",
    "tests/api/test_permissions.py",
    "tests/browser/test_phone_cards_browser.py",
    "tests/store/test_model.py",
    "tests/store/test_dependencies.py",
)
# The PostgreSQL pass (its own selection: the tests that reach the database):
FIRST_POSTGRES = (
    "tests/webhooks/test_deadlines.py",
    "tests/browser/test_dashboard_browser.py",
    "tests/api/test_permissions.py",
    "tests/browser/test_console_browser.py",
    "tests/browser/test_recovery_browser.py",
    "tests/webhooks/test_store_failures_processes.py",
    "tests/api/test_bad_inputs.py",
    "tests/tasklogs/test_store_events.py",
    "tests/browser/test_state_badges_browser.py",
    "tests/api/test_workers.py",
    "tests/api/test_schema.py",
    "tests/api_live/test_two_servers_live.py",
    "tests/tasklogs/test_ingest.py",
    "tests/browser/test_admin_forms_browser.py",
    "tests/browser/test_failure_browser.py",
    "tests/browser/test_phone_cards_browser.py",
    "tests/api/test_producers.py",
    "tests/browser/test_queue_page_browser.py",
    "tests/test_console_plans.py",
    "tests/api/test_plain_views.py",
    "tests/tasklogs/test_ingest_command.py",
)
FIRST = (
    FIRST_POSTGRES if os.environ.get("DATABASE_URL", "").startswith("postgres") else FIRST_SQLITE
)
ROOT = Path(__file__).resolve().parent.parent  # the node ids' root
RANK = {module: n for n, module in enumerate(FIRST)}


def module_of(nodeid: str) -> str:
    return nodeid.partition("::")[0]


def rank(nodeid: str) -> int:
    """Where a test's unit comes in the schedule (0: first)."""
    return RANK.get(module_of(nodeid), len(FIRST))


def order(item: pytest.Item) -> tuple[int, bool]:
    """An item's place in the schedule: its unit's rank, then a spread module's slow tests."""
    spread = module_of(item.nodeid) in SPREAD
    return rank(item.nodeid), not (spread and item.get_closest_marker("slow") is not None)


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
        items.sort(key=order)
