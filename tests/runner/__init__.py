"""Reference runner tests: no server, no database."""
