"""The REST API for workers and hosts."""
