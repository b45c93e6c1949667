"""A property's check of one case: every implementation against its reference (the model unless it declares
another), bit for bit; a disagreement is
saved as a replayable case file (corpora/failures/) before the check fails."""

import os

import hypothesis
import hypothesis.core

from properties.engine.casefile import write_failure
from properties.engine.compare import describe, disagreements
from properties.engine.implementations import references_of, run_all


def _reproduction(context):
    """Hypothesis's ``@reproduce_failure`` line for the running example; None where this Hypothesis version
    lacks the (internal) API."""
    try:
        from hypothesis.core import reproduction_decorator
        return reproduction_decorator(context.data.choices)
    except (ImportError, AttributeError):
        return None


def _hypothesis_run():
    """(whether this is the run to save, where the case came from). Inside a Hypothesis test only the final
    replay of the minimal failing example is saved, not every step of the shrinking."""
    origin = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or None,
              "hypothesis_version": hypothesis.__version__}
    if not hypothesis.currently_in_test_context():
        return True, origin
    from hypothesis.control import current_build_context

    context = current_build_context()
    profile = getattr(hypothesis.settings, "get_current_profile_name", lambda: None)()
    origin.update(hypothesis_seed=getattr(hypothesis.core, "global_force_seed", None), hypothesis_profile=profile,
                  reproduce_failure=_reproduction(context))
    return context.is_final, origin


def check_case(case, property_name, names=None):
    """Run the implementations (default: every available one) on ``case``; return their outputs when all
    agree with their references bit for bit, else save the case with every output and raise AssertionError."""
    outputs = run_all(case, names)
    references = references_of(outputs)
    found = disagreements(outputs, tile_n=case.tile_n, references=references)
    if not found:
        return outputs
    save, origin = _hypothesis_run()
    saved = write_failure(case, outputs, found, {"property": property_name, **origin}, references) if save else None
    lines = "\n".join(describe(d) for d in found)
    raise AssertionError(f"{property_name}: implementations disagree on a {case.generator} case"
                         f"{f', saved to {saved}' if saved else ''}:\n{lines}")
