"""The site's wiring, above every app: the URL configurations (the UI, the API, /metrics)."""
