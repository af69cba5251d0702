"""taskhoster settings, read from the environment with django-environ.

With no variable set the site runs on its embedded defaults: SQLite and the `./var/`
directories under the project. Production sets DEBUG=0, SECRET_KEY, ALLOWED_HOSTS,
DATABASE_URL and the two store directories (README, "Production layout").
"""

import datetime as dt
import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from queues.store import numerals
from queues.store.settings import DEFAULT_FLUSH, DEFAULT_UMASK, FLUSH_MODES, parse_umask

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def _env_integer(name: str, *, default: int) -> int:
    """An integer setting from the environment, in the digits 0-9: env.int()'s int() would also
    take "٣" or "1_000" (queues.store.numerals). Refused at start, naming the variable."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return numerals.parse_integer(raw, name)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def _env_number(name: str, *, default: float) -> float:
    """A number setting from the environment (digits, a decimal part): env.float()'s float()
    would also take "٣", "nan" and "inf"."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return numerals.parse_number(raw, name)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def _project_path(value: str) -> Path:
    """A relative directory in the environment is taken from the project root, not the cwd."""
    path = Path(value)
    return path if path.is_absolute() else BASE_DIR / path


# Taken off the mode of everything this process creates: task files, day-files, the payload
# archive, the SQLite database, the secret key. Applied once, here, as the process starts
# (manage.py, gunicorn and wsgi all load these settings first); the store applies it to its
# own creates as well (StoreConfig.umask).
try:
    TASKHOSTER_UMASK = parse_umask(env.str("TASKHOSTER_UMASK", default=oct(DEFAULT_UMASK)))
except ValueError as exc:
    raise ImproperlyConfigured(f"TASKHOSTER_UMASK: {exc}") from exc
os.umask(TASKHOSTER_UMASK)

VAR_DIR = _project_path(env.str("TASKHOSTER_VAR_DIR", default="var"))


def _persistent_secret_key() -> str:
    """Without SECRET_KEY in the environment, keep a random key in var/ so that sessions
    survive restarts and no key is ever committed or shared between installations."""
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting together must not each write a different key.
        try:
            fd = key_file.open("x", encoding="ascii")
        except FileExistsError:
            pass
        else:
            with fd:
                fd.write(secrets.token_urlsafe(50))
            key_file.chmod(0o600)
    return key_file.read_text(encoding="ascii").strip()


DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="") or _persistent_secret_key()
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# --- the store ----------------------------------------------------------------------------
TASKHOSTER_ITEMS_DIR = _project_path(env.str("TASKHOSTER_ITEMS_DIR", default="var/items"))
TASKHOSTER_LOGS_DIR = _project_path(env.str("TASKHOSTER_LOGS_DIR", default="var/logs"))
# The bearer token Prometheus presents at /metrics (docs/metrics.md); unset: staff sessions only.
TASKHOSTER_METRICS_TOKEN = env.str("TASKHOSTER_METRICS_TOKEN", default="")
# The web server's and the sweep loop's own figures (request durations, flushes, held threads,
# sweep passes; docs/metrics.md). Off: none is counted, and /metrics has only the store's.
TASKHOSTER_SERVER_METRICS = env.bool("TASKHOSTER_SERVER_METRICS", default=True)
# Each process counts them in its memory and writes them for /metrics this often (and as it
# exits): the most another process's figures lag in a scrape, and what a SIGKILL takes.
TASKHOSTER_METRICS_WRITE_SECONDS = _env_number("TASKHOSTER_METRICS_WRITE_SECONDS", default=1.0)
if not 0 < TASKHOSTER_METRICS_WRITE_SECONDS <= 3600:
    raise ImproperlyConfigured("TASKHOSTER_METRICS_WRITE_SECONDS: a number of seconds, 0 to 3600")
TASKHOSTER_FSYNC = env.bool("TASKHOSTER_FSYNC", default=True)
# How durable writes are flushed: "syncfs" (one flush of the items' file system per batch and per
# round of concurrent operations) or "fsync" (each file and directory); README, "Flushing".
TASKHOSTER_FLUSH = env.str("TASKHOSTER_FLUSH", default=DEFAULT_FLUSH).strip().lower()
if TASKHOSTER_FLUSH not in FLUSH_MODES:
    raise ImproperlyConfigured(
        f"TASKHOSTER_FLUSH: {TASKHOSTER_FLUSH!r} is not one of {', '.join(FLUSH_MODES)}"
    )
