"""Tiny calculator used by the billing service."""


def add(a, b):
    """Return the sum of a and b."""
    return int(a) + int(b)
