"""CUDA graph capture as a serving engine does it: in a fresh process, ``kernel.routing.prepare(renormalize)``,
then one CUDA graph holding a route of every launch shape (b = 1..8, without metadata and with it at tiles
that select each kernel of KERNELS, two local expert ranges), replayed on new logits and compared bit for bit
with the NumPy model; capture must compile nothing (compile_routing, compile_variant and cute.compile are
counted from after prepare()), so a prepare() that missed a variant fails here, not in an engine. First each
shape in a graph of its own, its one kernel node's grid and block read back against the documented launch
(properties/contract/launches.py): outputs do not show a CTA to spare or the general kernel launched where the
one-warp-per-row kernel was meant."""

import json
import os
import subprocess
import sys

import pytest

from common.provenance import REPO_ROOT

pytestmark = pytest.mark.gpu

TIMEOUT_S = 900
TILES = (1, 2, 3, 8, 256)  # b = 1: tokens 1 at any tile; b = 2: tokens 0 at tile 1, 2 from tile 2; else 0
LOCAL = ((0, 256), (3, 200))  # (local_expert_offset, num_local_experts)

# Run as ``python -c`` from the repository root: argv[1] is renormalize ("0" or "1"), argv[2] a JSON of
# (TILES, LOCAL). Prints one JSON line: the shapes captured, the rounds replayed, compiles during capture.
SCRIPT = r'''
import json
import sys

import numpy as np
import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TOKENS, TOP_K, metadata_size
from oracles import numpy_model as model
from properties.contract import launches
from properties.engine.poison import IDS_POISON, METADATA_POISON, METADATA_SLACK, WEIGHT_POISON_BITS

renormalize = sys.argv[1] == "1"
tiles, local = json.loads(sys.argv[2])
scale = 2.5
device = torch.device("cuda", torch.cuda.current_device())
routing.prepare(renormalize)

compiles = []


def counted(name, fn):
    def wrapper(*args, **kwargs):
        compiles.append(name)
        return fn(*args, **kwargs)
    return wrapper


routing.compile_routing = counted("compile_routing", routing.compile_routing)
routing.compile_variant = counted("compile_variant", routing.compile_variant)
routing.cute.compile = counted("cute.compile", routing.cute.compile)
launched_otherwise = launches.breaches(renormalize)  # each shape in a graph of its own, its kernel node read back

bias = torch.from_numpy((np.random.default_rng(7).standard_normal(EXPERTS) * 0.1).astype(np.float32)).to(device)
shapes = []
for b in range(1, MAX_TOKENS + 1):
    shapes.append((b, None))
    shapes += [(b, (tile, offset, count)) for tile in tiles for offset, count in local]
calls = []
for b, request in shapes:
    logits = torch.zeros((b, EXPERTS), dtype=torch.float32, device=device)
    ids = torch.empty((b, TOP_K), dtype=torch.int32, device=device)
    weights = torch.empty((b, TOP_K), dtype=torch.float32, device=device)
    metadata = None
    if request is not None:
        metadata = torch.empty(metadata_size(request[0]) + METADATA_SLACK, dtype=torch.int32, device=device)
    calls.append((b, request, logits, ids, weights, metadata))

torch.cuda.synchronize(device)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    for b, request, logits, ids, weights, metadata in calls:
        if request is None:
            routing.route(logits, bias, ids, weights, scale, renormalize)
        else:
            tile, offset, count = request
            routing.route(logits, bias, ids, weights, scale, renormalize, metadata, offset, count, tile)
captured_compiles = list(compiles)

rng = np.random.default_rng(11)
rounds = [lambda b: rng.standard_normal((b, EXPERTS)).astype(np.float32),
          lambda b: np.zeros((b, EXPERTS), np.float32),  # every score equal: the ties
          lambda b: (rng.integers(-2, 3, (b, EXPERTS)) * 0.5).astype(np.float32)]  # many ties
bias_host = bias.cpu().numpy()
for n, draw in enumerate(rounds):
    wanted = []
    for b, request, logits, ids, weights, metadata in calls:
        rows = draw(b)
        logits.copy_(torch.from_numpy(rows))
        ids.fill_(IDS_POISON)
        weights.view(torch.int32).fill_(WEIGHT_POISON_BITS)  # below 2**31: an int32 as it is
        if metadata is not None:
            metadata.fill_(METADATA_POISON)
        want_ids, want_weights = model.route(rows, bias_host, np.float32(scale), renormalize)
        want_meta = None
        if request is not None:
            tile, offset, count = request
            want_meta = np.concatenate([model.routing_metadata(want_ids, offset, count, tile, fill=METADATA_POISON),
                                        np.full(METADATA_SLACK, METADATA_POISON, np.int32)])
        wanted.append((want_ids, want_weights, want_meta))
    graph.replay()
    torch.cuda.synchronize(device)
    for (b, request, logits, ids, weights, metadata), (want_ids, want_weights, want_meta) in zip(calls, wanted):
        where = f"round {n}, b={b}, metadata {request}, renormalize {renormalize}"
        assert np.array_equal(ids.cpu().numpy(), want_ids), f"{where}: ids differ"
        assert np.array_equal(weights.cpu().numpy().view(np.uint32), want_weights.view(np.uint32)), \
            f"{where}: weights differ"
        if request is not None:
            assert np.array_equal(metadata.cpu().numpy(), want_meta), f"{where}: metadata differs"
print(json.dumps({"shapes": len(shapes), "rounds": len(rounds), "compiles_during_capture": captured_compiles,
                  "compiles_after_prepare": compiles, "launch_shapes": len(launches.shapes()),
                  "launched_otherwise": launched_otherwise}))
'''


@pytest.mark.long
@pytest.mark.parametrize("renormalize", (False, True), ids=("scaled", "renormalized"))
def test_every_launch_shape_captured_right_after_prepare_replays_the_models_bits(renormalize):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", SCRIPT, "1" if renormalize else "0", json.dumps([TILES, LOCAL])],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shapes"] == 8 * (1 + len(TILES) * len(LOCAL)) and result["rounds"] == 3
    assert result["compiles_during_capture"] == [] and result["compiles_after_prepare"] == [], result
    assert result["launch_shapes"] == 48 and result["launched_otherwise"] == [], \
        "\n".join(result["launched_otherwise"][:12])
