"""Rebalancing: the coordinator of a membership change, its options and report, and the contract.

The client reaches the coordinator only through :mod:`ringkit.cluster.rebalance.coordination`,
which :mod:`ringkit.cluster` wires to :class:`~ringkit.cluster.rebalance.coordinator.Rebalancer`.
"""
