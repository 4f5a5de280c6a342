"""The cache client's core: routing, servers and their health, reads, writes, the view tracker.

Each decision is a sans-I/O generator (see :mod:`ringkit.cluster.drivers.steps`); nothing here
opens a connection.
"""