TASKHOSTER_LOG_RETAIN_DAYS = _env_integer("TASKHOSTER_LOG_RETAIN_DAYS", default=21)
# Queues whose directories each process keeps open when idle (six descriptors each).
TASKHOSTER_OPEN_QUEUES = _env_integer("TASKHOSTER_OPEN_QUEUES", default=128)

# --- the API ------------------------------------------------------------------------------
# A request body larger than this answers 413 before it is parsed: the largest maxItemBytes a
# queue may have (16 MiB) plus room for the worker's envelope around a result.
TASKHOSTER_MAX_BODY_BYTES = _env_integer(
    "TASKHOSTER_MAX_BODY_BYTES", default=16 * 1024 * 1024 + 65536
)
# Each server process remembers a token, a queue's settings and a caller's roles this long
# (queues/api/memo.py): the bound within which a revocation reaches every process. 0: off.
TASKHOSTER_API_MEMO_SECONDS = _env_number("TASKHOSTER_API_MEMO_SECONDS", default=2.0)
# How many waiting claims and waiting reads one server process holds at once; past that they
# answer at once, so threads stay free for other requests (queues/api/held_threads.py). The default
# leaves 8 of gunicorn's threads per process (TASKHOSTER_WEB_THREADS, gunicorn.conf.py).
TASKHOSTER_MAX_WAITING = _env_integer(
    "TASKHOSTER_MAX_WAITING", default=max(_env_integer("TASKHOSTER_WEB_THREADS", default=64) - 8, 1)
)
# How many of those an event stream may hold (queues/api/held_threads.py): half, by default, so
# waiting claims keep the other half however many monitors connect.
TASKHOSTER_MAX_STREAMS = _env_integer(
    "TASKHOSTER_MAX_STREAMS", default=max(TASKHOSTER_MAX_WAITING // 2, 1)
)
# An idle event stream gets a comment line this often, so proxies do not close it.
TASKHOSTER_SSE_KEEPALIVE_SECONDS = _env_number("TASKHOSTER_SSE_KEEPALIVE_SECONDS", default=15.0)

# --- failure notifications -----------------------------------------------------------------
# Webhooks may call loopback and private addresses only when this is set (a receiver on the
# same network); otherwise such a URL is refused when saved and again before every call.
TASKHOSTER_WEBHOOK_ALLOW_PRIVATE = env.bool("TASKHOSTER_WEBHOOK_ALLOW_PRIVATE", default=False)
# One call ends by its deadline, connect to last byte, and a pass's calls end within the pass's
# seconds, so slow receivers cannot hold up the sweep loop's timeouts and leases for longer.
TASKHOSTER_WEBHOOK_DEADLINE_SECONDS = _env_number(
    "TASKHOSTER_WEBHOOK_DEADLINE_SECONDS", default=10.0
)
TASKHOSTER_WEBHOOK_PASS_SECONDS = _env_number("TASKHOSTER_WEBHOOK_PASS_SECONDS", default=20.0)

# --- applications -------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "queues",
    "tasklogs",
    "schedules",
    "webhooks",
    "axes",
]

MIDDLEWARE = [
    "queues.metrics.middleware.RequestFigures",  # first: a request's time includes the rest
    "django.middleware.security.SecurityMiddleware",
    "queues.web.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Django's MessageMiddleware, its storage built only when a view uses messages.
    "queues.web.messages_middleware.LazyMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # turns a login lockout into the form's answer
]

ROOT_URLCONF = "taskhoster_site.urls"
WSGI_APPLICATION = "taskhoster_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -----------------------------------------------------------------------------
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'taskhoster.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the ingester write while console pages read; the busy timeout absorbs the
    # short write locks of concurrent processes instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The database of the queues whose store is PostgreSQL when the site's own database is not
