"""Counts of a soak run (mergeable across ranks and across resumed chunks), the progress bar and the summary
JSON with its provenance."""

import dataclasses
import json
import os
import platform
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from properties.engine.casefile import environment

SUMMARY_FORMAT = "musespark-soak-summary/1"
_COUNTERS = ("rows_by_family", "rows_by_variant", "rows_by_tile", "disagreements", "checked", "differing",
             "weight_ulps")


def variant(b, renormalize, tile_n):
    """The name of a kernel variant and b, e.g. 'b=8 renormalize metadata'."""
    return f"b={b} {'renormalize' if renormalize else 'scale'} {'metadata' if tile_n is not None else 'plain'}"


@dataclasses.dataclass
class Tally:
    """Rows, problems and batches done; rows per family, variant and tile; problems each implementation got
    wrong; rows the cross-check compared with the NumPy model; per implementation, family and field the rows
    (metadata: calls) checked and differing, and the weights per ulp bucket (properties/soak/verdict.py)."""

    rows: int = 0
    problems: int = 0
    batches: int = 0
    crosscheck_rows: int = 0
    rows_by_family: Counter = dataclasses.field(default_factory=Counter)
    rows_by_variant: Counter = dataclasses.field(default_factory=Counter)
    rows_by_tile: Counter = dataclasses.field(default_factory=Counter)
    disagreements: Counter = dataclasses.field(default_factory=Counter)
    checked: Counter = dataclasses.field(default_factory=Counter)
    differing: Counter = dataclasses.field(default_factory=Counter)
    weight_ulps: Counter = dataclasses.field(default_factory=Counter)

    def add_plan_batch(self, plan):
        self.rows += plan.rows
        self.problems += plan.problems
        self.batches += 1
        for family, start, end in plan.runs:
            self.rows_by_family[family] += (end - start) * plan.b
        for renormalize in (False, True):
            count = int(np.count_nonzero(plan.renormalize == renormalize))
            if count:
                self.rows_by_variant[variant(plan.b, renormalize, plan.tile_n)] += count * plan.b
        self.rows_by_tile["none" if plan.tile_n is None else str(plan.tile_n)] += plan.rows

    def merge(self, other):
        for field in ("rows", "problems", "batches", "crosscheck_rows"):
            setattr(self, field, getattr(self, field) + getattr(other, field))
        for field in _COUNTERS:
            getattr(self, field).update(getattr(other, field))
        return self

    def to_json(self):
        return {f.name: dict(sorted(getattr(self, f.name).items())) if f.name in _COUNTERS else getattr(self, f.name)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data):
        return cls(**{k: Counter(v) if k in _COUNTERS else v for k, v in data.items()})


class Progress:
    """A tqdm bar of rows (rate, ETA against the target where one is set) with the disagreements, on the
    leading rank only (tqdm is imported only when the bar is shown)."""

    def __init__(self, enabled, target_rows, done_rows):
        self.bar = None
        if not enabled:
            return
        from tqdm import tqdm

        self.bar = tqdm(total=target_rows, initial=done_rows if target_rows else 0, unit="row", unit_scale=True,
                        dynamic_ncols=True, smoothing=0.1)

    def update(self, rows, disagreements):
        if self.bar is not None:
            self.bar.update(rows)
            self.bar.set_postfix(disagreements=disagreements, refresh=False)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def provenance(devices):
    """Where the run ran: the case files' environment (GPU, driver, packages, commit, date), torch and its
    CUDA, and each rank's device."""
    env = environment()
    env.update(torch=torch.__version__, torch_cuda=torch.version.cuda, host=platform.node(), devices=devices)
    return env


def describe_device(device):
    if device.type != "cuda":
        return {"device": str(device), "name": platform.processor() or platform.machine()}
    return {"device": str(device), "name": torch.cuda.get_device_name(device),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(device)))}


def write_summary(path, summary):
    """Write ``summary`` to ``path`` whole: through a temporary file beside it, renamed into place, so a process
    killed meanwhile leaves the previous summary as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(summary, indent=1) + "\n")
    os.replace(partial, path)
    return path


def read_summary(path):
    """A summary written by write_summary; ValueError when the file is not one."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != SUMMARY_FORMAT:
        raise ValueError(f"{path}: not a soak summary (format {data.get('format')!r})")
    return data
