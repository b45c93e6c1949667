"""``route`` as a torch op, ``torch.ops.musespark.route``, registered when this module is first imported, so that
``torch.compile`` traces a model through it (no graph break) and CUDA graphs capture it.

The schema is route's signature with the outputs (ids, weights, metadata) declared as written, returning nothing.
On tensors with memory the op is ``kernel.routing.route`` itself: the same contract, ValueError and launch, for
arguments of the schema's types (the dispatcher converts or refuses others first: a bool offset becomes an int,
a string one is its RuntimeError). Its fake implementation (fake tensors, as torch.compile traces) runs route's
argument checks but those that read addresses (``kernel.contract.check_abstract``) and writes nothing. Tagged
``needs_exact_strides``: a compiler passes it tensors with the strides it traced, which route's contract holds. No
autograd: route has no gradient. A direct ``route`` call stays the cheaper eager call; the op adds the dispatcher in
front of it (the benchmark times both).

Defined with ``torch.library.Library`` and one kernel for every backend, as serving engines register theirs, not
with ``torch.library.custom_op``: the latter's version bump of the written outputs (torch 2.11) indexes the
arguments as the caller gave them, so a call that leaves ``metadata`` to its default raises IndexError.
"""

import inspect

import torch

from kernel import contract, routing

NAMESPACE, NAME = "musespark", "route"
SCHEMA = ("(Tensor logits, Tensor bias, Tensor(a!) ids, Tensor(b!) weights, float scale, bool renormalize=True, "
          "Tensor(c!)? metadata=None, int local_expert_offset=0, int num_local_experts=0, int tile_n=0) -> ()")
OUTPUTS = ("ids", "weights", "metadata")
BACKENDS = "CompositeExplicitAutograd"  # one kernel for every device: route refuses all but CUDA itself

LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")
LIBRARY.define(NAME + SCHEMA, tags=(torch.Tag.needs_exact_strides,))
LIBRARY.impl(NAME, routing.route, BACKENDS)
_ROUTE = inspect.signature(routing.route)


@torch.library.register_fake(f"{NAMESPACE}::{NAME}", lib=LIBRARY)
def _fake(*args, **kwargs):
    """route's checks on fake tensors, with route's defaults for the arguments not given."""
    call = _ROUTE.bind(*args, **kwargs)
    call.apply_defaults()
    contract.check_abstract(*call.args)
