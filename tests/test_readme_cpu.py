"""The README's first screen, checked against what the code does: its model snippet run as written (the shapes
and dtypes its comments promise, the same bits from torch tensors), and its promise that `pip install .`
ships every data file: each tracked non-Python file of the installed packages matches a package-data pattern
of pyproject.toml (the wheel left out the FlashInfer oracle's .cuh headers, without which it cannot build)."""

import fnmatch
import re
import subprocess
from pathlib import Path

import numpy as np
import torch

from kernel.layout import TOP_K, metadata_size
from oracles import numpy_model

REPO = Path(__file__).resolve().parents[1]
FIRST_SCREEN_END = "\n## Folders"
PACKAGES = ("common", "kernel", "oracles", "properties")


def _first_screen():
    text = (REPO / "README.md").read_text()
    return text[:text.index(FIRST_SCREEN_END)]


def _snippet():
    (code,) = re.findall(r"```python\n(.*?)```", _first_screen(), re.S)
    return code


def test_the_first_screens_model_snippet_runs_and_gives_what_its_comments_say():
    names = {}
    exec(_snippet(), names)  # noqa: S102 - the README's own code, run as a reader would
    ids, weights, meta = names["ids"], names["weights"], names["meta"]
    b = names["logits"].shape[0]
    assert (ids.dtype, ids.shape) == (np.int32, (b, TOP_K))
    assert (weights.dtype, weights.shape) == (np.float32, (b, TOP_K))
    assert (meta.dtype, meta.shape) == (np.int32, (metadata_size(8),))
    for word in ("int32 [2, 8], float32 [2, 8]", "int32 [metadata_size(8)]"):
        assert word in _snippet(), f"the snippet's comment no longer says {word!r}"


def test_the_snippets_model_takes_torch_tensors_and_gives_the_same_bits():
    names = {}
    exec(_snippet(), names)  # noqa: S102
    logits, bias = torch.from_numpy(names["logits"]), torch.from_numpy(names["bias"])
    ids, weights = numpy_model.route(logits, bias, scale=2.5, renormalize=True)
    assert isinstance(ids, torch.Tensor) and ids.dtype == torch.int32
    assert np.array_equal(ids.numpy(), names["ids"])
    assert np.array_equal(weights.numpy().view(np.uint32), names["weights"].view(np.uint32))
    meta = numpy_model.routing_metadata(ids, 0, 256, 8)
    assert np.array_equal(np.asarray(meta), names["meta"])


def _package_data_patterns():
    text = (REPO / "pyproject.toml").read_text()
    section = text[text.index("[tool.setuptools.package-data]"):]
    (patterns,) = re.findall(r'^"\*" = \[(.*?)\]', section, re.M)
    return re.findall(r'"([^"]+)"', patterns)


def _excluded_packages():
    text = (REPO / "pyproject.toml").read_text()
    section = text[text.index("[tool.setuptools.packages.find]"):]
    (excluded,) = re.findall(r"^exclude = \[(.*?)\]", section, re.M)
    return [name.replace(".", "/") + "/" for name in re.findall(r'"([^"]+)"', excluded)]


def test_pip_install_ships_every_tracked_data_file_of_the_packages():
    """"`pip install .` ships every subpackage and data file": every tracked file of kernel/, oracles/ and
    properties/ that is not Python (measured results excepted, which pyproject excludes) has a pattern."""
    patterns, excluded = _package_data_patterns(), _excluded_packages()
    assert "*.json" in patterns and excluded == ["properties/results/"]
    tracked = subprocess.run(["git", "ls-files", *PACKAGES], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    data = [f for f in tracked if not f.endswith(".py") and not any(f.startswith(e) for e in excluded)]
    assert any(f.endswith(".cuh") for f in data) and any(f.endswith(".json") for f in data)
    unshipped = [f for f in data if not any(fnmatch.fnmatch(Path(f).name, p) for p in patterns)]
    assert not unshipped, f"tracked files the wheel leaves out (pyproject.toml package-data): {unshipped}"
