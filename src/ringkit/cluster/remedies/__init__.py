"""Remedies for a hot key that replication alone does not cure: split counters, the near cache."""
