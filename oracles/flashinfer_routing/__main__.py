"""``python -m oracles.flashinfer_routing [--arch sm_90a ...] [--force]``: build the oracle's library."""

import sys

from oracles.flashinfer_routing.build import main

sys.exit(main())
