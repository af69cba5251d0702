"""One list of statuses: the store's. The API, the console and the Task Logs parser take it
from queues.store, so a status added there reaches every filter, enum and check at once."""

from __future__ import annotations

import re
from pathlib import Path

from queues.api import inputs
from queues.api.serializers import TaskStatusSerializer
from queues.store import STATUSES, State
from tasklogs import parsing

ROOT = Path(__file__).resolve().parent.parent
# a literal spelling two statuses or more in a row, as a list, tuple or set would
LITERAL_LIST = re.compile(r"""["'](pending|processing|finished|failed|cancelled)["']\s*,\s*["']"""
                          r"""(pending|processing|finished|failed|cancelled)["']""")  # fmt: skip


def test_the_store_exports_every_state_in_order():
    assert STATUSES == ("pending", "processing", "finished", "failed", "cancelled")
    assert tuple(state.value for state in State) == STATUSES


def test_the_api_console_and_tasklogs_use_the_stores_list():
    assert inputs.STATUSES is STATUSES
    assert frozenset(STATUSES) | {parsing.QUARANTINED} == parsing.STATUSES
    assert tuple(TaskStatusSerializer().fields["status"].choices) == STATUSES


def test_no_module_outside_the_store_spells_its_own_list_of_statuses():
    spelled = [
        f"{path.relative_to(ROOT)}:{n}"
        for top in ("queues", "tasklogs", "templates", "taskhoster_site")
        for path in sorted((ROOT / top).rglob("*"))
        if path.suffix in (".py", ".html")
        and not {"store", "store_pg"} & set(path.relative_to(ROOT).parts)  # the two stores
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if LITERAL_LIST.search(line)
    ]
    assert spelled == []
