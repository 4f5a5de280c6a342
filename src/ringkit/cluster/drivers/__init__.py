"""Drivers: the steps the client core speaks, and the sync and async runners that perform them."""
