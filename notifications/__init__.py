"""Notifications: e-mail and signed webhooks when suites finish, hosts fail repair, workers go."""
