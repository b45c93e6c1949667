"""Plug-ins: implementations from outside the harness, each the interface of properties/engine/interface.py.

Named by ``NAME=MODULE:ATTR`` or ``NAME=PATH.py:ATTR`` (``--impl`` of replay and the soak; the environment's
VERIFY_IMPL, space-separated, for the gate's tests) or registered by an installed package under the entry-point
group ``musespark_routing.implementations`` (the entry point's name is the implementation's). Each is probed
once before it runs: one call on a drawn case, which must return None, leave the tensors it is given as they
were (dtype, shape, device, memory) and write every field it declares. One that cannot be imported, is not
callable, declares something invalid or fails the probe raises NotRun: "implementation NAME not run: <reason>".
Whatever a plug-in's code does, on import or in any later call (``sys.exit``, ``raise KeyboardInterrupt``, any
error), is that plug-in's outcome: NotRun naming what it raised, never the end of the command (a signal that
ends the command is not the plug-in's: common/interrupts.py).
"""

import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import re
from pathlib import Path

import numpy as np
import torch

from common.interrupts import raised_by_the_code
from kernel.layout import EXPERTS
from properties.engine.buffers import call_args, device_of, make, reference_ids, synchronize
from properties.engine.cases import RoutingCase
from properties.engine.interface import Declaration, Implementation
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS

GROUP = "musespark_routing.implementations"
ENV = "VERIFY_IMPL"
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
PROBE_SEED = 21
PROBE_TILE = 8
_POISON = {"ids": IDS_POISON, "weights": WEIGHT_POISON_BITS, "metadata": METADATA_POISON}


class NotRun(ValueError):
    """An implementation that was asked for and cannot run; the message is one line naming it."""

    def __init__(self, name, reason):
        super().__init__(f"implementation {name} not run: {reason}")
        self.name, self.reason = name, reason


@contextlib.contextmanager
def its_code(name, doing=""):
    """Run a plug-in's code: whatever it raises (SystemExit and KeyboardInterrupt too, but a signal ending the
    command) becomes NotRun "<doing> raised TYPE: message"; a NotRun passes as it is."""
    try:
        yield
    except NotRun:
        raise
    except BaseException as exc:
        if not raised_by_the_code(exc):
            raise
        raise NotRun(name, f"{doing + ' ' if doing else ''}raised {type(exc).__name__}: {_first_line(exc)}") from exc


def guarded(name, route):
    """``route`` that raises NotRun for whatever its code raises (its_code), on every call."""
    @functools.wraps(route)
    def call(*args, **kwargs):
        with its_code(name):
            return route(*args, **kwargs)
    return call


def parse(spec):
    """(name, target) of ``NAME=MODULE:ATTR`` or ``NAME=PATH.py:ATTR``; ValueError naming the spec."""
    name, sep, target = spec.partition("=")
    if not sep or not NAME.match(name):
        raise ValueError(f"--impl {spec!r}: expected NAME=MODULE:ATTR or NAME=PATH.py:ATTR, NAME a letter then "
                         "letters, digits, '_', '.' or '-'")
    where, colon, attr = target.rpartition(":")
    if not colon or not where or not attr.isidentifier():
        raise ValueError(f"--impl {spec!r}: expected {name}=MODULE:ATTR or {name}=PATH.py:ATTR")
    return name, target


def _is_path(where):
    return where.endswith(".py") or "/" in where


def import_target(name, where):
    """The module ``where`` (a dotted name, or a path to a .py file imported under a name of its own)."""
    if not _is_path(where):
        with its_code(name, f"importing {where}"):  # the plug-in's own import failures, whatever they are
            return importlib.import_module(where)
    path = Path(where)
    if not path.is_file():
        raise NotRun(name, f"no file {where}")
    spec = importlib.util.spec_from_file_location(f"routing_plugin_{re.sub(r'[^0-9A-Za-z_]', '_', name)}", path)
    module = importlib.util.module_from_spec(spec)
    with its_code(name, f"importing {where}"):
        spec.loader.exec_module(module)
    return module


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def implementation(name, route, source):
    """The Implementation of callable ``route`` (its ``declaration`` attribute, if any), probed; NotRun
    when it is not callable, declares something invalid or fails the probe."""
    if not callable(route):
        raise NotRun(name, f"{source} is {type(route).__name__}, not callable")
    try:
        declaration = Declaration.of(getattr(route, "declaration", None))
    except ValueError as exc:
        raise NotRun(name, str(exc)) from exc
    impl = Implementation(name, guarded(name, route), declaration, source)
    probe(impl)
    return impl


