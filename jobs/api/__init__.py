"""The REST API for suites, jobs, leases, the queue and the scheduler."""
