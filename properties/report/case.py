"""One case file as a page (``python -m properties.view``): per row the 256 experts as the kernel's 32 lanes of
8 (score, bias and key c = s + bias from the NumPy model; the picks marked; equal keys shaded), every
implementation's picks side by side, differing weights as aligned bit patterns, and the metadata by field.

Everything is compared with the reference (the model's recorded outputs, else the model run here)."""

import numpy as np

import oracles.numpy_model as model
from kernel.layout import EXPERTS, EXPERTS_PER_LANE, WARP, metadata_field
from properties.engine.compare import describe, disagreements
from properties.engine.floats import f32_bits, ulp_distance
from properties.engine.implementations import REFERENCE, run_all
from properties.engine.poison import METADATA_POISON
from properties.report import page, plots

LIVE = " (live)"
# How the page names the metadata fields of kernel/layout.py metadata_field.
FIELD_LABELS = {"padded_tokens": "padded size", "num_ctas": "CTA count",
                "expanded_to_permuted": "expanded-to-permuted", "cta_batch": "CTA batch",
                "cta_limit": "CTA limit", "permuted_to_token": "permuted-to-token", "guard": "guard"}
METADATA_PER_LINE = 16
TIE_SHADES = 6  # distinct shades for groups of equal keys (reused in turn)
IMPLEMENTATION_TAGS = 4  # distinct colours of the other implementations' pick tags (reused in turn)
LINES_SHOWN = 8  # lines of a metadata field always shown; further lines only where an element differs
SIGN_BITS, EXPONENT_BITS = 1, 8


def _f32_text(x):
    return str(np.float32(x))


def _hex(x):
    return f"{int(f32_bits(x)):08x}"


def outputs_with_reference(record):
    """(name -> Outputs, reference name): the recorded outputs, with the model run here added when the file
    holds no recorded model output."""
    outputs = dict(record.outputs)
    if REFERENCE in outputs:
        return outputs, REFERENCE
    outputs[REFERENCE + LIVE] = run_all(record.case, [REFERENCE])[REFERENCE]
    return outputs, REFERENCE + LIVE


def _tie_groups(keys):
    """expert -> shade index for every expert whose key equals another's (-0.0 equals +0.0), else None."""
    values, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    shades, groups = [None] * len(keys), {}
    for expert, group in enumerate(inverse):
        if counts[group] > 1:
            shades[expert] = groups.setdefault(group, len(groups) % TIE_SHADES)
    return shades


def implementation_tags(outputs, reference):
    """name -> the CSS class of its pick tags: the reference's, else one of IMPLEMENTATION_TAGS in turn."""
    others = [name for name in outputs if name != reference]
    return {reference: "ref", **{name: f"other{i % IMPLEMENTATION_TAGS}" for i, name in enumerate(others)}}


def _row(case, r, outputs, reference):
    """What the page shows of row ``r``: the lanes of experts, the picks side by side, the weights' bits."""
    logits = case.logits[r]
    scores = model.sigmoid_f32(logits)
    keys = model.add_rn(scores, case.bias)
    shades = _tie_groups(keys)
    ranks = {name: {int(e): k for k, e in enumerate(out.ids[r])} for name, out in outputs.items()
             if out.ids is not None}
    tags = implementation_tags(outputs, reference)
    experts = []
    for e in range(EXPERTS):
        picked = [{"name": name, "rank": ranks[name][e] + 1, "tag": tags[name]} for name in ranks if e in ranks[name]]
        experts.append({"expert": e, "score": _f32_text(scores[e]), "bias": _f32_text(case.bias[e]),
                        "key": _f32_text(keys[e]), "key_hex": _hex(keys[e]), "logit": _f32_text(logits[e]),
                        "logit_hex": _hex(logits[e]), "shade": shades[e], "picked": picked,
                        "by_reference": e in ranks.get(reference, {}),
                        "only_others": bool(picked) and e not in ranks.get(reference, {})})
    lanes = [experts[lane * EXPERTS_PER_LANE:(lane + 1) * EXPERTS_PER_LANE] for lane in range(WARP)]
    return {"row": r, "lanes": lanes, "picks": _picks(r, outputs, reference), "bits": _bits(r, outputs, reference),
            "ties": sum(s is not None for s in shades), "keys": keys,
            "reference_ids": [int(e) for e in outputs[reference].ids[r]] if outputs[reference].ids is not None else []}


def _picks(r, outputs, reference):
    """Rank k = 1..8: each implementation's id and weight, marked where it differs from the reference's."""
    ref = outputs[reference]
    rows = []
    for k in range(len(ref.ids[r]) if ref.ids is not None else 0):
        cells = []
        for name, out in outputs.items():
            cell = {"name": name, "id": None, "weight": None, "weight_hex": None, "id_differs": False,
                    "weight_differs": False}
            if out.ids is not None:
                cell.update(id=int(out.ids[r, k]), id_differs=int(out.ids[r, k]) != int(ref.ids[r, k]))
            if out.weights is not None:
                cell.update(weight=_f32_text(out.weights[r, k]), weight_hex=_hex(out.weights[r, k]),
                            weight_differs=ref.weights is not None
                            and f32_bits(out.weights[r, k]) != f32_bits(ref.weights[r, k]))
            cells.append(cell)
        rows.append({"rank": k + 1, "cells": cells})
    return rows


