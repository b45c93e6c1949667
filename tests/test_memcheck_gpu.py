"""The real kernel under compute-sanitizer's memcheck (properties/codegen/memcheck.py): every kernel route
launches, with metadata and without, accesses nothing out of bounds."""

import pytest

from properties.codegen import memcheck

pytestmark = pytest.mark.gpu


def test_every_kernel_route_launches_accesses_memory_in_bounds():
    assert memcheck.breaches() == []
