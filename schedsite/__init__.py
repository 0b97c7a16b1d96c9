"""schedsite: a test-lab scheduler."""
