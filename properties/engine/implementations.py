"""The one registry of routing implementations, per case (properties, replay, mutants) and per batch (the
soak) alike: the built-ins (properties/engine/builtins.py) and the plug-ins (properties/engine/plugins.py),
all the interface of properties/engine/interface.py.

Plug-ins come from ``add`` (the CLIs' ``--impl``) and, once per process at the first ``available()``, from
the installed entry points and the specs of ``configure`` (VERIFY_IMPL's, in the gate and its test session
only: no CLI reads the variable); one that cannot run is kept in ``refused()``
with its reason, never dropped.
"""


from common.provenance import cuda_reason
from properties.engine import plugins
from properties.engine.builtins import BUILTINS, FAULT_PREFIX

from properties.engine.compare import REFERENCE

# The built-ins their declarations put on CUDA, in registry order.
GPU = tuple(impl.name for impl in BUILTINS if impl.declaration.device == "cuda")
# The implementations a GPU machine must run: the reference and the CUDA built-ins; the planted faults are never
# required.
REAL = (REFERENCE, *GPU)
# The planted faults, by the name ``--fault`` gives them (the registry's "fault-NAME").
FAULTS = tuple(impl.name.removeprefix(FAULT_PREFIX) for impl in BUILTINS if impl.name.startswith(FAULT_PREFIX))
PLANTED_TIE_FAULT = FAULT_PREFIX + "ties_to_highest_index"  # the one the tests and the examples plant

REGISTRY = {impl.name: impl for impl in BUILTINS}
_configured = {"loaded": False, "names": [], "refused": {}, "specs": []}


def add(specs):
    """Load, probe and register the plug-ins of ``--impl`` specs (NAME=MODULE:ATTR or NAME=PATH.py:ATTR);
    their names (a spec already registered is registered once). NotRun (one line) for the first that cannot
    run, ValueError for a malformed spec."""
    names = []
    for spec in specs:
        name, target = plugins.parse(spec)
        if name in REGISTRY and REGISTRY[name].source == target:
            names.append(name)
            continue
        impl = plugins.load(spec, taken=REGISTRY)
        REGISTRY[impl.name] = impl
        names.append(impl.name)
    return names


def resolve(words, choosable, device=None):
    """The implementations' names of ``--impl`` words, in their order, for every command: each word a built-in
    of ``choosable`` or a plug-in spec (loaded, probed and registered by ``add``). ValueError naming --impl for
    an unknown word or, when ``device`` (a torch.device) is given and not CUDA, for a CUDA built-in; NotRun
    (one line) for a plug-in that cannot run."""
    unknown = [word for word in words if "=" not in word and word not in choosable]
    if unknown:
        raise ValueError(f"--impl {unknown[0]!r}: not a built-in ({', '.join(choosable)}) nor NAME=MODULE:ATTR "
                         "or NAME=PATH.py:ATTR")
    gpu = [word for word in words if word in GPU]
    if device is not None and device.type != "cuda" and gpu:
        raise ValueError(f"--impl {' '.join(gpu)} needs a CUDA device; this run is on {device}")
    added = iter(add([word for word in words if "=" in word]))
    return [next(added) if "=" in word else word for word in words]


def plugin_names():
    """Names of the registered plug-ins (every implementation that is not a built-in), in registry order."""
    builtin = {impl.name for impl in BUILTINS}
    return [name for name in REGISTRY if name not in builtin]


def configure(specs):
    """The plug-in specs ``configured()`` loads besides the entry points: VERIFY_IMPL's, handed over by the gate
    (properties/tools/gate.py) or by the test session (conftest.py's --verify-impl); call before it."""
    _configured["specs"] = list(specs)


def configured():
    """Names of the plug-ins of ``configure`` and of the installed entry points that were loaded (once per
    process); the ones that cannot run are in ``refused()``."""
    if not _configured["loaded"]:
        _configured["loaded"] = True
        found = plugins.entry_points()
        for spec in _configured["specs"]:
            try:
                found.append(plugins.load(spec, taken=REGISTRY))
            except ValueError as exc:  # NotRun or a malformed spec: refused, with its reason
                name = getattr(exc, "name", spec)
                found.append(exc if isinstance(exc, plugins.NotRun) else plugins.NotRun(name, str(exc)))
        for item in found:
            if isinstance(item, plugins.NotRun):
                _configured["refused"][item.name] = item.reason
            elif item.name in REGISTRY:
                _configured["refused"][item.name] = "the name is already taken"
            else:
                REGISTRY[item.name] = item
                _configured["names"].append(item.name)
    return list(_configured["names"])


def refused():
    """name -> why, for every configured plug-in that cannot run (each fails the run that asked for it)."""
    configured()
    return dict(_configured["refused"])


def available():
    """Names of the implementations that run on this machine, in registry order (planted faults only when
    named)."""
    configured()
    return [name for name, impl in REGISTRY.items()
            if not impl.declaration.on_request and impl.unavailable() is None]


def unavailable():
    """name -> why it cannot run here, for every implementation that cannot."""
    return {name: reason for name, impl in REGISTRY.items() if (reason := impl.unavailable()) is not None}


def failed_on_gpu():
    """On a CUDA machine: name -> why, for each real implementation whose import or probe failed (the gate
    lists them as not run, so a differential check never silently compares the model with itself). Empty
    on a machine without CUDA, where none of them is expected to run."""
    if cuda_reason() is not None:
        return {}
    return {name: why for name, why in unavailable().items() if name in REAL}


def writes():
    """name -> the fields each registered implementation writes (a recording by it must hold them)."""
    return {name: impl.writes for name, impl in REGISTRY.items()}


def references_of(names):
    """name -> the name of the reference each implementation of ``names`` is compared against (registered
    names only: a recorded output's name maps through ``recorded``'s caller)."""
    return {name: REGISTRY[name].reference for name in names if name in REGISTRY}


def run_all(case, names=None):
    """name -> Outputs of each implementation in ``names`` (default: every available one) and of the
    references they declare on ``case``; an implementation whose declaration leaves the case out is left out."""
    names = list(available() if names is None else names)
    names += [ref for ref in dict.fromkeys(references_of(names).values()) if ref not in names]
    ran = {name: REGISTRY[name].run(case) for name in names}
    return {name: out for name, out in ran.items() if out is not None}
