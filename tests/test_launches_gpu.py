"""What route launches (properties/contract/launches.py), in a fresh process as an engine starts: after
prepare(), every call shape (b = 1..8, without metadata and with it at tiles on both sides of the b = 2
kernel's bound) captures into a CUDA graph as one kernel node with the documented grid and block. Outputs do
not show a CTA to spare or the general kernel launched where the one-warp-per-row kernel was meant; the nodes do.
"""

import json
import os
import subprocess
import sys

import pytest

from common.provenance import REPO_ROOT
from properties.contract import launches

pytestmark = pytest.mark.gpu

TIMEOUT_S = 600
SCRIPT = ("import json, sys; from properties.contract import launches; "
          "print(json.dumps({'renormalize': launches.breaches(sys.argv[1] == '1'), 'shapes': len(launches.shapes())}))")


@pytest.mark.parametrize("renormalize", (False, True), ids=("scaled", "renormalized"))
def test_every_shape_captures_after_prepare_as_the_documented_launch(renormalize):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", SCRIPT, "1" if renormalize else "0"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shapes"] == len(launches.shapes()) == 48
    assert result["renormalize"] == [], "\n".join(result["renormalize"][:12])
