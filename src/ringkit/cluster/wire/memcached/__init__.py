"""memcached: its text protocol (requests, reply framing), its transports and its operations."""
