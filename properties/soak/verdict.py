"""A verdict per implementation and edge-case family: for each family of the catalog and each field, the
rows checked and the rows whose bits differ from the model (metadata: calls, one vector each), for weights
the distribution of the ulp distance of every weight, and the first minimal case file, which replays against
the implementation by name (``python -m properties.replay FILE --impl NAME=...``).

``count`` adds one batch to the soak's Tally on the device (one transfer per field), ``count_agreeing`` one
that agreed everywhere from the host alone (the soak's common case); ``of_summary`` turns a
soak summary into one verdict per implementation, ``table`` into the terminal's table.
"""

import json
from pathlib import Path

import numpy as np
import torch

from kernel.layout import TOP_K
from properties.soak.compare import bits
from properties.soak.impls import FIELDS

VERDICT_FORMAT = "musespark-routing-verdict/1"
UNITS = {"ids": "rows", "weights": "rows", "metadata": "calls"}
# Ulp buckets of one weight against the model's: equal bits; zeros of opposite signs; 1, 2, 3 ulps; then
# [2^k, 2^(k+1)) for k = 2..31; bits that differ with a NaN on either side (a poisoned weight left unwritten
# reads as NaN).
ULP_LABELS = (("equal", "±0", "1", "2", "3") + tuple(f"{2**k}..{2**(k + 1) - 1}" for k in range(2, 32)) + ("NaN",))
_NAN = len(ULP_LABELS) - 1
SEP = "|"


def key(*parts):
    return SEP.join(parts)


def ulp_buckets(got, want):
    """Index into ULP_LABELS of each weight of float32 ``got`` against ``want`` (same shape, same device)."""
    g, w = bits(got).to(torch.int64), bits(want).to(torch.int64)
    ordered = lambda b: torch.where(b < 0, -(b & 0x7FFFFFFF), b)  # noqa: E731  sign-magnitude to a number line
    distance = (ordered(g) - ordered(w)).abs()
    exponent = torch.frexp(distance.to(torch.float64)).exponent.to(torch.int64)  # d = m 2^e, m in [0.5, 1)
    index = torch.where(distance < 4, distance + 1, exponent + 2)
    index = torch.where(torch.isnan(got) | torch.isnan(want), _NAN, index)
    return torch.where(g == w, 0, index)


def _families(plan):
    """(names, index [P] int64): the plan's families and each problem's."""
    names = [family for family, _, _ in plan.runs]
    index = np.concatenate([np.full(end - start, i, np.int64) for i, (_, start, end) in enumerate(plan.runs)])
    return names, index


def count_agreeing(tally, name, plan, fields, called):
    """What ``count`` adds for a batch whose ``fields`` all agree with the model, from the host alone:
    ``called`` the indices of the problems the implementation was called on."""
    names, family = _families(plan)
    calls = np.bincount(family[called], minlength=len(names))
    for field in fields:
        rows = 1 if field == "metadata" else plan.b
        for i, n in enumerate(calls.tolist()):
            tally.checked[key(name, names[i], field)] += n * rows
            tally.differing[key(name, names[i], field)] += 0
    if "weights" in fields:
        for i, n in enumerate(calls.tolist()):
            if n:
                tally.weight_ulps[key(name, names[i], ULP_LABELS[0])] += n * plan.b * TOP_K


