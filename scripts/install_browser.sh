#!/usr/bin/env bash
# Browser tests drive Debian's Chromium through Playwright; Playwright cannot download its own
# browser here, so install the distribution package when it is missing and we may.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "== installing Debian chromium for the browser tests"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "!! /usr/bin/chromium is missing and cannot be installed here (need root + apt-get)." >&2
  echo "!! Install Debian's 'chromium' package; the browser tests will fail without it." >&2
fi
