"""Where the routing kernel's time goes: stage kernels, each the kernel cut after one phase, timed per launch
as the benchmark times the kernel (a CUDA graph of back-to-back PDL launches), beside the kernel without
metadata with and without its trigger warp.

    python -m properties.bench.breakdown --out FILE [--b 1 8 ...]   # a record with provenance (needs a GPU)
    python -m properties.bench.breakdown --table FILE                 # its README table (no GPU)

A stage's time less the previous stage's is what its phase adds to a launch (the phases overlap, so this is
what the launch pays for the phase, not the phase's latency alone). The stage kernels only time: a cut kernel
writes a folded value of its last phase into the ids (so that nothing is compiled away), which no check reads;
the kernel's own outputs are checked by the benchmark and the GPU tests.
"""

if __name__ == "__main__":  # Ctrl-C while the imports below load: one line, never a traceback
    from common.interrupts import at_start
    at_start("python -m properties.bench.breakdown")

import json
import sys
from pathlib import Path

import torch

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint32, const_expr
from cutlass.memory import SmemAllocator

from kernel import routing
from kernel.layout import EXPERTS, TOP_K, metadata_size
from common import interrupts
from properties.bench import record_cli
from properties.bench.cli import provenance
from properties.bench.problem import SCALE, inputs
from properties.bench.results_file import summarize
from properties.bench.timing import capture, error_line, time_graph

SCHEMA = "kernel.breakdown/1"
SCHEMA_FILE = Path(__file__).with_name("breakdown.schema.json")  # what --table reads of a record
TILE_N = 8
# (name, metadata, what one launch does): each stage adds one phase to the one before it.
STAGES = (
    ("floor", False, "griddepcontrol.wait, then each routing lane stores one id (the launch floor)"),
    ("loads", False, "+ the bias loads before the wait, the logits loads after it"),
    ("scores", False, "+ 8 sigmoids and bias adds, the order keys, the lane's sorting network"),
    ("top8", False, "+ the scores to shared memory, 8 rounds of warp argmax, the ids"),
    ("cute", False, "+ the weights: the kernel without metadata"),
    ("cute, no trigger warp", False, "the kernel without metadata, no trigger warp: a CTA of 4 rows triggers "
                                     "its dependents when its first warp ends"),
    ("routes", True, "the kernel with metadata up to the route words: zeroed route words and a barrier before "
                     "the wait, -1 rows of routes to other ranks' experts, shared atomics, a barrier and the "
                     "weights (the weights first from b = 5); no expert metadata"),
    ("no padding", True, "+ every expert's CTAs, permuted rows and route rows, without the padding rows"),
    ("cute_meta", True, "+ the padding rows: the kernel with metadata (at b = 1, and b = 2 with tiles of 2 or "
                        "more, route launches its b-warp kernels instead, which the bench times)"),
)
STAGE_NAMES = tuple(name for name, _, _ in STAGES)


