"""``python -m properties.codegen.listing``: compile every routing variant for sm_90a (no GPU needed) and print,
for each, its float-op counts, where its global loads stand relative to griddepcontrol.wait, the branches after the
wait, and its registers, shared memory and local memory (spills) from the cubin."""

from collections import Counter

from oracles.ptx import flow
from oracles.ptx.float_ops import float_ops
from properties.codegen.checks import BIAS_PARAM, LOGITS_PARAM, VARIANTS, compiled

PARAM_NAMES = {LOGITS_PARAM: "logits", BIAS_PARAM: "bias"}


def describe(metadata, renormalize, tokens):
    variant = compiled(metadata, renormalize, tokens)
    text = variant["ptx"]
    loads = ", ".join(f"{'+'.join(PARAM_NAMES.get(p, str(p)) for p in sorted(load.params))}:"
                      f"{'before' if load.before_wait else 'after'}" for load in flow.global_loads(text))
    return "\n".join([
        f"metadata={metadata} renormalize={renormalize} tokens={tokens}",
        f"  float ops: {dict(Counter(op.opcode for op in float_ops(text)))}",
        f"  global loads vs wait: {loads}",
        f"  branches after wait: {len(flow.branches_after_wait(text))}",
        f"  resources: {variant['resources']}",
    ])


def main():
    for key in VARIANTS:
        print(describe(*key))


if __name__ == "__main__":
    main()
