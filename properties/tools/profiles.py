"""The Hypothesis profiles of the test session (registered by conftest.py, named by `make test`, `make verify`
and HYPOTHESIS_PROFILE), and the one rule about seeds: a derandomized profile ignores --hypothesis-seed, so
a seed is refused there rather than silently changing nothing."""

from hypothesis import HealthCheck, settings

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
_COMMON = {"deadline": None, "suppress_health_check": _SLOW_OK, "print_blob": True}
# name -> (examples per test, derandomized). "ci": the CPU suite's and the gate's without a GPU; "gate": the
# gate's default on a GPU (twice ci's examples, fresh seeds every run, sized for a 6-minute CI step on one
# H200); "gpu": the depth of `make verify-nightly`; "nightly": deeper still, by name only.
PROFILES = {"ci": (100, True), "dev": (50, False), "gate": (200, False), "gpu": (3000, False),
            "nightly": (100_000, False)}
DEFAULT = "dev"
ENV = "HYPOTHESIS_PROFILE"  # the profile of a pytest run without --hypothesis-profile (conftest.py)
GATE_CPU, GATE_GPU = "ci", "gate"  # the gate's default profiles without and with a GPU
SEED_OPTION = "--hypothesis-seed"


def register():
    """Register every profile with Hypothesis."""
    for name, (examples, derandomize) in PROFILES.items():
        settings.register_profile(name, max_examples=examples, derandomize=derandomize, **_COMMON)


def problem(profile, seeded):
    """One line saying why ``profile`` (with a seed when ``seeded``) cannot run, or None."""
    if profile not in PROFILES:
        return f"unknown Hypothesis profile {profile!r} (known: {', '.join(PROFILES)})"
    if seeded and PROFILES[profile][1]:
        undetermined = [name for name, (_, derandomize) in PROFILES.items() if not derandomize]
        return (f"{SEED_OPTION} changes nothing under the derandomized profile {profile!r}: use "
                f"HYPOTHESIS_PROFILE={' or '.join(undetermined)}")
    return None


def seeded(args):
    """True when pytest arguments ``args`` set a Hypothesis seed."""
    return any(a == SEED_OPTION or a.startswith(SEED_OPTION + "=") for a in args)
