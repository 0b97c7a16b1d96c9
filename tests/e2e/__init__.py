"""End-to-end tests with real processes."""
