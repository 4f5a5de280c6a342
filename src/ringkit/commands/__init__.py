"""Subcommands of the ``ringkit`` command, one module each (see ``ringkit.cli``)."""
