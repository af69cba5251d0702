"""The bulk actions' form fields, read and written: what the queue page, the confirmation step
and each chunk's continuation post. Anything malformed is refused with a message for the page;
the numbers carried between chunks feed the report, and the bound and moment of the count keep
the walk to what was counted (an operator who forged them could only act on tasks they may
act on anyway)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from django.http import QueryDict

from queues.console.bulk import Tally
from queues.console.queue_page import Filter, cursor_text, parse_cursor
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
    cutoff: int | None  # the moment of that count (ms)
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
        until, cutoff = parse_cursor(post.get("until")), _number(post.get("cutoff"))
        if confirmed and scope == "filter" and (until is None or cutoff is None):
            raise BulkFormError("Nothing was counted to act on; start again from the queue page.")
        found, error = Filter.from_query(post)
        if error:
            raise BulkFormError(error)
        return cls(action=action, scope=scope, filter=found, ids=ids, confirmed=confirmed,
                   after=parse_cursor(post.get("after")), until=until,
                   cutoff=cutoff, tally=_tally(post))  # fmt: skip

    def fields(self, *, after: OrderKey | None = None) -> list[tuple[str, str]]:
        """The hidden fields that carry this request to its next step (name, value)."""
        out = [("do", f"{self.action}:{self.scope}"), ("confirm", "1")]
        out += [(name, value) for name, value in _filter_fields(self.filter) if value]
        out += [("ids", i) for i in self.ids]
        out += [("until", cursor_text(self.until)), ("after", cursor_text(after))]
        if self.cutoff is not None:
            out += [("cutoff", str(self.cutoff))]
        if self.tally.counted is not None:
            out += [("counted", str(self.tally.counted))]
        out += [("done", str(self.tally.done)), ("requested", str(self.tally.requested))]
        out += [("refused", f"{code}:{n}") for code, n in sorted(self.tally.refused.items())]
        return [(name, value) for name, value in out if value]


def _filter_fields(found: Filter) -> list[tuple[str, str]]:
    return [("status", found.status.value if found.status else ""), ("q", found.search.text),
            ("order", "" if found.newest_first else "oldest")]  # fmt: skip


def _tally(post: QueryDict) -> Tally:
    refused: Counter[str] = Counter()
    for entry in post.getlist("refused"):
        code, _, n = entry.partition(":")
        if _CODE.fullmatch(code) and (count := _number(n)) is not None:
            refused[code] += count
    return Tally(done=_number(post.get("done")) or 0, refused=refused,
                 requested=_number(post.get("requested")) or 0,
                 counted=_number(post.get("counted")))  # fmt: skip


def _number(text: str | None) -> int | None:
    """A count or a moment carried by the form; None for anything else."""
    if text is None or not (text.isascii() and text.isdigit()) or len(text) > 15:
        return None
    return int(text)
