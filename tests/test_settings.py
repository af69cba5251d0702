"""Settings come from the environment; each case imports them in a fresh process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrated import migrate

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, django
from django.conf import settings
django.setup()
db = settings.DATABASES["default"]
print(json.dumps({
    "debug": settings.DEBUG,
    "secret_key": settings.SECRET_KEY,
    "allowed_hosts": settings.ALLOWED_HOSTS,
    "engine": db["ENGINE"], "db_name": str(db["NAME"]), "db_host": db.get("HOST", ""),
    "items": str(settings.TASKHOSTER_ITEMS_DIR), "logs": str(settings.TASKHOSTER_LOGS_DIR),
    "fsync": settings.TASKHOSTER_FSYNC, "flush": settings.TASKHOSTER_FLUSH,
    "retain_days": settings.TASKHOSTER_LOG_RETAIN_DAYS,
    "open_queues": settings.TASKHOSTER_OPEN_QUEUES,
    "ssl_redirect": settings.SECURE_SSL_REDIRECT, "hsts": settings.SECURE_HSTS_SECONDS,
    "secure_cookie": settings.SESSION_COOKIE_SECURE,
}))
"""


def load_settings(tmp_path: Path, **env: str) -> dict:
    base = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings"}
    base.setdefault("TASKHOSTER_VAR_DIR", str(tmp_path / "var"))
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_defaults_are_the_embedded_ones(tmp_path):
    found = load_settings(tmp_path)
    var = tmp_path / "var"
    assert found["debug"] is False
    assert found["engine"] == "django.db.backends.sqlite3"
    assert found["db_name"] == str(var / "taskhoster.sqlite3")
    assert found["items"] == str(ROOT / "var" / "items")
    assert found["logs"] == str(ROOT / "var" / "logs")
    assert found["fsync"] is True
    assert found["flush"] == "syncfs"
    assert found["retain_days"] == 21
    assert found["open_queues"] == 128
    assert found["allowed_hosts"] == ["127.0.0.1", "localhost"]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("TASKHOSTER_OPEN_QUEUES", "٣", "must be an integer in the digits 0-9"),
        ("TASKHOSTER_MAX_BODY_BYTES", "1_000", "must be an integer in the digits 0-9"),
        ("TASKHOSTER_SSE_KEEPALIVE_SECONDS", "nan", "must be a number in the digits 0-9"),
        ("TASKHOSTER_WEBHOOK_DEADLINE_SECONDS", "٣", "must be a number in the digits 0-9"),
    ],
)
def test_a_number_setting_not_in_ascii_digits_stops_the_start_naming_it(
    tmp_path, variable, value, said
):
    """env.int() and env.float() read these with int() and float(), which take them."""
    with pytest.raises(subprocess.CalledProcessError) as failed:
        load_settings(tmp_path, **{variable: value})
    assert f"ImproperlyConfigured: {variable} {said}" in failed.value.stderr


def test_without_secret_key_a_random_one_is_kept_in_var(tmp_path):
    first = load_settings(tmp_path)["secret_key"]
    second = load_settings(tmp_path)["secret_key"]
    assert first == second and len(first) >= 50
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0
    other = load_settings(tmp_path / "elsewhere")["secret_key"]
    assert other != first


def test_environment_overrides_every_setting(tmp_path):
    found = load_settings(
        tmp_path,
        DEBUG="1",
        SECRET_KEY="k" * 60,
        ALLOWED_HOSTS="task.example.com,api.example.com",
        DATABASE_URL="postgres://u:p@db.example:5433/th",
        TASKHOSTER_ITEMS_DIR="/srv/taskhoster-items",
        TASKHOSTER_LOGS_DIR="relative/logs",
        TASKHOSTER_FSYNC="off",
        TASKHOSTER_FLUSH="fsync",
        TASKHOSTER_LOG_RETAIN_DAYS="7",
        TASKHOSTER_OPEN_QUEUES="32",
    )
    assert found["debug"] is True
    assert found["secret_key"] == "k" * 60
    assert found["allowed_hosts"] == ["task.example.com", "api.example.com"]
    assert found["engine"] == "django.db.backends.postgresql"
    assert (found["db_name"], found["db_host"]) == ("th", "db.example")
    assert found["items"] == "/srv/taskhoster-items"
    assert found["logs"] == str(ROOT / "relative" / "logs")
    assert found["fsync"] is False
    assert found["flush"] == "fsync"
    assert found["retain_days"] == 7
    assert found["open_queues"] == 32


