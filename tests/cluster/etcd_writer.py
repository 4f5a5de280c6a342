"""A cache writer in its own process, for tests/cluster/views/test_etcd_processes.py.

Usage: ``python -m tests.cluster.etcd_writer ETCD_URL SERVERS_JSON NUMBER LOG STOP_FILE``.
Writes ``w{NUMBER}:k{i % KEYS}`` = i for i = 0, 1, 2, … through a ShardedClient whose view
store is etcd, and appends ``KEY VALUE`` to LOG after each acknowledged write (one ``write``
per line, the file opened for appending, so a line is whole or absent). Stops when STOP_FILE
exists, then appends ``epoch N`` (the epoch it routes by). An error is appended as
``error …`` and ends the process with status 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ringkit import HashRing
from ringkit.cluster import ShardedClient

KEYS = 150


def main(etcd_url: str, servers_json: str, number: int, log: str, stop_file: str) -> int:
    servers = json.loads(servers_json)
    client = ShardedClient(HashRing(list(servers)), servers, view_store=etcd_url)
    handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stop = Path(stop_file)
    i = 0
    try:
        while not stop.exists():
            key = f"w{number}:k{i % KEYS}"
            client.set(key, i)
            os.write(handle, f"{key} {i}\n".encode())
            i += 1
        os.write(handle, f"epoch {client.epoch}\n".encode())
        return 0
    except Exception as error:  # reported to the test through the log
        os.write(handle, f"error {type(error).__name__}: {error}\n".encode())
        return 1
    finally:
        client.close()
        os.close(handle)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]))
