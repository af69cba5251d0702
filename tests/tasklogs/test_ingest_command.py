"""`manage.py ingest_tasklogs`: quiet when nothing happens, a summary rather than a line per
event under --follow, a clean stop on Ctrl-C, and help for every option."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.core.management import call_command, load_command_class

from tasklogs.ingest import IngestReport
from tasklogs.summaries import FollowSummary, run_line
from tests.store.mounts import read_only, small_fs, writable

from ..children import interrupted, reaped
from .conftest import encode, line, manage
from .test_ingest import wait_for

pytestmark = pytest.mark.django_db


def test_an_idle_pass_prints_nothing(append, day_dir: Path) -> None:
    append("2025-01-01", line())
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=io.StringIO())
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_tasklogs", "--source", str(day_dir), stdout=out, stderr=err)
    assert (out.getvalue(), err.getvalue()) == ("", "")


def test_verbosity_0_prints_nothing_at_all(append, day_dir: Path) -> None:
    append("2025-01-01", line())
    out = io.StringIO()
    call_command("ingest_tasklogs", "--source", str(day_dir), verbosity=0, stdout=out)
    assert out.getvalue() == ""


def test_follow_sums_up_instead_of_a_line_per_event_and_stops_on_ctrl_c(
    live_db, append, day_dir: Path
) -> None:
    url, keys = live_db
    append("2025-01-01", line())
    follower = manage(url, "manage.py", "ingest_tasklogs", "--follow", "--source", str(day_dir),
                      stdout=-1, stderr=-1)  # fmt: skip
    with reaped(follower):
        wait_for(keys, 1)
        for n in range(1, 6):  # five passes, each woken by one append and ingesting it
            append("2025-01-01", line(ms=n, event="progress", status="processing"))
            wait_for(keys, n + 1)
        out, err = interrupted(follower)
    assert follower.returncode == 0
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # The first run's line, then one summary of the five passes, printed as it stops.
    first, summary = out.splitlines()
    assert first.startswith("1 event stored from 1 day-file in ")
    # Each append wakes a pass, but a pass reads to the end of the file after its commit, so
    # under load an append can land in the pass before: five events, in up to five passes.
    assert re.fullmatch(r"5 events stored since \d\d:\d\d UTC", summary), out


def test_the_summary_comes_at_most_every_few_minutes_and_never_when_idle() -> None:
    clock = [1_735_689_600.0]  # 2025-01-01T00:00:00Z
    summary = FollowSummary(every=300, clock=lambda: clock[0])
    assert summary.take_if_due() is None  # nothing ingested, nothing said
    summary.add(lines=3, bad=0)
    assert summary.take_if_due() == "3 events stored since 00:00 UTC"
    clock[0] += 10
    summary.add(lines=2, bad=1)
    summary.add(lines=0, bad=0)  # an idle pass is not a pass worth counting
    assert summary.take_if_due() is None  # busy: the last summary is 10 s old
    assert summary.due_in() == 290
    clock[0] += 20
    summary.add(lines=4, bad=0)
    clock[0] += 270
    assert summary.due_in() == 0
    assert summary.take_if_due() == "5 events stored since 00:00 UTC; 1 bad line skipped"
    clock[0] += 1000
    assert summary.take_if_due() is None and summary.take() is None  # idle since
    summary.add(lines=1, bad=0)  # quiet for long: said at once
    assert summary.take_if_due() == "1 event stored since 00:21 UTC"


def test_every_option_has_help() -> None:
    parser = load_command_class("tasklogs", "ingest_tasklogs").create_parser(
        "manage.py", "ingest_tasklogs"
    )
    options = [a for a in parser._actions if a.option_strings]
    assert {"--follow", "--source"} <= {s for a in options for s in a.option_strings}
    assert [a.option_strings for a in options if not a.help] == []


def test_a_follower_started_on_a_read_only_logs_disk_waits_for_it_then_ingests(
    live_db, tmp_path: Path
) -> None:
    """serve starts the follower beside the API: a logs disk mounted read-only (before any
    day-file folder was made) is one line, and a wait, not a traceback and a dead ingester."""
    url, keys = live_db
    with small_fs(tmp_path / "logs") as logs:
        read_only(logs)
        follower = manage(url, "manage.py", "ingest_tasklogs", "--follow",
                          env_extra={"TASKHOSTER_LOGS_DIR": str(logs)},
                          stdout=-1, stderr=-1)  # fmt: skip
        with reaped(follower):
            assert follower.stderr is not None
            said = follower.stderr.readline()  # a traceback's first line, were it to crash
            assert said.startswith(f"{logs / 'tasks'} could not be made: Read-only file system.")
            writable(logs)
            (logs / "tasks").mkdir()
            (logs / "tasks" / "2025-01-01.jsonl").write_bytes(encode(line()))
            wait_for(keys, 1)  # its next look made it through: the line is stored
            out, err = interrupted(follower)
    assert follower.returncode == 0
    assert "Traceback" not in err and "could not be made" not in err, err  # said once only
    assert "The logs disk answers again; ingesting." in out


def test_a_runs_line_says_in_words_what_it_stored_and_from_where() -> None:
    files = IngestReport(files=2, lines=551, bad=2)
    assert (
        run_line(files, 0.42) == "549 events stored from 2 day-files in 0.4 s; 2 bad lines skipped"
    )
    rows = IngestReport(store_rows=1)
    assert run_line(rows, 0.2) == "1 event stored from the PostgreSQL store in 0.2 s"
    both = IngestReport(files=1, lines=3, store_rows=4)
    assert run_line(both, 1.0) == (
        "7 events stored, 3 from 1 day-file and 4 from the PostgreSQL store, in 1.0 s"
    )
    assert run_line(IngestReport(), 0.1) is None  # nothing read: nothing said
