"""REST API tests."""
