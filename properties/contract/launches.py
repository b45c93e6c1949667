"""What route launches, read back from CUDA graphs: after ``prepare()``, every call shape captures without a
refusal or a compile, as one kernel node whose grid and block are the launch the kernel documents
(kernel/routing.py's docstring), stated here on its own:

- without metadata, one CTA per four token rows (an SM's four schedulers), of four routing warps and one
  trigger warp: grid ceil(b / 4), block 160;
- with metadata, one CTA: a warp per row at b = 1, and at b = 2 with a tile of 2 or more, else eight warps
  (one per possible row): block 32 * b or 256.

Outputs equal to the model's do not show a launch with CTAs to spare (an extra CTA finds no row to route), a
second CTA writing the same metadata, or a general kernel where the one-warp-per-row kernel was meant; the graph
nodes do. Run in a fresh process: a process that launched every shape before ``prepare()`` hides a warm-up
that missed one.

And where route launches from: a call whose tensors are on a device other than the current one is launched
with the tensors' device made current (``torch.cuda.device``), the first call and a repeated one alike. One GPU
cannot make another device current, so torch's current-device query is made to answer another index and the
device route enters is recorded: on one GPU every launch works either way, and only this shows a launch made
from the wrong device.
"""

from unittest import mock

import torch

from kernel import routing
from kernel.layout import EXPERTS, MAX_TOKENS, TOP_K, WARP, metadata_size

ROWS_PER_PLAIN_CTA = 4
PLAIN_BLOCK = (ROWS_PER_PLAIN_CTA + 1) * WARP
METADATA_BLOCK = MAX_TOKENS * WARP
TILES = (1, 2, 3, 8, 256)  # both sides of the b = 2 kernel's tile bound, and the extremes


def documented_launch(b, tile_n=None):
    """((grid), (block)) of the launch route makes for ``b`` rows, with metadata at tile ``tile_n``."""
    if tile_n is None:
        return (-(-b // ROWS_PER_PLAIN_CTA), 1, 1), (PLAIN_BLOCK, 1, 1)
    one_warp_per_row = b == 1 or (b == 2 and tile_n >= 2)
    return (1, 1, 1), (b * WARP if one_warp_per_row else METADATA_BLOCK, 1, 1)


def shapes():
    """(b, tile_n or None) of every launch shape checked."""
    return [(b, tile) for b in range(1, MAX_TOKENS + 1) for tile in (None, *TILES)]


def kernel_nodes(graph):
    """((grid), (block)) of each kernel node of a captured ``torch.cuda.CUDAGraph`` made with keep_graph (the
    driver's view: the DSL launches library kernels, which the runtime's node query does not take)."""
    from cuda.bindings import driver

    def checked(result):
        error, *values = result
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"reading the captured graph: {error}")
        return values[0] if len(values) == 1 else values

    raw = driver.CUgraph(init_value=graph.raw_cuda_graph())
    _, count = checked(driver.cuGraphGetNodes(raw, 0))
    nodes, _ = checked(driver.cuGraphGetNodes(raw, count))
    launches = []
    for node in nodes:
        if checked(driver.cuGraphNodeGetType(node)) == driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL:
            p = checked(driver.cuGraphKernelNodeGetParams(node))
            launches.append(((p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ)))
    return launches


def _tensors(device, b, tile_n=None):
    """route's tensors for b zero rows: (logits, bias, ids, weights), then with ``tile_n`` the metadata request
    with every expert local."""
    tensors = (torch.zeros((b, EXPERTS), dtype=torch.float32, device=device),
               torch.zeros(EXPERTS, dtype=torch.float32, device=device),
               torch.empty((b, TOP_K), dtype=torch.int32, device=device),
               torch.empty((b, TOP_K), dtype=torch.float32, device=device))
    if tile_n is None:
        return tensors
    return tensors + (torch.empty(metadata_size(tile_n), dtype=torch.int32, device=device), 0, EXPERTS, tile_n)


def _captured(device, b, tile_n, renormalize):
    """The kernel nodes of one graph holding route on b rows (with metadata at ``tile_n``, every expert local)."""
    logits, bias, ids, weights, *request = _tensors(device, b, tile_n)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    try:
        with torch.cuda.graph(graph):
            routing.route(logits, bias, ids, weights, 1.0, renormalize, *request)
        return kernel_nodes(graph)
    finally:
        graph.reset()


def breaches(renormalize=True):
    """Lines for each shape whose capture after ``prepare(renormalize)`` fails, or whose kernel nodes are not the
    documented launch; empty when every shape launches as documented."""
    device = torch.device("cuda", torch.cuda.current_device())
    routing.prepare(renormalize)
    lines = []
    for b, tile_n in shapes():
        where = f"b={b} " + ("without metadata" if tile_n is None else f"tile_n={tile_n}")
        try:
            launches = _captured(device, b, tile_n, renormalize)
        except Exception as error:  # a refused or broken capture: prepare() left this shape's kernel unready
            lines.append(f"{where}: capture after prepare({renormalize}) failed: {type(error).__name__}: {error}")
            continue
        want = [documented_launch(b, tile_n)]
        if launches != want:
            lines.append(f"{where}: launched (grid, block) {launches}, documented {want}")
    return lines


DEVICE_CHECK_SCALE = 0.8125  # a scale no other check uses, so that the first call below is a first call


def device_breaches():
    """Lines for each call (first, repeated) on the current device's tensors that does not enter that device
    while torch reports another device current; empty when route launches from the tensors' device."""
    device = torch.device("cuda", torch.cuda.current_device())
    routing.prepare(True)
    logits, bias, ids, weights = _tensors(device, 1)
    entered, other = [], device.index + 1

    class Recorded(torch.cuda.device):
        def __enter__(self):
            entered.append(self.idx)
            return super().__enter__()

    lines = []
    with mock.patch.object(torch._C, "_cuda_getDevice", lambda: other), mock.patch.object(torch.cuda, "device",
                                                                                           Recorded):
        for call in ("first", "repeated"):
            entered.clear()
            routing.route(logits, bias, ids, weights, DEVICE_CHECK_SCALE, True)
            if entered != [device.index]:
                lines.append(f"a {call} call on cuda:{device.index} while cuda:{other} is current entered the "
                             f"devices {entered}, not the logits' device alone")
    torch.cuda.synchronize(device)
    return lines
