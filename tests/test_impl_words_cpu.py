"""One function turns ``--impl`` words into implementations for every command
(properties.engine.implementations.resolve), and the built-ins' names and device sets come from their
declarations (properties/engine/builtins.py): no command keeps a list of known names of its own."""

import ast

import pytest
import torch

from common.provenance import REPO_ROOT
from properties.engine import implementations
from properties.engine.builtins import BUILTINS
from properties.engine.compare import REFERENCE

TORCH_EAGER = f"eager={REPO_ROOT / 'examples' / 'plugins' / 'torch_eager.py'}:route"


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry, so that the plug-ins a test registers leave the process's as it was."""
    monkeypatch.setattr(implementations, "REGISTRY", dict(implementations.REGISTRY))
    return implementations.REGISTRY


def test_the_gpu_set_and_the_real_ones_are_the_declarations():
    cuda = [impl.name for impl in BUILTINS if impl.declaration.device == "cuda"]
    assert implementations.GPU == tuple(cuda) and cuda
    assert implementations.REAL == (REFERENCE, *cuda)


def test_an_unknown_word_is_refused_naming_impl(registry):
    with pytest.raises(ValueError, match=r"^--impl 'nope': not a built-in \(cute, model\)"):
        implementations.resolve(["nope"], ("cute", "model"))


def test_a_gpu_builtin_on_a_cpu_device_is_refused(registry):
    with pytest.raises(ValueError, match="^--impl cute needs a CUDA device; this run is on cpu$"):
        implementations.resolve(["cute"], implementations.GPU, torch.device("cpu"))


def test_words_become_names_in_their_order(registry):
    names = implementations.resolve([REFERENCE, TORCH_EAGER, "cute"], tuple(registry))
    assert names == [REFERENCE, "eager", "cute"] and "eager" in implementations.plugin_names()


def _builtin_name_lists(path, names):
    """Line numbers in ``path`` of a tuple or list literal of two or more strings, every one a built-in's name."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and e.value in names for e in node.elts)]


def test_no_module_keeps_its_own_list_of_builtin_names():
    names = {impl.name for impl in BUILTINS}
    own = {str(path.relative_to(REPO_ROOT)): lines for path in sorted((REPO_ROOT / "properties").rglob("*.py"))
           if (lines := _builtin_name_lists(path, names))}
    assert own == {}