def test_production_turns_on_https_protections(tmp_path):
    found = load_settings(tmp_path, DEBUG="0")
    assert found["ssl_redirect"] and found["secure_cookie"]
    assert found["hsts"] >= 31_536_000
    dev = load_settings(tmp_path, DEBUG="1")
    assert not dev["ssl_redirect"] and dev["hsts"] == 0


def deploy_check(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    base = {
        "PATH": "/usr/bin:/bin",
        "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "SECRET_KEY": "p" + "7Hq2vX9zL4kR8mN3bT6wY1cF5gJ0dS" * 2,
        "ALLOWED_HOSTS": "task.example.com",
        "DEBUG": "0",
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
    )


def test_production_settings_pass_check_deploy(tmp_path):
    done = deploy_check(tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "no issues" in done.stdout


@pytest.mark.parametrize(
    ("env", "warning"),
    [({"DEBUG": "1"}, "security.W018"), ({"TASKHOSTER_HTTPS": "0"}, "security.W004")],
)
def test_check_deploy_catches_unsafe_settings(tmp_path, env, warning):
    done = deploy_check(tmp_path, **env)
    assert done.returncode != 0
    assert warning in done.stderr


CONNECT = """
import os, django
os.umask(0o022)  # what most systems start a process with: the settings must tighten it
from django.conf import settings
django.setup()
from django.db import connection
connection.ensure_connection()
"""


@pytest.mark.parametrize("umask,expected", [(None, 0o640), ("077", 0o600)])
def test_the_sqlite_database_is_created_with_the_configured_umask(tmp_path, umask, expected):
    database = tmp_path / "console.sqlite3"
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
        "TASKHOSTER_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{database}",
    }
    if umask is not None:
        env["TASKHOSTER_UMASK"] = umask
    subprocess.run([sys.executable, "-c", CONNECT], cwd=ROOT, env=env, check=True)
    assert database.stat().st_mode & 0o777 == expected


def test_a_bad_umask_stops_the_process_with_its_reason(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
           "TASKHOSTER_VAR_DIR": str(tmp_path / "var"), "TASKHOSTER_UMASK": "0o200"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CONNECT], cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0
    assert "ImproperlyConfigured: TASKHOSTER_UMASK" in done.stderr


REQUESTS = """
import logging, django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
client = Client(HTTP_HOST="localhost")
print(client.get("/no/such/page/").status_code)
print(client.get("/api/v1/queues/a.b/c/tasks").status_code)
print(logging.getLogger("django.request").isEnabledFor(logging.ERROR))
"""


def test_a_4xx_answer_writes_no_django_request_line_and_a_5xx_still_would(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "taskhoster_site.settings",
           "TASKHOSTER_VAR_DIR": str(tmp_path / "var"), "DEBUG": "1"}  # fmt: skip
    migrate(env)
    done = subprocess.run([sys.executable, "-c", REQUESTS], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stdout.split() == ["404", "401", "True"], done.stderr
    assert "Not Found:" not in done.stderr and "Unauthorized:" not in done.stderr, done.stderr


def test_an_unknown_flush_mode_stops_the_settings(tmp_path):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        load_settings(tmp_path, TASKHOSTER_FLUSH="sometimes")
    assert "TASKHOSTER_FLUSH" in failed.value.stderr


@pytest.mark.parametrize("seconds", ["0", "-1", "3601", "soon"])
def test_a_metrics_write_interval_out_of_range_stops_the_settings(tmp_path, seconds):
    with pytest.raises(subprocess.CalledProcessError) as failed:
        load_settings(tmp_path, TASKHOSTER_METRICS_WRITE_SECONDS=seconds)
    assert "TASKHOSTER_METRICS_WRITE_SECONDS" in failed.value.stderr
