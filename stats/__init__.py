"""Lab statistics: host and test reliability over a range of time (docs/api.md#statistics)."""
