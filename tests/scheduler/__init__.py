"""Tests of the pure scheduling core."""
