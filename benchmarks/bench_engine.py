"""Training engine vs Opacus vs the matmul rate: ``subaudit bench`` as a script.

    python benchmarks/bench_engine.py [--quick] [--json]
"""

import sys

from subaudit.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
