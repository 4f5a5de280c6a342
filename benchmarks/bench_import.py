"""How long `import ringkit` takes next to `import numpy`, each in a fresh interpreter.

`import ringkit` should load the ring core only, so that it costs at most numpy plus
30 ms. Every repeat starts a new `python -c "import …"` for each contender, interleaved
(bare, numpy, ringkit; bare, numpy, ringkit; …) so that a noisy neighbour slows all alike. The
bare interpreter's start-up is reported too, so the import cost is the difference. Run by hand:
``python benchmarks/bench_import.py [repeats]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CONTENDERS = {
    "python -c pass": "pass",
    "import numpy": "import numpy",
    "import ringkit": "import ringkit",
}


def _run_once(code: str, pycache: str) -> float:
    # An installed package has its bytecode compiled: let the warm-up write it (to a scratch
    # prefix, so the checkout stays clean) even where PYTHONDONTWRITEBYTECODE is set, or every
    # run would time the compiler instead of the imports.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": str(SRC), "PYTHONPYCACHEPREFIX": pycache}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    return time.perf_counter() - start


def main(repeats: int = 21) -> None:
    """Time every contender `repeats` times, interleaved, after one warm-up each."""
    pycache = tempfile.mkdtemp(prefix="ringkit-bench-import-")
    for code in CONTENDERS.values():
        _run_once(code, pycache)  # warm the OS file cache and write the .pyc files
    samples: dict[str, list[float]] = {label: [] for label in CONTENDERS}
    for _ in range(repeats):
        for label, code in CONTENDERS.items():
            samples[label].append(_run_once(code, pycache))
    print(f"{repeats} fresh interpreters each, interleaved; wall time per process")
    print(f"{'contender':<18}{'min ms':>9}{'median ms':>11}{'max ms':>9}")
    for label, times in samples.items():
        ms = [t * 1000 for t in times]
        print(f"{label:<18}{min(ms):>9.1f}{statistics.median(ms):>11.1f}{max(ms):>9.1f}")
    numpy_ms = statistics.median(samples["import numpy"]) * 1000
    ringkit_ms = statistics.median(samples["import ringkit"]) * 1000
    print(f"ringkit - numpy (medians): {ringkit_ms - numpy_ms:+.1f} ms (target <= +30 ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
