"""Template tags for the hosts and workers tables."""
