"""The benchmark's problems: the inputs for each b, and every variant's buffers, launches and output check.

The CuTe variants run through the engine's poisoned buffers (properties/engine/device.py) and are checked by
its bitwise comparison; Triton against the model's outputs, FlashInfer's enqueued result against its oracle
entry on the model's ids, PyTorch eager by its picked sets. FlashInfer's fused routing from logits (the peer)
has its ids checked against the model's and its metadata against the oracle entry, bit for bit; its weights
are not (its sigmoid goes through tanh, its renormalization adds 1e-20, not 1e-15): how many differ from the
model's, and by how many ulp, is recorded as information (``information``).
"""

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import torch

import kernel.op  # noqa: F401  (registers torch.ops.musespark.route)
from kernel import routing
from kernel.layout import EXPERTS, TOP_K
from oracles.flashinfer_routing import to_meta
from oracles.flashinfer_routing import fused_peer
from oracles.flashinfer_routing.enqueue import device_buffers, enqueue, read_back
from oracles.triton_routing import ROUTER_SCORE_DIVISION_EPS, fused_musespark1x_routing
from properties.engine import device
from properties.engine.cases import Outputs, RoutingCase
from properties.engine.compare import REFERENCE, describe, disagreements
from properties.engine.implementations import REGISTRY
from properties.engine.floats import ulp_distance
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS
from properties.bench.results_file import OP_SUFFIX

SEED = 0xBE7C4
SCALE = 2.5


@dataclass(frozen=True)
class Config:
    bs: tuple
    iterations: int
    repetitions: int
    tile_n: int
    local_expert_offset: int
    num_local_experts: int

    @classmethod
    def from_args(cls, args):
        return cls(tuple(args.bs), args.iterations, args.repetitions, args.tile_n, args.local_expert_offset,
                   args.num_local_experts)

    def cli_args(self):
        """The command-line options that give this configuration's metadata request."""
        return ["--tile", str(self.tile_n), "--local-expert-offset", str(self.local_expert_offset),
                "--num-local-experts", str(self.num_local_experts)]

    def as_dict(self):
        return {"bs": list(self.bs), "iterations": self.iterations, "repetitions": self.repetitions,
                "tile_n": self.tile_n, "local_expert_offset": self.local_expert_offset,
                "num_local_experts": self.num_local_experts, "scale": SCALE, "renormalize": True, "seed": SEED,
                "logits": "normal(0, 2) float32", "bias": "normal(0, 0.5) float32"}


def draw(rng, b):
    """Logits [b, 256] ~ normal(0, 2) and bias [256] ~ normal(0, 0.5), float32, from ``rng``."""
    return (rng.normal(0, 2, (b, EXPERTS)).astype(np.float32), rng.normal(0, 0.5, EXPERTS).astype(np.float32))


def inputs(b, seed=SEED):
    """The benchmark's inputs for b rows: no zeros, and for b = 1..8 at SEED the top 9 corrected scores of each
    row lie more than 1e-4 apart, so no rounding difference reorders them."""
    return draw(np.random.default_rng(seed + b), b)


