"""What the web UI's views and templates share: htmx responses, chart geometry, durations, rows."""
