"""The evidence record's incremental refresh: what each mutant needs after the tree changed.

The evidence record (properties/mutants/freshness.py's EVIDENCE, made by properties/mutants/generated.py) holds
per mutant its verdict, the tier that detected it, that tier's killing case and the sha256 of its site (the
smallest function, or top-level statement, holding the edit, with the edit). A refresh starts from the record it
replaces (the seed) and gives each mutant of the tree now one action:

- KEPT: the mutant's kernel (its package's sha256) and the harness (generated.harness_digest) are the seed's: its
  outcomes stand, and a tier left to run runs (a run stopped at its time budget goes on this way).
- LISTED: listed equivalent (properties/mutants/equivalents.py) at an unchanged site: not run.
- REVIEW: listed equivalent whose site changed: the refresh fails, naming it, until a person has re-read its
  reason and names it in ``reviewed`` (--reviewed), which records the site as reviewed.
- CONFIRM: detected before at an unchanged site: its saved case alone runs on the mutant built on this tree
  (differential: the case file replayed, which the real kernel must pass; static: the compile and checks of the
  one variant that failed, or the source checks alone; contract: the part of the contract property that
  breached, alone), and the verdict stands only if the case still kills ("by case"). Without a saved case the
  tier that detected it runs whole, saving one, and the verdict stands if it detects it again ("by its tier").
  Otherwise the mutant goes through the prefilter and every tier, as FULL.
- DIGEST: equivalent by its digests at an unchanged site: the prefilter compiles the variants its lines reach
  and compares with the real kernel's PTX and launches now; equal: equivalent, else every tier.
- FULL: a new site, a changed site, or a mutant not decided before: the prefilter over the variants its lines
  reach (a variant it cannot reach is never recompiled), then every tier of its plan to the first kill (the tier
  that detected it before first), which saves its case.

A site is unchanged when its sha256 is the seed row's; a seed row that records none (a record made before this
rule) counts as unchanged when its mutant's package digest is the same.
"""

import ast
import hashlib
from pathlib import Path

from common.provenance import REPO_ROOT
from properties.mutants import generate

KEPT, LISTED, REVIEW, CONFIRM, DIGEST, FULL = "kept", "listed", "review", "confirm", "digest", "full"
DETECTED = ("killed", "not_viable", "crashed")
DIGEST_EQUIVALENCE = "the real kernel's PTX for every variant and its launches"


def site_sha(mutant, text):
    """sha256 of the mutant's site in its file's source ``text``: the smallest function (decorators included) or
    top-level statement holding its edit, and the edit; None for a mutant without a source position."""
    start, end = getattr(mutant, "start", None), getattr(mutant, "end", None)
    if start is None or end is None:
        return None
    spans = [s for s in generate.blocks(ast.parse(text)) if s[0] <= start[0] <= end[0] <= s[1]]
    first, last, _ = min(spans, key=lambda s: s[1] - s[0]) if spans else (start[0], end[0], 0)
    block = "".join(text.splitlines(keepends=True)[first - 1:last])
    return hashlib.sha256("\0".join([block, mutant.old, mutant.new]).encode()).hexdigest()


def unchanged_site(previous, now):
    """Whether the seed row ``previous`` was made at the site of row ``now`` (see the module's docstring)."""
    if previous.get("site_sha") and now.get("site_sha"):
        return previous["site_sha"] == now["site_sha"]
    return previous.get("digest") == now["digest"]


def saved_case(previous):
    """The killing case of seed row ``previous`` for its detecting tier, or None: a differential case whose file is
    gone counts as none."""
    tier = previous.get("killed_by")
    case = (previous.get("case") or {}).get("case") if (previous.get("case") or {}).get("tier") == tier else None
    if case is None and tier:
        case = ((previous.get("prefilter") or {}) if tier == "static" else previous.get("tiers", {}).get(tier, {})
                ).get("case")
    if isinstance(case, str):
        path = Path(case) if Path(case).is_absolute() else REPO_ROOT / case
        return str(path) if path.is_file() else None
    return case


def decide(previous, now, listed, same_harness, reviewed=()):
    """The action (see the module's docstring) for the mutant of row ``now`` (its "mutant", "digest", "site_sha")
    given its seed row ``previous`` (None: a new mutant), whether it is ``listed`` equivalent, whether the harness
    is the seed's, and the names ``reviewed``."""
    if previous is None:
        return LISTED if listed else FULL
    same_site = unchanged_site(previous, now)
    if listed:
        return LISTED if same_site or now["mutant"] in reviewed else REVIEW
    if same_harness and previous.get("digest") == now["digest"]:
        return KEPT
    if not same_site:
        return FULL
    if previous.get("verdict") in DETECTED and previous.get("killed_by"):
        return CONFIRM
    if previous.get("verdict") == "equivalent" and previous.get("equivalence") == DIGEST_EQUIVALENCE:
        return DIGEST
    return FULL
