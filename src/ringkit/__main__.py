"""``python -m ringkit``: the ringkit command."""

from ringkit.cli import main

raise SystemExit(main())
