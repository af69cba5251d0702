import stat

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from queues.auth.tokens import find_token
from queues.models import ApiToken, Host, Queue, QueueAccess

pytestmark = pytest.mark.django_db


def run(*args):
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_createqueue_creates_host_and_queue_with_settings():
    out = run(
        "createqueue",
        "task.example.com",
        "resize",
        "--queue-seconds",
        "600",
        "--lease-seconds",
        "30",
        "--retain-from",
        "fetched",
        "--archive-payloads",
        "--max-attempts",
        "3",
        "--max-pending",
        "100",
        "--public-post",
    )
    assert "created queue task.example.com/resize" in out
    queue = Queue.objects.get(host__name="task.example.com", name="resize")
    assert (queue.queue_seconds, queue.lease_seconds, queue.retain_from) == (600, 30, "fetched")
    assert queue.archive_payloads and queue.public_post
    assert (queue.max_attempts, queue.max_pending) == (3, 100)


def test_createqueue_sets_the_flow_limits():
    run("createqueue", "task.example.com", "resize", "--rate-limit", "50/1",
        "--max-processing", "8", "--max-per-key", "1")  # fmt: skip
    queue = Queue.objects.get()
    assert (queue.rate_count, queue.rate_seconds) == (50, 1)
    assert (queue.max_processing, queue.max_per_key) == (8, 1)
    settings = queue.to_settings()
    assert (settings.rate_count, settings.max_processing, settings.max_per_key) == (50, 8, 1)
    assert settings.limited


def test_createqueue_takes_the_bounds_themselves():
    run("createqueue", "task.example.com", "resize", "--max-processing", "1000000",
        "--max-per-key", "1000000", "--max-pending", str(2**31 - 1))  # fmt: skip
    queue = Queue.objects.get()
    assert (queue.max_processing, queue.max_per_key, queue.max_pending) == (10**6, 10**6, 2**31 - 1)


def test_createqueue_updates_only_the_given_settings():
    run("createqueue", "task.example.com", "resize", "--lease-seconds", "30", "--public-post")
    out = run(
        "createqueue", "task.example.com", "resize", "--queue-seconds", "900", "--no-public-post"
    )
    assert "updated queue" in out
    queue = Queue.objects.get()
    assert (queue.queue_seconds, queue.lease_seconds, queue.public_post) == (900, 30, False)
    assert Host.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Bad_Host", "q"], "not a DNS host name"),
        (["h.example", "Bad/Queue"], "not a queue name"),
        (["h.example", "q", "--queue-seconds", "10", "--lease-seconds", "60"], "outlives"),
        (["h.example", "q", "--max-attempts", "9"], "max_attempts"),
        (["h.example", "q", "--rate-limit", "50"], "COUNT/SECONDS"),
        (["h.example", "q", "--rate-limit", "50/0"], "rate_seconds"),
        # ASCII digits only (int() takes "٣" and "1_000", isdigit() "²")
        (["h.example", "q", "--rate-limit", "٣/1"], "COUNT/SECONDS in the digits 0-9"),
        (["h.example", "q", "--rate-limit", "3/١"], "COUNT/SECONDS in the digits 0-9"),  # noqa: RUF001
        (["h.example", "q", "--rate-limit", "²/1"], "COUNT/SECONDS in the digits 0-9"),
        (
            ["h.example", "q", "--lease-seconds", "٣٠"],
            "lease-seconds: the value must be an integer",
        ),
        (["h.example", "q", "--max-pending", "1_000"], "max-pending: the value must be an integer"),
        # one bound on every database (Django's own is the column's, 2^63-1 on SQLite)
        (["h.example", "q", "--max-processing", "1000001"], "max_processing"),
        (["h.example", "q", "--max-per-key", "1000001"], "max_per_key"),
        (["h.example", "q", "--max-pending", str(2**31)], "max_pending"),
        (["h.example", "q", "--retain-seconds", str(2**31)], "retain_seconds"),
    ],
)
def test_createqueue_refuses_bad_input_and_writes_nothing(args, message):
    with pytest.raises(CommandError, match=message):
        run("createqueue", *args)
    assert not Queue.objects.exists()
    assert not Host.objects.exists()


def test_grant_creates_the_user_and_the_role(make_queue):
    make_queue("task.example.com", "resize")
    out = run("grant", "bob", "task.example.com/resize", "worker")
    assert "granted" in out
    access = QueueAccess.objects.get()
    assert (access.user.username, access.role) == ("bob", "worker")
    assert not access.user.has_usable_password()
    assert "already granted" in run("grant", "bob", "task.example.com/resize", "worker")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bob", "task.example.com/resize", "admin"], "Unknown role"),
        (["bob", "task.example.com/nope", "worker"], "no queue"),
        (["bob", "other.example.com/resize", "worker"], "no queue"),
        (["bob", "task.example.com", "worker"], "not HOST/QUEUE"),
        (["bob", "/resize", "worker"], "not HOST/QUEUE"),
    ],
)
def test_grant_refuses_bad_input(make_queue, args, message):
    make_queue("task.example.com", "resize")
    with pytest.raises(CommandError, match=message):
        run("grant", *args)
    assert not QueueAccess.objects.exists()


