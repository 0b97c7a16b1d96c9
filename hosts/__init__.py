"""Lab inventory: workers, hosts, labels and the host audit trail."""
