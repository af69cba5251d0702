"""The bulk actions' form fields, read and written: what the queue page, the confirmation step
and each chunk's continuation post. Anything malformed is refused with a message for the page;
the numbers carried between chunks only feed the report, never a decision."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from django.http import QueryDict

from queues.bulk import Tally
from queues.queue_page import Filter, cursor_text, parse_cursor
from queues.store import OrderKey

SCOPES = ("selected", "filter")
_ID = re.compile(r"[0-9a-f]{16}")
_CODE = re.compile(r"[a-z_]{1,40}")
MAX_SELECTED = 500


class BulkFormError(ValueError):
    """The form cannot be acted on; the message says why."""


@dataclass(frozen=True, kw_only=True)
class BulkRequest:
    action: str
    scope: str  # "selected": the ticked ids; "filter": every task the filter matches
    filter: Filter
    ids: list[str]
    confirmed: bool
    after: OrderKey | None  # the next chunk starts past this task
    until: OrderKey | None  # the newest task counted when the operator confirmed
    tally: Tally

    @classmethod
    def from_post(cls, post: QueryDict, *, known_actions: tuple[str, ...]) -> BulkRequest:
        action, _, scope = post.get("do", "").partition(":")
        if action not in known_actions:
            raise BulkFormError(f"No such action: {action[:40] or '(none)'}.")
        if scope not in SCOPES:
            raise BulkFormError("Choose the ticked tasks or every task the filter matches.")
        ids = list(dict.fromkeys(i for i in post.getlist("ids") if _ID.fullmatch(i)))
        if scope == "selected" and not ids:
            raise BulkFormError("Tick at least one task first.")
        if len(ids) > MAX_SELECTED:
            raise BulkFormError(f"At most {MAX_SELECTED} ticked tasks at once.")
        confirmed = post.get("confirm") == "1"
        until = parse_cursor(post.get("until"))
        if confirmed and scope == "filter" and until is None:
            raise BulkFormError("Nothing was counted to act on; start again from the queue page.")
        found, error = Filter.from_query(post)
        if error:
            raise BulkFormError(error)
        return cls(action=action, scope=scope, filter=found, ids=ids, confirmed=confirmed,
                   after=parse_cursor(post.get("after")), until=until,
                   tally=_tally(post))  # fmt: skip

    def fields(self, *, after: OrderKey | None = None) -> list[tuple[str, str]]:
        """The hidden fields that carry this request to its next step (name, value)."""
        out = [("do", f"{self.action}:{self.scope}"), ("confirm", "1")]
        out += [(name, value) for name, value in _filter_fields(self.filter) if value]
        out += [("ids", i) for i in self.ids]
        out += [("until", cursor_text(self.until)), ("after", cursor_text(after))]
        out += [("done", str(self.tally.done))]
        out += [("refused", f"{code}:{n}") for code, n in sorted(self.tally.refused.items())]
        return [(name, value) for name, value in out if value]


def _filter_fields(found: Filter) -> list[tuple[str, str]]:
    return [("status", found.status.value if found.status else ""), ("q", found.search.text),
            ("order", "" if found.newest_first else "oldest")]  # fmt: skip


def _tally(post: QueryDict) -> Tally:
    done = post.get("done", "0")
    refused: Counter[str] = Counter()
    for entry in post.getlist("refused"):
        code, _, n = entry.partition(":")
        if _CODE.fullmatch(code) and _count(n):
            refused[code] += int(n)
    return Tally(done=int(done) if _count(done) else 0, refused=refused)


def _count(text: str) -> bool:
    """Whether `text` is a tally count: ASCII digits only (isdigit() alone takes "²", which
    int() refuses), short enough to be one."""
    return text.isascii() and text.isdigit() and len(text) < 10