def test_createtoken_prints_a_working_token_once():
    user = User.objects.create(username="alice")
    token = run("createtoken", "alice", "--name", "box-1").strip()
    found = find_token(token)
    assert found is not None and found.user == user and found.name == "box-1"
    assert found.expires_at is None
    second = run("createtoken", "alice").strip()
    assert second != token


@pytest.mark.parametrize("bad", ["\u202e", "\ufeff", "\n"])
def test_createtoken_refuses_a_name_the_rule_for_names_refuses(bad):
    User.objects.create(username="alice")
    with pytest.raises(
        CommandError, match=f"--name: The name must not hold control.*U\\+{ord(bad):04X}"
    ):
        run("createtoken", "alice", "--name", f"box{bad}1")
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("days", ["٣", "1_0", "0"])
def test_createtoken_refuses_expiry_days_not_in_ascii_digits_or_under_one(days):
    User.objects.create(username="alice")
    with pytest.raises(CommandError, match="expires-days"):
        run("createtoken", "alice", "--expires-days", days)
    assert not ApiToken.objects.exists()


def test_createtoken_with_expiry():
    User.objects.create(username="alice")
    token = run("createtoken", "alice", "--expires-days", "2").strip()
    assert find_token(token).expires_at is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [(["nobody"], "no user"), (["alice", "--expires-days", "0"], "at least 1")],
)
def test_createtoken_refuses_bad_input(args, message):
    User.objects.create(username="alice")
    with pytest.raises(CommandError, match=message):
        run("createtoken", *args)


def test_bootstrap_creates_admin_once_and_a_demo_queue(monkeypatch, settings, tmp_path):
    monkeypatch.delenv("TASKHOSTER_ADMIN_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path / "var"
    out = run("bootstrap")
    secret = tmp_path / "var" / "admin-password"
    assert f"created admin user 'admin', password in {secret}" in out
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600  # only its owner reads it
    password = secret.read_text().strip()
    assert password not in out  # not in the terminal's scrollback nor in a log
    admin = User.objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert Queue.objects.filter(host__name="demo.localhost", name="demo").exists()
    # a later run (a second `make run`) says again where the first password is, never the
    # password itself; once the file is gone, how to set one
    again = run("bootstrap")
    assert f"admin user 'admin': its first password is in {secret}" in again
    assert password not in again and "created" not in again
    secret.unlink()
    gone = run("bootstrap")
    assert f"{secret} is gone; `manage.py changepassword admin` sets a new one" in gone


def test_bootstrap_reads_the_admin_password_from_the_environment(monkeypatch, settings, tmp_path):
    monkeypatch.setenv("TASKHOSTER_ADMIN_PASSWORD", "correct horse battery staple")
    settings.VAR_DIR = tmp_path
    out = run("bootstrap")
    assert "correct horse" not in out
    assert not (tmp_path / "admin-password").exists()
    assert User.objects.get(username="admin").check_password("correct horse battery staple")


def test_commands_fail_with_a_nonzero_exit_in_a_real_process(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {"PATH": "/usr/bin:/bin", "TASKHOSTER_VAR_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    bad = subprocess.run(
        [sys.executable, "manage.py", "grant", "bob", "x.example/q", "chef"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "Unknown role" in bad.stderr


def test_createqueue_without_options_gives_the_stores_defaults():
    from queues.store.settings import QueueSettings

    run("createqueue", "task.example.com", "plain")
    queue = Queue.objects.get(host__name="task.example.com", name="plain")
    assert queue.to_settings() == QueueSettings()
    assert queue.max_attempts == 3


def our_commands() -> dict[str, str]:
    from django.core.management import get_commands

    return {name: app for name, app in get_commands().items() if app in ("queues", "tasklogs")}


@pytest.mark.parametrize("name", sorted(our_commands()))
def test_every_option_of_our_commands_has_help_text(name):
    from django.core.management import load_command_class
    from django.core.management.base import BaseCommand

    def actions(command):  # keyed by the option's spelling: --x and --no-x share a dest
        parser = command.create_parser("manage.py", name)
        return {"/".join(a.option_strings) or a.dest: a for a in parser._actions}

    djangos_own = actions(BaseCommand())  # --verbosity, --settings and the like
    ours = {flag: a for flag, a in actions(load_command_class(our_commands()[name], name)).items()
            if flag not in djangos_own}  # fmt: skip
    assert ours, f"{name} takes no arguments of its own?"
    bare = sorted(flag for flag, action in ours.items() if not (action.help or "").strip())
    assert bare == [], f"{name}: no --help text for {bare}"
