"""The poisoned buffers of one routing call (properties/engine/buffers.py), on CPU tensors: every tensor a view
of one buffer, as aligned as a tensor of its own, holding the case's inputs and the poison, and a write past
the contract named."""

import numpy as np
import pytest
import torch

from kernel.layout import EXPERTS, MAX_TOKENS
from properties.engine import buffers
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS
from tests.helpers import case_of

CPU = torch.device("cpu")
REQUESTS = ((None, 0, 0), (5, 8, 100), (256, 0, EXPERTS))


def _case(b, request, seed=0):
    rng = np.random.default_rng([b, seed])
    return case_of("drawn rows", rng.standard_normal((b, EXPERTS)).astype(np.float32),
                   rng.standard_normal(EXPERTS).astype(np.float32), 1.0, True, request)


def _views(made):
    return [made.logits, made.bias, made.ids_all, made.weights_all] + \
        ([] if made.metadata_all is None else [made.metadata_all])


@pytest.mark.parametrize("request_", REQUESTS)
@pytest.mark.parametrize("row_stride", (EXPERTS, 260, 4096))
@pytest.mark.parametrize("b", (1, 3, MAX_TOKENS))
def test_one_buffer_holds_the_inputs_and_the_poison_in_aligned_disjoint_parts(b, row_stride, request_):
    case = _case(b, request_)
    made = buffers.make(case, CPU, row_stride)
    assert made.logits.stride() == (row_stride, 1)
    assert np.array_equal(made.logits.numpy(), case.logits) and np.array_equal(made.bias.numpy(), case.bias)
    spans = []
    for view in _views(made):
        assert view.untyped_storage().data_ptr() == made.storage.untyped_storage().data_ptr()
        offset = view.data_ptr() - made.storage.data_ptr()
        assert offset % (buffers.PART_WORDS * 4) == 0, f"a part at byte {offset}"
        spans.append((offset, offset + (view.numel() if view.dim() < 2 else view.shape[0] * view.stride(0)) * 4))
    spans.sort()
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans
    whole = made.whole()
    assert (whole.ids == IDS_POISON).all() and (whole.weights.view(np.uint32) == WEIGHT_POISON_BITS).all()
    assert (made.metadata_all is None) == (whole.metadata is None)
    if whole.metadata is not None:
        assert (whole.metadata == METADATA_POISON).all() and whole.metadata.size == made.metadata_all.numel()


@pytest.mark.parametrize("request_", REQUESTS)
@pytest.mark.parametrize("b", (1, 5, MAX_TOKENS))
def test_a_write_past_the_contract_is_named_and_a_load_poisons_again(b, request_):
    case = _case(b, request_)
    made = buffers.make(case, CPU)
    made.ids.fill_(7)
    made.weights.fill_(2.0)
    if made.metadata is not None:
        made.metadata.fill_(3)
    whole = made.whole()
    assert buffers._outside(case, whole) == []
    assert (made.contract(whole).ids == 7).all() and made.contract(whole).ids.shape[0] == b
    made.ids_all[-1, -1] = 0
    made.weights_all.view(torch.int32)[-1, 0] = 0
    named = ["ids rows", "weights rows"] if b < MAX_TOKENS else []
    if made.metadata_all is not None:
        made.metadata_all[-1] = 0
        named.append("metadata past")
    assert [line.split(" ")[0] + " " + line.split(" ")[1] for line in buffers._outside(case, made.whole())] == named
    other = _case(b, request_, seed=1)
    made.load(other)
    assert np.array_equal(made.logits.numpy(), other.logits) and np.array_equal(made.bias.numpy(), other.bias)
    assert (made.whole().ids == IDS_POISON).all()
