"""Starting a process that a test stops with Ctrl-C (SIGINT).

A shell without job control starts its background commands with SIGINT ignored, and their
children inherit that, Python's included: it installs its KeyboardInterrupt handler only
where SIGINT was not ignored. (`make test &` in a script hung every Ctrl-C test for 60 s.) So
a test that sends SIGINT runs its child with Python's own handler first: it tests the command,
not how the suite was started.
"""

from __future__ import annotations

import sys

#: The first lines of a ``python -c`` script: SIGINT raises KeyboardInterrupt, as by default.
INTERRUPTIBLE = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"


def interruptible_ringkit(*argv: str) -> list[str]:
    """The command line of ``ringkit ARGV`` with SIGINT handled as Python does by default."""
    script = (
        INTERRUPTIBLE + "import sys\nfrom ringkit.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    return [sys.executable, "-c", script, *argv]
