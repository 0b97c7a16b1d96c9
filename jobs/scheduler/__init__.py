"""The scheduling core."""
