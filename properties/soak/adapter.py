"""The soak engine's only doors into the rest of the harness: the case type, case files, the comparison's
format, the catalog's edge-case names and constants, the poison values and the model. Re-point these imports
when those modules move; nothing else in properties/soak imports them."""

from kernel.layout import (
    EXPERTS,
    EXPERTS_PER_LANE,
    MAX_CTAS,
    MAX_TILE,
    MAX_TOKENS,
    ROUTES,
    TOP_K,
    WARP,
    metadata_size,
)
from oracles.numpy_model import route as numpy_route
from oracles.numpy_model import routing_metadata as numpy_routing_metadata
from oracles.numpy_model.routing import metadata_rows, route_rows
from properties.engine import casefile
from properties.engine.buffers import device_of
from properties.engine.builtins import FAULT_PREFIX
from properties.engine.cases import Outputs, RoutingCase
from properties.engine.floats import MAX_SUBNORMAL, PLUS_INF, SIGN
from properties.engine.implementations import REGISTRY
from properties.engine.implementations import add as add_plugins
from properties.engine.plugins import NotRun
from properties.engine.references import REFERENCES
from properties.engine.compare import REFERENCE, describe, disagreements
from properties.engine.poison import IDS_POISON, METADATA_POISON, WEIGHT_POISON_BITS
from properties.inputs.draws import FLT_MAX, RANK_SPLITS, SPECIAL_MAGNITUDES, SPECIAL_SCALES, SPECIAL_TILES
from properties.inputs.strategies import (
    DENSITIES,
    DIV_FULL_SCALING_INNER,
    DIV_FULL_SCALING_REACH,
    EX2_OVERFLOW_EDGE,
    EX2_OVERFLOW_INNER,
    GENERATORS,
    MINUS_INF_COUNTS,
    SATURATED_SCORE_EDGE,
    SATURATED_SCORE_INNER,
    TESTFLOAT_EXPONENTS,
    TESTFLOAT_SIGNIFICANDS,
)

CATALOG = tuple(GENERATORS)  # the edge-case names, in the catalog's order
# The planted faults of the registry (``--fault NAME`` runs "fault-NAME").
FAULTS = tuple(name[len(FAULT_PREFIX):] for name in REGISTRY if name.startswith(FAULT_PREFIX))


def save_case(directory, name, case, outputs, found, origin, references=None):
    """Write a case file (casefile format) to ``directory/name`` (``references``: name -> its reference, as
    casefile.recording keeps them); returns its path."""
    record = casefile.CaseFile(case, outputs, casefile.recording(outputs, references), origin, found)
    return casefile.write(directory / name, record)


def environment():
    """GPU, driver, packages, commit and date of this process (the case files' provenance)."""
    return casefile.environment()
