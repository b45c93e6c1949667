"""``python -m properties.bench``: see properties/bench/cli.py."""

import sys

from properties.bench.cli import main

sys.exit(main())