class _Stage(routing.Routing):
    """The routing kernel cut after stage ``name`` (or whole, with or without the trigger warp)."""

    def __init__(self, name, metadata):
        super().__init__(metadata, True, 0)
        self.name = name
        self.block = routing.THREADS if metadata else routing.BLOCK_THREADS - (
            routing.WARP if name.endswith("no trigger warp") else 0)

    @cute.jit
    def launch_plain(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                     mWeights: cute.Tensor, scale: Float32, stream):
        kernel = self.kernel if self.name.startswith("cute") else self.cut_kernel
        kernel(mLogits, mBias, mIds, mWeights, scale, None, None, None, None, None).launch(
            grid=[routing.plain_ctas(mLogits.shape[0]), 1, 1], block=[self.block, 1, 1], stream=stream,
            use_pdl=True)

    @cute.jit
    def launch_metadata(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor,
                        mWeights: cute.Tensor, scale: Float32, mMeta: cute.Tensor, local_offset: Int32,
                        num_local: Int32, tile_n: Int32, cta_table: Int32, stream):
        self.kernel(mLogits, mBias, mIds, mWeights, scale, mMeta, local_offset, num_local, tile_n,
                    cta_table).launch(grid=[1, 1, 1], block=[self.block, 1, 1], stream=stream, use_pdl=True)

    @cute.kernel
    def cut_kernel(self, mLogits: cute.Tensor, mBias: cute.Tensor, mIds: cute.Tensor, mWeights: cute.Tensor,
                   scale: Float32, mMeta, local_offset, num_local, tile_n, cta_table):
        tid, _, _ = cute.arch.thread_idx()
        warp = tid // routing.WARP
        lane = tid % routing.WARP
        smem = SmemAllocator()
        sScores = smem.allocate_tensor(Float32, cute.make_layout(routing.WARPS * EXPERTS), byte_alignment=16)
        first = lane * routing.EXPERTS_PER_LANE
        row, routes = routing.plain_row(warp, mLogits.shape[0])
        if routes:
            if const_expr(self.name == "floor"):
                cute.arch.griddepcontrol_wait()
                mIds[row, lane % TOP_K] = lane
            else:
                bias = routing.load_lane(mBias.iterator.toint() + Int64(first * routing.WORD_BYTES))
                cute.arch.griddepcontrol_wait()
                if const_expr(self.name == "top8"):
                    routing.pick_row(mLogits, mIds, sScores, bias, row, lane)
                else:
                    logits = routing.load_lane((mLogits.iterator + cute.crd2idx((row, first),
                                                                                 mLogits.layout)).toint())
                    if const_expr(self.name == "loads"):
                        folded = Uint32(0)
                        for x in logits + bias:
                            folded = folded ^ x.bitcast(Uint32)
                        mIds[row, lane % TOP_K] = Int32(folded)
                    else:
                        scores = [routing.sigmoid(x) for x in logits]
                        corrected = [routing.add_f32(s, b) for s, b in zip(scores, bias)]
                        words = routing.sorted_words(corrected, sScores.iterator.toint())
                        mIds[row, lane % TOP_K] = Int32(Uint32(words[0] >> routing.KEY_SHIFT))
        cute.arch.griddepcontrol_launch_dependents()

    @cute.jit
    def write_expert_metadata(self, mMeta: cute.Tensor, sRoutes: cute.Tensor, sWarpCtas: cute.Tensor, e: Int32,
                              warp: Int32, tile_n: Int32, cta_table: Int32):
        if const_expr(self.name == "routes"):
            if e == 0:
                mMeta[routing.META_NUM_CTAS] = sRoutes[0]
        else:
            routing.Routing.write_expert_metadata(self, mMeta, sRoutes, sWarpCtas, e, warp, tile_n, cta_table)

    @cute.jit
    def write_route_metadata(self, mMeta: cute.Tensor, sRoutes: cute.Tensor, sUsed: cute.Tensor, token: Int32,
                             lane: Int32, local: Int32, num_local: Int32, tile_n: Int32):
        if const_expr(self.name == "routes"):
            if token == 0 and lane == 0:
                mMeta[routing.META_NUM_CTAS] = sUsed[0]
        else:
            routing.Routing.write_route_metadata(self, mMeta, sRoutes, sUsed, token, lane, local, num_local, tile_n)

    @cute.jit
    def write_padding(self, mMeta: cute.Tensor, start: Int32, end: Int32, part: Int32, parts: cutlass.Constexpr):
        if const_expr(self.name != "no padding"):
            routing.Routing.write_padding(self, mMeta, start, end, part, parts)


