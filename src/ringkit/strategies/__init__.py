"""Placements other than the hash ring, one algorithm per module, each a ``Placement``."""
