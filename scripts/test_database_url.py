"""Print the database URL `make test` should use: DATABASE_URL, a local PostgreSQL, or nothing."""

from __future__ import annotations

import os
import sys

LOCAL = "postgres://postgres@127.0.0.1:5432/postgres"


def main() -> int:
    if os.environ.get("DATABASE_URL"):
        print(os.environ["DATABASE_URL"])
        return 0
    try:
        # Without psycopg installed there is no PostgreSQL to find: `make test` uses SQLite.
        import psycopg  # noqa: PLC0415

        with psycopg.connect(
            "host=127.0.0.1 port=5432 user=postgres dbname=postgres", connect_timeout=3
        ):
            pass
    except Exception as exc:  # noqa: BLE001 — any failure means "no local PostgreSQL"
        print(f"no PostgreSQL at 127.0.0.1:5432 ({exc.__class__.__name__})", file=sys.stderr)
        return 0
    print(LOCAL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
