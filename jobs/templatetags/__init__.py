"""Template tags and filters for the schedsite web UI."""
