"""Suites, jobs, leases and the scheduler."""
