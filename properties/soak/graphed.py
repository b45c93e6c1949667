"""A plan's per-batch work replayed from a CUDA graph: the draw and the model issue hundreds of small
operations a batch, and the host issuing them one by one, not the GPU, set the soak's pace. Each plan's work
is captured once, after a run as written outside the capture (which compiles and loads what it needs), and
replayed for each batch of the plan on the current stream: inputs copied into the graph's own, outputs
copied out, so batches in flight keep their own. A capture that raises leaves the work running as written,
and ``not_graphed`` says why. Plans of fewer than EAGER_BELOW problems (a minimisation's) run as written and
leave the current plan's graph in place. The forms are checked against the code as written on each plan's
first batch (properties/soak/schedule.py).
"""

import contextlib
import gc

import torch

from properties.soak.plan import Batch, batch_seed, draw, make_batch, parameters

EAGER_BELOW = 16  # problems: fewer are run without a graph


@contextlib.contextmanager
def capturing(graph):
    """torch.cuda.graph(graph), with Python's cyclic garbage collected before and held off during the capture:
    a CUDA graph freed by the collector in the middle of another's capture makes a call the capture forbids
    ("operation not permitted when stream is capturing"; torch.cuda.graph stopped collecting first in torch 2.9,
    pytorch/pytorch#161037). In the gate the kernel's and the Triton oracle's captures failed so in the
    pipelined soak test run after the graphed-draw test, whose graph lived in a reference cycle; alone it passed."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(graph):
            yield
    finally:
        if enabled:
            gc.enable()


class Replays:
    """``work(plan, *inputs)`` -> a tuple of tensors (or None) of one plan at a time from a CUDA graph;
    ``generator``: the torch Generator the work draws from, registered with each graph so that a replay draws
    from the seed the generator holds when it is replayed."""

    def __init__(self, work, generator=None):
        self.work, self.generator = work, generator
        self.plan = self.graph = None
        self.inputs, self.outputs = (), ()
        self.not_graphed = None

    def run(self, plan, *inputs, seed=None):
        """The work's outputs (copies) for ``inputs``; ``seed``: the generator's seed for this run."""
        if self.not_graphed is None and self.plan is not plan:
            self._capture(plan, inputs)
        if seed is not None:
            self.generator.manual_seed(seed)
        if self.not_graphed is not None:
            return self.work(plan, *inputs)
        for mine, given in zip(self.inputs, inputs):
            mine.copy_(given)
        self.graph.replay()
        return tuple(None if x is None else x.clone() for x in self.outputs)

    def _capture(self, plan, inputs):
        torch.cuda.synchronize()  # the previous plan's graph and buffers are freed: nothing may still use them
        self.plan, self.graph, self.outputs = plan, None, ()
        self.inputs = tuple(x.clone() for x in inputs)
        self.work(plan, *self.inputs)  # compiles and loads outside the capture
        graph = torch.cuda.CUDAGraph()
        try:
            if self.generator is not None:
                graph.register_generator_state(self.generator)
            with capturing(graph):
                outputs = self.work(plan, *self.inputs)
        except Exception as exc:  # whatever stops the capture, the work still runs, as written
            self.not_graphed = f"capture raised {type(exc).__name__}: " \
                               f"{(str(exc).strip() or '(no message)').splitlines()[0][:200]}"
            torch.cuda.synchronize()
            return
        self.graph, self.outputs = graph, outputs


class Draws:
    """Batches of plans on ``device``: make_batch's, or with ``graphed`` on a CUDA device each plan's draw
    replayed from a graph, its generator seeded per batch as make_batch seeds its own."""

    def __init__(self, device, graphed=True):
        self.device, self.replays = torch.device(device), None
        if graphed and self.device.type == "cuda":
            generator, device = torch.Generator(device=self.device), self.device  # no cycle through self
            self.replays = Replays(lambda plan: draw(plan, generator, device), generator)

    @property
    def graphed(self):
        return self.replays is not None and self.replays.not_graphed is None

    def batch(self, plan, index):
        """Batch ``index`` of ``plan``, equal to make_batch's bit for bit."""
        if self.replays is None or plan.problems < EAGER_BELOW:
            return make_batch(plan, index, self.device)
        logits, bias = self.replays.run(plan, seed=batch_seed(plan, index))
        return Batch(plan, index, logits, bias, *parameters(plan, self.device))

    def describe(self):
        """"graphed", or "as written" with the reason where the capture failed."""
        if self.replays is None:
            return "as written"
        return "graphed" if self.graphed else f"as written ({self.replays.not_graphed})"