def _launches(b):
    """{metadata: a function launching a compiled stage on b rows' buffers}, the buffers shared by every stage."""
    logits, bias = (torch.from_numpy(a).cuda() for a in inputs(b))
    ids = torch.empty((b, TOP_K), dtype=torch.int32, device="cuda")
    weights = torch.empty((b, TOP_K), dtype=torch.float32, device="cuda")
    metadata = torch.empty(metadata_size(TILE_N), dtype=torch.int32, device="cuda")
    plain = (logits, bias, ids, weights, routing.scale_f32(SCALE))
    with_meta = plain + (metadata, 0, EXPERTS, TILE_N, routing.cta_table(TILE_N))
    # Launched as route launches: the arguments read from the tensors (which the closures keep alive), the
    # current stream read at the call (the capturing one during a capture).
    index = logits.device.index
    return {with_metadata: lambda fn, a=a: fn(*routing.launch_arguments(*a), routing.current_stream(index))
            for with_metadata, a in ((False, plain), (True, with_meta))}


def run(args):
    if not torch.cuda.is_available():
        print("properties.bench.breakdown: no CUDA device (--table needs none)", file=sys.stderr)
        return 2
    compiled = {name: routing.ffi_function(routing.compile_variant(_Stage(name, metadata)))
                for name, metadata, _ in STAGES}
    record = {"schema": SCHEMA, "provenance": provenance(),
              "config": {"bs": list(args.bs), "iterations": args.iterations, "repetitions": args.repetitions,
                         "tile_n": TILE_N, "local_expert_offset": 0, "num_local_experts": EXPERTS},
              "stages": {name: what for name, _, what in STAGES}, "graph": {name: {} for name in STAGE_NAMES},
              "kernel": routing.__file__}
    errors = 0
    for b in args.bs:
        launch = _launches(b)
        for name, metadata, _ in STAGES:
            fn = compiled[name]
            try:
                graph = capture(lambda: launch[metadata](fn), args.iterations)
                try:
                    record["graph"][name][str(b)] = summarize(time_graph(graph, args.iterations, args.repetitions))
                finally:
                    graph.reset()
            except Exception as exc:  # noqa: BLE001 - recorded; the other stages still run
                errors += 1
                record["graph"][name][str(b)] = {"error": error_line(exc)}
        print(f"  b={b}: " + ", ".join(f"{n} {record['graph'][n][str(b)].get('median_us', float('nan')):.2f}"
                                       for n in STAGE_NAMES), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    print(table(record))
    return 1 if errors else 0


def table(record):
    """The README table of a breakdown record: each stage's median per b, and what it adds to the last stage
    before it that is not a "no trigger warp" sibling."""
    bs = record["config"]["bs"]
    prov = record["provenance"]
    lines = [f"Measured on {prov['gpu']}, driver {prov['driver']}, commit {prov['commit']}, {prov['date']}; median "
             f"of {record['config']['repetitions']} replays of a CUDA graph of {record['config']['iterations']} "
             f"PDL launches, µs per launch (in parentheses: minus the stage above it); metadata tile "
             f"{record['config']['tile_n']}, every expert local.", "",
             "| stage | what one launch does | " + " | ".join(f"b={b}" for b in bs) + " |",
             "| --- | --- |" + " --- |" * len(bs)]
    previous = None
    for name in record["graph"]:
        cells = []
        for b in bs:
            entry = record["graph"][name].get(str(b), {})
            if "median_us" not in entry:
                cells.append("error")
                continue
            here = entry["median_us"]
            before = record["graph"].get(previous, {}).get(str(b), {}).get("median_us")
            cells.append(f"{here:.2f}" + (f" ({here - before:+.2f})" if before is not None else ""))
        lines.append(f"| {name} | {record['stages'][name]} | " + " | ".join(cells) + " |")
        if not name.endswith("no trigger warp"):  # a sibling of the stage above it, not a step
            previous = name
    return "\n".join(lines) + "\n"


def parse_args(argv):
    made = record_cli.parser("python -m properties.bench.breakdown", __doc__)
    return record_cli.read_record(made, made.parse_args(argv), SCHEMA_FILE)


def main(argv=None):
    return record_cli.main(parse_args(argv), table, run)


if __name__ == "__main__":
    sys.exit(interrupts.run("python -m properties.bench.breakdown", main))
