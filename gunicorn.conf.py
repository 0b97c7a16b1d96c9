"""gunicorn settings for the web process, read from the environment (see docs/deployment.md)."""

from __future__ import annotations

import multiprocessing
import os

import gunicorn.http.wsgi

wsgi_app = "schedsite.wsgi:application"

# gunicorn names itself in a Server header on every answer; scanners need no help telling
# which server this is (docs/security.md#headers). Its responses read this name when made.
gunicorn.http.wsgi.SERVER = "schedsite"

# Behind a TLS-terminating proxy on the same machine by default; 0.0.0.0:8000 in a container.
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
# WEB_CONCURRENCY is gunicorn's (and most platforms') own name for the process count.
workers = int(os.environ.get("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8)))
threads = int(os.environ.get("GUNICORN_THREADS", "1"))
# Requests are short (the tick runs in qcluster, not here): a request this slow is stuck.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
keepalive = 5
# Recycle workers now and then so a slow leak cannot grow without bound; jitter avoids all
# workers restarting at once.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "2000"))
max_requests_jitter = max_requests // 10

# Trust X-Forwarded-* only from the proxy (SECURE_PROXY_SSL_HEADER relies on it).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# Access and error logs on stdout/stderr, for the process supervisor or the journal.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-")
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s" user=%(u)s'

# No preload: each worker opens its own database connections after the fork.
preload_app = False
