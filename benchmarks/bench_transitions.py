"""The cost of a member's transition log: ``owns`` and ``owns_many`` with the log off and on.

    python benchmarks/bench_transitions.py            # 2,000 keys, 3 members, memory://
    python benchmarks/bench_transitions.py --quick    # fewer repeats

Both handoff modes. With the log on, each call decides under the log's lock, reads
CLOCK_MONOTONIC twice and looks the key up in the log's table of open intervals; nothing is
logged while the answers do not change (the steady state timed here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import ringkit.live
from _harness import Timing, print_table, time_interleaved
from ringkit.live import Member


def time_owns(plain: Member, logged: Member, keys: list[str], repeats: int) -> list[Timing]:
    """Time owns per key and owns_many for a member without and one with the log."""
    return time_interleaved(
        {
            "owns, log off": lambda: [plain.owns(k) for k in keys],
            "owns, log on": lambda: [logged.owns(k) for k in keys],
            "owns_many, log off": lambda: plain.owns_many(keys),
            "owns_many, log on": lambda: logged.owns_many(keys),
        },
        len(keys),
        repeats=repeats,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    keys = [f"tenant-{i}" for i in range(args.keys)]
    repeats = 3 if args.quick else 9
    for handoff in ("default", "exclusive"):
        name = f"bench-transitions-{handoff}"
        with ringkit.live.connect(f"memory://{name}") as store:
            members = [store.join(f"w{i}", ttl_s=30, handoff=handoff) for i in range(3)]
            store.wait_for(lambda s: len(s.ring) == 3)
            plain, logged = members[0], members[1]
            logged.log_transitions()
            while not any(plain.owns_many(keys)) or not any(logged.owns_many(keys)):
                pass  # exclusive: until the others have released the joins' epochs

            timings = time_owns(plain, logged, keys, repeats)
            print_table(
                f"{handoff} mode, {len(keys)} keys, per key", timings, "owns, log off", "ns"
            )
            for member in members:
                member.leave()


if __name__ == "__main__":
    main()
