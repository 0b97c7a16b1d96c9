"""Settings for schedsite, read from the environment (see README "Configuration")."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from schedsite.booleans import FALSE_WORDS, TRUE_WORDS, parse_bool

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    parsed = parse_bool(value)
    if parsed is None:
        # A typo such as DEBUG=ture must not quietly mean False (or True).
        words = ", ".join(sorted(TRUE_WORDS | FALSE_WORDS))
        raise ImproperlyConfigured(f"{name} must be one of {words}; got {value!r}")
    return parsed


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set in the environment when DEBUG is off. Generate one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`, or set DEBUG=1 "
            "for development (see docs/deployment.md)."
        )
    SECRET_KEY = "insecure-development-key-only-for-DEBUG"

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "django_htmx",
    "axes",
    "csp",
    "hosts",
    "jobs",
    "notifications",
    "stats",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "schedsite.middleware.ThrottleMiddleware",
    # A deadlock that outlived its service's retries: a 503 with Retry-After, not a 500.
    "schedsite.middleware.BusyDatabaseMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "web.urls"
WSGI_APPLICATION = "schedsite.wsgi.application"
ASGI_APPLICATION = "schedsite.asgi.application"

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

# Database: DATABASE_URL, defaulting to a SQLite file next to manage.py (the embedded mode).
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE takes the write lock at BEGIN, so two ticks (or a tick and a write) serialize
    # instead of failing with "database is locked" on lock upgrade; WAL lets readers go on.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env_bool("STATIC_MANIFEST", not DEBUG)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# Behind HTTPS in production (see docs/deployment.md). These hold whatever SECURE_COOKIES says:
# the session cookie is never readable from JavaScript, and no page may be framed (clickjacking).
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = SECURE_COOKIES
CSRF_COOKIE_SECURE = SECURE_COOKIES
if SECURE_COOKIES:
    # The TLS-terminating proxy must set X-Forwarded-Proto (and strip it from clients).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    # The preload flag alone does nothing until the domain is submitted to hstspreload.org.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)

# /metrics: staff (session or API token), or `Authorization: Bearer $METRICS_TOKEN` when set.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")

# Content-Security-Policy (django-csp): scripts and styles only from the site's own static
# files. No inline script, style element or style attribute runs (docs/security.md#headers).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# --- caches, login lockout and throttles (docs/security.md#throttles-and-lockout) --------------
# One cache every web process shares, so a limit holds however many gunicorn workers there
# are: Redis when REDIS_URL is set, else a table in the database (made by `migrate`).
if os.environ.get("REDIS_URL"):
    CACHES = {
        "default": {
            # Django's, with one Redis client per pool, not per operation (schedsite/cache.py).
            "BACKEND": "schedsite.cache.RedisCache",
            "LOCATION": os.environ["REDIS_URL"],
        }
    }
else:
    CACHES = {
        "default": {
            # Django's, with a set in one statement on PostgreSQL (schedsite/cache.py).
            "BACKEND": "schedsite.cache.DatabaseCache",
            "LOCATION": "schedsite_cache",
            # Past MAX_ENTRIES Django deletes a third of the rows, live counts included; the
            # default 300 is fewer than a busy lab's users, runners and addresses.
            "OPTIONS": {"MAX_ENTRIES": env_int("CACHE_MAX_ENTRIES", 20000)},
        }
    }

# How often expired cache rows are deleted (schedsite/cache.py culls on a schedule, not inline).
CACHE_CULL_MINUTES = env_int("CACHE_CULL_MINUTES", 15)

# How many proxies in front of gunicorn set X-Forwarded-For (0: the socket's address is the
# client's). Throttles and the login lockout both count per client address.
NUM_PROXIES = env_int("NUM_PROXIES", 0)

# django-axes: a username that fails AXES_FAILURE_LIMIT times from one address is refused for
# AXES_COOLOFF_MINUTES, on every login: the UI's, the admin's and POST /api/token/. Per
# (username, address) pair only: a stranger typing your username locks you out from their
# address, never from yours; LoginThrottle bounds how many usernames one address tries.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "schedsite.throttles.client_ip"
AXES_LOCKOUT_CALLABLE = "schedsite.throttles.lockout_response"
AXES_VERBOSE = False  # no banner at every start; failures are still logged


def env_rate(name: str, default: str) -> str:
    """A throttle rate such as `60/min` (per s, min, hour or day)."""
    value = os.environ.get(name, "").strip() or default
    if not re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(
            f"{name} must be a rate such as 60/min (per s, min, hour or day), got {value!r}"
        )
    return value


THROTTLE_RATES = {
    "anon": env_rate("THROTTLE_ANON", "60/min"),  # per address, without credentials
    "login": env_rate("THROTTLE_LOGIN", "20/min"),  # per address: token endpoint, login forms
    "read": env_rate("THROTTLE_READ", "600/min"),  # per user
    "write": env_rate("THROTTLE_WRITE", "120/min"),  # per user
    # Per runner account. One runner may heartbeat thousands of leases; per second, so the
    # counted window stays short (DRF keeps one timestamp per request in it).
    "runner": env_rate("THROTTLE_RUNNER", "200/s"),
    # /accounts/password_reset/ sends a mail per POST: per address, and per email asked for.
    "password_reset": env_rate("THROTTLE_PASSWORD_RESET", "10/hour"),
    "password_reset_email": env_rate("THROTTLE_PASSWORD_RESET_EMAIL", "3/hour"),
}

# --- schedsite ------------------------------------------------------------------------------
LEASE_TTL = env_int("LEASE_TTL", 600)  # seconds a lease lives without a heartbeat
WORKER_OFFLINE_TIMEOUT = env_int("WORKER_OFFLINE_TIMEOUT", 120)  # seconds since last heartbeat
JOB_DEFAULT_TIMEOUT = env_int("JOB_DEFAULT_TIMEOUT", 3600)  # seconds a job may run
TICK_HISTORY = env_int("TICK_HISTORY", 2000)  # SchedulerTick rows kept
# The scheduler keeps the lab it read between ticks and re-reads only the rows the change log
# names; it reads the whole lab again after this many ticks (docs/performance.md).
SCHEDULER_WHOLE_READ_EVERY = env_int("SCHEDULER_WHOLE_READ_EVERY", 500)
TICK_INTERVAL_MINUTES = env_int("TICK_INTERVAL_MINUTES", 1)  # the safety-net schedule
# A tick request still pending after this long was lost with its cluster: the next one resends it.
TICK_REQUEST_STALE_SECONDS = env_int("TICK_REQUEST_STALE_SECONDS", 5)
# A requested tick starts at least this long after the last one ended (0: at once); requests of
# the meantime ride along, which bounds the scheduler's CPU share (docs/scheduling.md#triggers).
TICK_MIN_GAP_MS = env_int("TICK_MIN_GAP_MS", 250)
# How long a web process may answer a runner's token from memory (schedsite.api_authentication,
# docs/security.md#api-tokens): a revoked runner token can work on in another process this long.
RUNNER_TOKEN_CACHE_SECONDS = env_int("RUNNER_TOKEN_CACHE_SECONDS", 10)
# Lab health and recovery (docs/health.md#settings): backoffs in seconds, 0 = the next tick.
RETRY_BACKOFF = env_int("RETRY_BACKOFF", 30)  # doubles per attempt, at most RETRY_BACKOFF_MAX
RETRY_BACKOFF_MAX = 600
REPAIR_BACKOFF = env_int("REPAIR_BACKOFF", 60)  # doubles per failed repair
REPAIR_MAX_ATTEMPTS = env_int("REPAIR_MAX_ATTEMPTS", 3)  # failed repairs in a row → repair_failed
# A repair_failed host's automatic repair comes this long after; doubles per failed round, at
# most REPAIR_FAILED_RETRY_MAX; 0 = none (staff press Repair now).
REPAIR_FAILED_RETRY_SECONDS = env_int("REPAIR_FAILED_RETRY_SECONDS", 4 * 3600)
REPAIR_FAILED_RETRY_MAX = 48 * 3600
# Sooner when queued test jobs that fit the host have waited this long: the round comes this
# long after the give-up instead, doubling per failed round too; 0 = no sooner round.
REPAIR_FAILED_DEMAND_SECONDS = env_int("REPAIR_FAILED_DEMAND_SECONDS", 1800)
HOST_FAILURE_STREAK = env_int("HOST_FAILURE_STREAK", 3)  # failed tests in a row → needs_repair
# The pool balancer's periodic run (docs/health.md#pool-targets); every tick runs it too.
POOL_BALANCE_MINUTES = env_int("POOL_BALANCE_MINUTES", 5)
MAINTENANCE_TIMEOUT = env_int("MAINTENANCE_TIMEOUT", 1800)  # seconds a verify or repair may run
MAX_JOBS_PER_SUITE = env_int("MAX_JOBS_PER_SUITE", 5000)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 5 * 1024 * 1024)  # 413 above
# Enough fields for the submit form's 500 job rows (three fields each), so a bigger form is
# refused by the form's own clear message rather than Django's bare "Bad Request".
DATA_UPLOAD_MAX_NUMBER_FIELDS = env_int("DATA_UPLOAD_MAX_NUMBER_FIELDS", 10000)
UI_REFRESH_SECONDS = env_int("UI_REFRESH_SECONDS", 5)  # how often UI lists poll for changes
MAX_RESERVATION_SECONDS = env_int("MAX_RESERVATION_SECONDS", 7 * 24 * 3600)
# A tester's own reservations (docs/api.md#reservations); lab staff are held only to the above.
RESERVATION_HOSTS_PER_TESTER = env_int("RESERVATION_HOSTS_PER_TESTER", 2)  # held or waiting
RESERVATION_TESTER_MAX_SECONDS = env_int("RESERVATION_TESTER_MAX_SECONDS", 8 * 3600)
# What a tester may submit (docs/security.md#submission-limits); lab staff are not limited, and
# a group can be granted more in the admin (Submit limits).
SUBMIT_MAX_PRIORITY = env_int("SUBMIT_MAX_PRIORITY", 70)  # cq; above it is staff's
SUBMIT_MAX_MIN_DUTS = env_int("SUBMIT_MAX_MIN_DUTS", 4)
SUBMIT_MAX_QUEUED_JOBS = env_int("SUBMIT_MAX_QUEUED_JOBS", 2000)  # per user
SUBMIT_RATE_PER_MINUTE = env_int("SUBMIT_RATE_PER_MINUTE", 30)  # suites and standalone jobs

# --- notifications (docs/notifications.md#settings) -------------------------------------------
# The site's address as people reach it, for the links in e-mails and webhook payloads.
SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000")
# E-mail through Django's backends: the console in development (DEBUG), SMTP otherwise.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "schedsite@localhost")
NOTIFY_WEBHOOK_TIMEOUT = env_int("NOTIFY_WEBHOOK_TIMEOUT", 5)  # seconds per POST
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 5)  # then the delivery is failed
NOTIFY_RETRY_BACKOFF = env_int("NOTIFY_RETRY_BACKOFF", 60)  # seconds, doubling per attempt
NOTIFY_SWEEP_MINUTES = env_int("NOTIFY_SWEEP_MINUTES", 1)  # retries and offline workers
# The lab's history (docs/performance.md#lab-history): minute rows kept this many hours, hour
# rows this many days.
STATS_MINUTES_KEPT_HOURS = env_int("STATS_MINUTES_KEPT_HOURS", 48)
STATS_HOURS_KEPT_DAYS = env_int("STATS_HOURS_KEPT_DAYS", 400)
NOTIFY_SWEEP_BATCH = env_int("NOTIFY_SWEEP_BATCH", 500)  # deliveries one sweep sends at most
# A worker counts as newly offline if it went within this many seconds before the sweep.
NOTIFY_OFFLINE_LOOKBACK = env_int("NOTIFY_OFFLINE_LOOKBACK", 3600)
# Webhooks must be https; plain http to a loopback address only when this is on (tests).
NOTIFY_WEBHOOK_ALLOW_LOOPBACK_HTTP = env_bool("NOTIFY_WEBHOOK_ALLOW_LOOPBACK_HTTP", False)

# --- django-q2 ------------------------------------------------------------------------------
# Sync mode is read at import time, so it is driven from the environment (Q_SYNC=1 in tests
# that want the tick to run inline).
Q_CLUSTER = {
    # Every web and qcluster process of one site must share the name: it is the queue's key in
    # Redis and the salt that signs tasks. Change it only to run two sites on one Redis.
    "name": os.environ.get("Q_NAME", "schedsite"),
    "workers": env_int("Q_WORKERS", 2),
    "timeout": env_int("Q_TIMEOUT", 60),
    "retry": env_int("Q_RETRY", 120),  # must exceed timeout, or a slow task runs twice
    "catch_up": False,
    "max_attempts": 1,
    "save_limit": env_int("Q_SAVE_LIMIT", 200),
    "ack_failures": True,
    "sync": env_bool("Q_SYNC", False),
    "poll": 0.2,
    "label": "Task queue",
}
if os.environ.get("REDIS_URL"):
    Q_CLUSTER["redis"] = os.environ["REDIS_URL"]
else:
    Q_CLUSTER["orm"] = "default"

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "schedsite.api_authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with a JSON parser that refuses a body nested too deeply (a 400, not a 500).
    "DEFAULT_PARSER_CLASSES": [
        "schedsite.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "schedsite.api_pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "schedsite.api_schema.AutoSchema",
    # Service errors -> 400/403/409, database races -> 409: never a 500 for client input.
    "EXCEPTION_HANDLER": "schedsite.api_exceptions.exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # 429 with Retry-After past a rate (docs/security.md#throttles-and-lockout).
    "DEFAULT_THROTTLE_CLASSES": [
        "schedsite.throttles.AnonThrottle",
        "schedsite.throttles.ReadThrottle",
        "schedsite.throttles.WriteThrottle",
        "schedsite.throttles.RunnerThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": THROTTLE_RATES,
    "NUM_PROXIES": NUM_PROXIES,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "schedsite API",
    "DESCRIPTION": (
        "Lab inventory, suites, jobs, leases and the runner protocol. Authenticate with "
        "`Authorization: Token <key>` (POST /api/token/ or `manage.py drf_create_token USER`). "
        "Hosts are addressed by hostname, workers by name, everything else by id. "
        "See docs/api.md for the roles and the runner protocol."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # Swagger UI from the installed sidecar package, never a CDN (labs are often offline).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Separate request and response components, so read-only fields are not asked for.
    "COMPONENT_SPLIT_REQUEST": True,
    "SORT_OPERATIONS": False,
    "ENUM_NAME_OVERRIDES": {
        "HostStatusEnum": "hosts.choices.HostStatus",
        "JobStatusEnum": "jobs.choices.JobStatus",
        "JobKindEnum": "jobs.choices.JobKind",
        "SuiteStatusEnum": "jobs.choices.SuiteStatus",
        "ReleaseReasonEnum": "jobs.choices.ReleaseReason",
        "EventKindEnum": "hosts.choices.EventKind",
        "SchedulerOrderingEnum": "jobs.choices.SchedulerOrdering",
        "HostChoiceEnum": "jobs.choices.HostChoice",
        "WaitCodeEnum": "jobs.scheduling.planner.types.WAIT_CODES",
    },
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True, "displayOperationId": False},
}

# LOG_FORMAT=json writes one JSON object per line, with every `extra=` field of the call (the
# tick's log line carries tick_id, leased, expired, …), for log shippers; the default is text.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower()
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be 'plain' or 'json', got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "schedsite.logformat.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