class Problem:
    """Device buffers of every variant for one b, the references, and the variants' launch functions."""

    def __init__(self, b, cfg):
        self.b, self.cfg = b, cfg
        logits, bias = inputs(b)
        self.case = RoutingCase(logits, bias, np.float32(SCALE), True, None, 0, 0, f"bench inputs b={b}")
        self.case_meta = replace(self.case, tile_n=cfg.tile_n, local_expert_offset=cfg.local_expert_offset,
                                 num_local_experts=cfg.num_local_experts)
        self.model = REGISTRY[REFERENCE].run(self.case)
        self.fi_expected = Outputs(None, None, REGISTRY["flashinfer"].run(self.case_meta).metadata)
        self.cute = device.buffers(self.case)
        self.cute_meta = device.buffers(self.case_meta)
        # One logits tensor for every variant, so a producer writing it feeds each of them.
        self.logits, self.bias = self.cute.logits, self.cute.bias
        self.cute_meta.logits, self.cute_meta.bias = self.logits, self.bias
        self.logits_src = self.logits.clone()
        new = lambda dtype: torch.empty((b, TOP_K), dtype=dtype, device="cuda")  # noqa: E731
        self.triton_ids, self.triton_weights = new(torch.int32), new(torch.float32)
        self.torch_ids, self.torch_weights = new(torch.int32), new(torch.float32)
        self.fi_ids = torch.from_numpy(self.model.ids).cuda()
        self.fi_ids_src = self.fi_ids.clone()
        self.fi_alone = device_buffers(self.fi_ids, cfg.tile_n)
        self.fi_after_triton = device_buffers(self.triton_ids, cfg.tile_n)
        # FlashInfer's routing runner takes power-of-two tiles only: any other --tile fails this variant
        # alone (its launch raises the refusal), not the problem.
        try:
            self.fused, self.fused_refusal = fused_peer.peer_buffers(self.logits, self.bias, cfg.tile_n), None
        except ValueError as exc:
            self.fused, self.fused_refusal = None, exc
        self.fused_kernel = None

    # -- launches (each enqueues one routing on the current stream)

    def run_cute(self):
        device.launch(self.cute)

    def run_cute_meta(self):
        device.launch(self.cute_meta)

    def run_triton(self):
        fused_musespark1x_routing(self.logits, self.bias, routed_scaling_factor=SCALE, out_weights=self.triton_weights,
                                  out_ids=self.triton_ids)

    def _enqueue(self, buffers, use_pdl):
        enqueue(buffers, self.cfg.local_expert_offset, self.cfg.num_local_experts, use_pdl=use_pdl)

    def run_fused(self):
        if self.fused is None:
            raise self.fused_refusal
        self.fused_kernel = fused_peer.enqueue(self.fused, SCALE, self.cfg.local_expert_offset,
                                               self.cfg.num_local_experts, use_pdl=True)

    def run_torch(self):
        s = torch.sigmoid(self.logits)
        picked = torch.topk(s + self.bias, TOP_K, dim=1).indices
        w = torch.gather(s, 1, picked)
        self.torch_weights.copy_(w * (SCALE / (w.sum(dim=1, keepdim=True) + ROUTER_SCORE_DIVISION_EPS)))
        self.torch_ids.copy_(picked)

    def launcher(self, name):
        """The function that enqueues variant ``name`` once."""
        return {
            "cute": self.run_cute,
            "cute_meta": self.run_cute_meta,
            "triton": self.run_triton,
            "flashinfer": lambda: self._enqueue(self.fi_alone, False),
            "flashinfer_pdl": lambda: self._enqueue(self.fi_alone, True),
            "triton+flashinfer": lambda: (self.run_triton(), self._enqueue(self.fi_after_triton, False)),
            "triton+flashinfer_pdl": lambda: (self.run_triton(), self._enqueue(self.fi_after_triton, True)),
            "flashinfer_fused": self.run_fused,
            "torch": self.run_torch,
        }[name]

    def eager_call(self, name):
        """``route`` bound to variant ``name``'s arguments (``cute`` or ``cute_meta``), or with OP_SUFFIX the torch
        op bound to them: an eager call as a user makes it, without the harness's argument assembly."""
        call = torch.ops.musespark.route if name.endswith(OP_SUFFIX) else routing.route
        return partial(call, *device.route_args(getattr(self, name.removesuffix(OP_SUFFIX))))

    def producer_target(self, name):
        """(source, destination) words a producer copies before variant ``name``: its input."""
        if name in ("flashinfer", "flashinfer_pdl"):
            return self.fi_ids_src, self.fi_ids
        return self.logits_src, self.logits

    # -- poison and verification

    def poison(self, name):
        if name in ("cute", "cute_meta"):
            getattr(self, name).poison()
        if name.startswith("triton"):
            self.triton_ids.fill_(IDS_POISON)
            self.triton_weights.view(self.triton_ids.dtype).fill_(WEIGHT_POISON_BITS)
        if name in ("flashinfer", "flashinfer_pdl"):
            self.fi_alone.poison(METADATA_POISON)
        if name == "flashinfer_fused" and self.fused is not None:
            self.fused.poison(METADATA_POISON)
        if name.startswith("triton+flashinfer"):
            self.fi_after_triton.poison(METADATA_POISON)
        if name == "torch":
            self.torch_ids.fill_(IDS_POISON)
            self.torch_weights.fill_(float("nan"))

    def mismatches(self, name):
        """What differs from the references in variant ``name``'s outputs (empty when all is equal)."""
        if name in ("cute", "cute_meta"):
            return getattr(self, name).mismatches()
        found = []
        if name.startswith("triton"):
            triton = Outputs(self.triton_ids.cpu().numpy(), self.triton_weights.cpu().numpy(), None)
            found += disagreements({REFERENCE: self.model, "triton": triton})
        for prefix, buffers in (("flashinfer", self.fi_alone), ("triton+flashinfer", self.fi_after_triton)):
            if name in (prefix, f"{prefix}_pdl"):
                enqueued = Outputs(None, None, to_meta(read_back(buffers)))
                found += disagreements({"oracle entry": self.fi_expected, f"{prefix} enqueued": enqueued},
                                       reference="oracle entry", tile_n=self.cfg.tile_n)
        if name == "flashinfer_fused":
            peer = fused_peer.read_back(self.fused)
            found += disagreements({REFERENCE: self.model, "flashinfer fused": Outputs(peer.ids, None, None)})
            found += disagreements({"oracle entry": self.fi_expected,
                                    "flashinfer fused": Outputs(None, None, to_meta(peer.metadata))},
                                   reference="oracle entry", tile_n=self.cfg.tile_n)
        lines = [describe(d) for d in found]
        if name == "torch" and not np.array_equal(np.sort(self.torch_ids.cpu().numpy(), axis=1),
                                                  np.sort(self.model.ids, axis=1)):
            lines.append("torch picks other experts than the model (its sigmoid is not Triton's, so only the "
                         "picked sets are compared)")
        return lines

    def information(self, name):
        """What is recorded about variant ``name``'s outputs beyond the checks (None when nothing): for the
        FlashInfer peer, the kernel it launched and its weights against the model's, bit for bit."""
        if name != "flashinfer_fused":
            return None
        if self.fused is None:
            raise self.fused_refusal
        return {"kernel": self.fused_kernel, **weight_differences(fused_peer.read_back(self.fused).weights,
                                                                  self.model.weights)}


def weight_differences(got, want):
    """How many float32 weights of ``got`` differ in bits from ``want``, the largest distance in ulp (the
    number of float32 values between them) and how many weights lie at each distance (ulp_counts); NaN
    anywhere counts as differing and gives max_ulp and ulp_counts None."""
    got, want = np.ascontiguousarray(got, np.float32), np.ascontiguousarray(want, np.float32)
    differ = int(np.count_nonzero(got.view(np.int32) != want.view(np.int32)))
    if np.isnan(got).any() or np.isnan(want).any():
        return {"weights": int(got.size), "bits_differ": differ, "max_ulp": None, "ulp_counts": None}
    distances, counts = np.unique(ulp_distance(got, want), return_counts=True)
    return {"weights": int(got.size), "bits_differ": differ, "max_ulp": int(distances.max(initial=0)),
            "ulp_counts": {str(d): int(n) for d, n in zip(distances, counts)}}
