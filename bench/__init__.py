"""Benchmarks of schedsite: generated labs, the planner, the tick and submit-to-lease latency."""