def bit_groups(got, want):
    """The 32 bits of float32 ``got`` as (sign, exponent, fraction) groups of {"bit", "differs"} against ``want``."""
    g, w = int(f32_bits(got)), int(f32_bits(want))
    bits = [{"bit": (g >> i) & 1, "differs": ((g ^ w) >> i) & 1 == 1} for i in range(31, -1, -1)]
    return [bits[:SIGN_BITS], bits[SIGN_BITS:SIGN_BITS + EXPONENT_BITS], bits[SIGN_BITS + EXPONENT_BITS:]]


def _bits(r, outputs, reference):
    """Every weight of row ``r`` whose bits differ from the reference's: both patterns, aligned, and the ulp
    distance between them."""
    ref = outputs[reference].weights
    found = []
    if ref is None:
        return found
    for name, out in outputs.items():
        if name == reference or out.weights is None:
            continue
        for k in np.flatnonzero(f32_bits(out.weights[r]) != f32_bits(ref[r])):
            got, want = out.weights[r, k], ref[r, k]
            nan = bool(np.isnan(got) or np.isnan(want))
            found.append({"name": name, "rank": int(k) + 1,
                          "got": {"groups": bit_groups(got, want), "hex": _hex(got), "value": _f32_text(got)},
                          "want": {"groups": bit_groups(want, got), "hex": _hex(want), "value": _f32_text(want)},
                          "ulp": None if nan else int(ulp_distance(got, want))})
    return found


def metadata(case, outputs, reference):
    """The metadata by field (kernel/layout.py's names), each cut to the elements any implementation wrote
    (not the poison) or that differ, in lines of METADATA_PER_LINE; differing elements marked."""
    names = [n for n, out in outputs.items() if out.metadata is not None]
    if not case.has_metadata or reference not in names:
        return []
    ref = outputs[reference].metadata
    fields = {}
    for index in range(len(ref)):
        name, _, _ = metadata_field(index, case.tile_n).partition("[")
        fields.setdefault(name, []).append(index)
    shown = []
    for name, indices in fields.items():
        indices = np.array(indices)
        values = np.stack([outputs[n].metadata[indices] for n in names])
        used = np.flatnonzero((values != METADATA_POISON).any(0) | (values != values[names.index(reference)]).any(0))
        extent = int(used.max()) + 1 if used.size else 0
        differs = (values[:, :extent] != values[names.index(reference), :extent])
        lines = [{"start": s, "elements": list(range(s, min(s + METADATA_PER_LINE, extent))),
                  "differs": bool(differs[:, s:s + METADATA_PER_LINE].any()),
                  "rows": [{"name": n, "cells": [{"value": int(values[i, e]), "differs": bool(differs[i, e])}
                                                 for e in range(s, min(s + METADATA_PER_LINE, extent))]}
                           for i, n in enumerate(names)]}
                 for s in range(0, extent, METADATA_PER_LINE)]
        kept = [line for i, line in enumerate(lines) if i < LINES_SHOWN or line["differs"]]
        shown.append({"name": name, "label": FIELD_LABELS.get(name, name), "start": int(indices[0]),
                      "length": len(indices), "extent": extent, "lines": kept,
                      "not_shown": sum(len(line["elements"]) for line in lines if line not in kept),
                      "differing": int(differs.sum()), "poison_tail": len(indices) - extent})
    return [f for f in shown if f["extent"] or f["differing"]]


def context(record, path, html_path):
    """The case page's context for CaseFile ``record`` read from ``path``, its figures saved beside ``html_path``."""
    case = record.case
    outputs, reference = outputs_with_reference(record)
    images = page.Images(html_path)
    found = disagreements(outputs, reference=reference, tile_n=case.tile_n)
    rows = [_row(case, r, outputs, reference) for r in range(case.b)]
    for row in rows:
        row["plot"] = images.add(f"row{row['row']}-keys", plots.keys(
            row.pop("keys"), {n: [int(e) for e in out.ids[row["row"]]] for n, out in outputs.items()
                              if out.ids is not None}, reference, f"row {row['row']}: key c = s + bias per expert"))
    env = record.recorded.get("environment", {})
    now = [describe(d) for d in found]
    saved = [describe(d, case.tile_n) for d in record.disagreements]
    return {
        "title": f"Case {path.name}", "subtitle": case.describe(),
        "path": str(path), "generator": case.generator, "b": case.b,
        "scale": f"{_f32_text(case.scale)} (0x{_hex(case.scale)})", "renormalize": case.renormalize,
        "tile_n": case.tile_n, "local": f"[{case.local_expert_offset}, "
                                         f"{case.local_expert_offset + case.num_local_experts})",
        "recorded_by": record.recorded.get("by", []), "reference": reference, "names": list(outputs),
        "environment": {k: env.get(k) for k in ("gpu", "driver", "cuda", "commit", "date") if env.get(k)},
        "origin": {k: v for k, v in record.origin.items() if v not in (None, "", [], {})},
        "saved": saved if saved != now else [], "now": now,
        "rows": rows, "metadata": metadata(case, outputs, reference),
        "tags": implementation_tags(outputs, reference),
    }


def write(record, path, html_path):
    """Write the case page and its figures; return its path."""
    return page.write(html_path, "case.html.j2", context(record, path, html_path))