# PostgreSQL (queues/stores/pg_location.py); unset and on SQLite, no queue may choose that store.
TASKHOSTER_PG_STORE_URL = env.str("TASKHOSTER_PG_STORE_URL", default="")
# The PostgreSQL schema of that store's tables (th_tasks, th_payloads...): public by default.
TASKHOSTER_PG_STORE_SCHEMA = env.str("TASKHOSTER_PG_STORE_SCHEMA", default="public")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
FORMAT_MODULE_PATH = ["taskhoster_site.formats"]  # the admin's dates as the console's
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = _project_path(env.str("STATIC_ROOT", default="var/static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the apps' static folders until collectstatic has run (dev, tests).
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "queues:home"
LOGOUT_REDIRECT_URL = "login"

# --- failed logins (django-axes) ----------------------------------------------------------
# Failures are counted in the database, which every gunicorn process shares, per user name and
# per address apart: past the limit, either is locked for the cool-off, said on the form
# (queues/web/login_throttle.py). API tokens do not log in, so this never touches them.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = _env_integer("TASKHOSTER_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = dt.timedelta(
    minutes=_env_number("TASKHOSTER_LOGIN_LOCKOUT_MINUTES", default=15)
)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "queues.web.login_throttle.locked_out"
AXES_DISABLE_ACCESS_LOG = True  # the successful logins: nothing here reads them
AXES_VERBOSE = False  # no banner in every command's output; lockouts are still logged
if env.bool("TASKHOSTER_BEHIND_PROXY", default=False):
    # every client would be the proxy's address, and ten failures would lock everyone out
    AXES_CLIENT_IP_CALLABLE = "queues.web.login_throttle.forwarded_address"

# --- security -----------------------------------------------------------------------------
# Behind TLS (production) every cookie is secure and browsers are told to stay on HTTPS.
# TASKHOSTER_HTTPS defaults to "not DEBUG"; a plain-HTTP production install must say so.
HTTPS = env.bool("TASKHOSTER_HTTPS", default=not DEBUG)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = _env_integer("SECURE_HSTS_SECONDS", default=31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
if env.bool("TASKHOSTER_BEHIND_PROXY", default=False):
    # Only when a proxy that strips this header from clients terminates TLS in front of us.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'; object-src 'none'"
)
SILENCED_SYSTEM_CHECKS = [
    # W021: HSTS preload is a commitment the operator makes for the whole domain at
    # hstspreload.org; it is offered as SECURE_HSTS_PRELOAD=1 and is not ours to make.
    "security.W021",
]

# --- REST framework -----------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Bearer first: its WWW-Authenticate header is what makes DRF answer 401, not 403.
    # Sessions (with DRF's CSRF check) serve people using the browsable API.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "queues.api.authentication.BearerAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Per-queue roles are checked by queues.api.context once the queue is known.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["queues.api.parsers.JSONParser"],
    # DRF's negotiation, answering the common `Accept: application/json` without parsing it.
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "queues.api.negotiation.JsonFirstNegotiation",
    "DEFAULT_RENDERER_CLASSES": [
        "queues.api.parsers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "queues.api.errors.exception_handler",
}
from queues.api.docs import DESCRIPTION as API_DESCRIPTION  # noqa: E402 (plain text, no Django)

SPECTACULAR_SETTINGS = {
    "TITLE": "taskhoster API",
    # How to get a token, epoch milliseconds, a task's life, the way back to the console; and
    # real example bodies instead of Swagger's made-up ones (queues/api/docs.py).
    "DESCRIPTION": API_DESCRIPTION,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "queues.api.docs.add_examples",
    ],
    "VERSION": "1",
    # one field name, two choice sets: what a post may ask, and what a status view can show
    "ENUM_NAME_OVERRIDES": {
        "OnDependencyFailureEnum": ["fail", "cancel"],
        "OnDependencyFailureShownEnum": ["cancel"],
    },
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Swagger UI would otherwise send the schema to validator.swagger.io: the docs stay offline.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "filters": {"axes_lockouts": {"()": "queues.web.login_log.LockoutsOnly"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # Every 4xx answer already has its access line; Django's "Forbidden:"/"Not Found:" beside
    # it says nothing more. A 5xx (ERROR, with its traceback) is still logged.
    "loggers": {
        "django.request": {"level": env.str("REQUEST_LOG_LEVEL", default="ERROR")},
        # django-axes says up to four lines for every login (its handler run, the success, the
        # failures it reset, each failure it counted): a login writes at most its lockout's line.
        "axes": {"level": "WARNING"},
        "axes.handlers.database": {"level": "WARNING", "filters": ["axes_lockouts"]},
    },
}
