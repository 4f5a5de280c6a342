"""A Jepsen-style history check of the sharded client under faults.

Several client processes run random operations against real servers while a nemesis injects
faults; every operation is recorded with its invocation and completion time and its outcome, and
the merged history is checked per key (Kingsbury, "Jepsen" analyses, jepsen.io; the register
model of Knossos). See ``run.py`` for one run, ``checker.py`` for the rules and ``cases.py`` for
which fault kinds run in CI.
"""