def load(spec, taken=()):
    """The probed Implementation of an ``--impl`` spec; NotRun (one line) when it cannot run, ValueError
    when the spec is malformed. ``taken``: names already in use."""
    name, target = parse(spec)
    if name in taken:
        raise NotRun(name, "the name is already taken (a built-in or another --impl)")
    where, _, attr = target.rpartition(":")
    module = import_target(name, where)
    if not hasattr(module, attr):
        raise NotRun(name, f"{where} has no attribute {attr}")
    return implementation(name, getattr(module, attr), target)


def entry_points():
    """(Implementation or NotRun) per entry point of GROUP installed here."""
    found = []
    for point in importlib.metadata.entry_points(group=GROUP):
        try:
            with its_code(point.name, f"loading entry point {point.value}"):  # as for --impl: refused, never dropped
                route = point.load()
            found.append(implementation(point.name, route, f"entry point {point.value}"))
        except NotRun as refusal:
            found.append(refusal)
    return found


def probe_case(declaration):
    """The probe's case: b the largest it takes, normal logits and bias, renormalize True where it takes it,
    metadata over every expert with a tile it takes when it writes metadata."""
    rng = np.random.default_rng(PROBE_SEED)
    b = declaration.b[1]
    tile = None
    if "metadata" in declaration.writes:
        tiles = declaration.tiles or (PROBE_TILE,)
        tile = PROBE_TILE if PROBE_TILE in tiles else tiles[0]
    return RoutingCase(logits=rng.standard_normal((b, EXPERTS), dtype=np.float32),
                       bias=rng.standard_normal(EXPERTS, dtype=np.float32), scale=np.float32(2.5),
                       renormalize=declaration.renormalize[-1],
                       tile_n=tile, local_expert_offset=0, num_local_experts=EXPERTS if tile else 0,
                       generator="plug-in probe")


def _shown(t):
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} on {t.device}"


def _returned(value):
    if isinstance(value, (tuple, list)):
        parts = (_shown(v) if isinstance(v, torch.Tensor) else type(v).__name__ for v in value)
        return f"a {type(value).__name__} ({', '.join(parts)})"
    return _shown(value) if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"


def probe(impl):
    """One call of ``impl`` on probe_case; NotRun naming what is wrong, else None."""
    reason = impl.unavailable()
    if reason is not None:
        raise NotRun(impl.name, reason)
    declaration = impl.declaration
    case = probe_case(declaration)
    fields = declaration.compared(case.has_metadata)
    made = make(case, device_of(declaration))
    if declaration.reads_ids:
        made.ids.copy_(reference_ids(case))
    args = call_args(made, "metadata" in fields)
    given = {"ids": args[2], "weights": args[3], "metadata": args[6] if len(args) > 6 else None}
    before = {field: (_shown(t), t.data_ptr()) for field, t in given.items() if t is not None}
    with its_code(impl.name):  # whatever the plug-in raises refuses it, with its message
        returned = impl.route(*args)
        synchronize(made.logits.device)
    if returned is not None:
        raise NotRun(impl.name, f"returned {_returned(returned)} instead of writing into the tensors it is given")
    for field, (shown, pointer) in before.items():
        now = given[field]
        if (_shown(now), now.data_ptr()) != (shown, pointer):
            raise NotRun(impl.name, f"{field} is {_shown(now)} after the call, not the {shown} tensor it was given "
                                    "(write into it in place)")
    for field in fields:
        words = given[field].view(torch.int32) if field == "weights" else given[field]
        if bool((words.cpu() == _POISON[field]).all()):
            raise NotRun(impl.name, f"wrote nothing into {field} (declare the fields it writes: "
                                    "route.declaration = {'writes': (...)})")