def count(tally, name, plan, got, want):
    """Add implementation ``name``'s outputs ``got`` of a batch of ``plan`` (BatchOutputs) against the model's
    ``want`` to ``tally``: checked and differing per family and field, the weights' ulp buckets."""
    names, family = _families(plan)
    called = np.ones(plan.problems, bool) if got.called is None else got.called.cpu().numpy()
    device = want.ids.device
    family_t = torch.from_numpy(family).to(device)
    mask = torch.from_numpy(called).to(device)
    calls = np.bincount(family[called], minlength=len(names))
    for field in FIELDS:
        value = getattr(got, field)
        if value is None:
            continue
        differs = bits(value) != bits(getattr(want, field))
        bad = differs.any(1).to(torch.int64) if field == "metadata" else differs.any(2).sum(1)
        per_family = torch.bincount(family_t, weights=(bad * mask).to(torch.float64), minlength=len(names))
        rows = 1 if field == "metadata" else plan.b
        for i, n in enumerate(per_family.cpu().tolist()):
            tally.checked[key(name, names[i], field)] += int(calls[i]) * rows
            tally.differing[key(name, names[i], field)] += int(n)
    if got.weights is not None:
        buckets = ulp_buckets(got.weights, want.weights)[mask]
        where = (family_t[mask][:, None, None] * len(ULP_LABELS) + buckets).flatten()
        counts = torch.bincount(where, minlength=len(names) * len(ULP_LABELS)).cpu().numpy()
        for i, n in zip(*np.nonzero(counts.reshape(len(names), len(ULP_LABELS)))):
            tally.weight_ulps[key(name, names[i], ULP_LABELS[n])] += int(counts[i * len(ULP_LABELS) + n])


def _split(counter, name):
    """{family: {part: n}} of a flat Counter's keys ``name|family|part``."""
    out = {}
    for k, n in counter.items():
        impl, family, part = k.split(SEP)
        if impl == name:
            out.setdefault(family, {})[part] = n
    return out


def of_summary(summary, name):
    """The verdict of implementation ``name`` in a soak summary (format VERDICT_FORMAT)."""
    tally = summary["tally"]
    checked, differing = _split(tally["checked"], name), _split(tally["differing"], name)
    ulps = _split(tally["weight_ulps"], name)
    firsts = summary.get("first_case_files", {})
    families = {}
    for family in sorted(checked):
        entry = {field: {UNITS[field]: n, "differing": differing.get(family, {}).get(field, 0)}
                 for field, n in sorted(checked[family].items(), key=lambda kv: FIELDS.index(kv[0]))}
        if "weights" in entry:
            entry["weights"]["ulp"] = {label: ulps[family][label] for label in ULP_LABELS
                                       if label in ulps.get(family, {})}
        entry["first_case_file"] = firsts.get(key(name, family))
        families[family] = entry
    reference = summary.get("references", {}).get(name, summary["reference"])  # older summaries: the model
    return {"format": VERDICT_FORMAT, "implementation": name, "reference": reference,
            "source": summary.get("sources", {}).get(name), "eager": summary.get("eager", {}).get(name),
            "seed": summary["seed"], "rows": tally["rows"], "space": summary["space"], "families": families,
            "provenance": summary["provenance"]}


def _cell(entry, field):
    if field not in entry:
        return "-"
    part = entry[field]
    return f"{part['differing']}/{part[UNITS[field]]}"


def _worst_ulp(entry):
    ulp = entry.get("weights", {}).get("ulp", {})
    differing = [label for label in ULP_LABELS[1:] if label in ulp]
    return differing[-1] if differing else ("0" if ulp else "-")


def table(verdict):
    """The terminal's table of a verdict: per family, differing/checked per field, the largest ulp bucket
    and the first case file."""
    head = f"{'family':28s} {'ids':>15s} {'weights':>15s} {'worst ulp':>12s} {'metadata':>13s}  first case file"
    lines = [f"verdict of {verdict['implementation']} against the {verdict['reference']} ({verdict['rows']} rows"
             + (f"; eager: {verdict['eager']}" if verdict["eager"] else "") + ")", head, "-" * len(head)]
    for family, entry in verdict["families"].items():
        lines.append(f"{family:28s} {_cell(entry, 'ids'):>15s} {_cell(entry, 'weights'):>15s} "
                     f"{_worst_ulp(entry):>12s} {_cell(entry, 'metadata'):>13s}  {entry['first_case_file'] or ''}")
    return "\n".join(lines)


def write(directory, verdict):
    """Write ``verdict`` to directory/verdict-NAME.json; returns the path."""
    path = Path(directory) / f"verdict-{verdict['implementation']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(verdict, indent=1, ensure_ascii=False) + "\n")
    return path
