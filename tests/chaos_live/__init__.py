"""The ownership history checker of the live ring: member processes, a nemesis, a checker.

``test_chaos_live.py`` runs one short case in the normal suite; ``make chaos-live`` runs the
long seeded runs (``python -m tests.chaos_live``).
"""
