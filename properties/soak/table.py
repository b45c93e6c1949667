"""The soak's rate table of properties/results/README.md, made from the committed `--bench` records:

    python -m properties.soak.table                  (print it)
    python -m properties.soak.table --update-readme  (rewrite its block in properties/results/README.md)

Rows/s per implementation and variant at each b, the draw and the model replayed from CUDA graphs and the
model compiled, and each against the rate before the soak overlapped its stages (285b9d1).
"""

import json
import sys
from pathlib import Path

from common import markdown_block
from common.args import OneLineParser

RESULTS = Path(__file__).resolve().parents[1] / "results"
BASELINE = "soak-h200-bench.json"  # 285b9d1: one graph of sequential launches, stages one after another
NOW = "soak-h200-bench-f362aa5.json"  # batches in flight, graph branches, the draw and compiled model graphed
README = RESULTS / "README.md"
BLOCK = markdown_block.Block("<!-- soak-table:begin (python -m properties.soak.table --update-readme) -->",
                             "<!-- soak-table:end -->")
VARIANTS = (("cute", False, "cute, ids + weights"), ("cute", True, "cute with metadata, tile 8"),
            ("triton", False, "triton, ids + weights"), ("triton", True, "triton (metadata plan, tile 8)"),
            ("flashinfer", True, "flashinfer metadata, tile 8"))
BS = (1, 2, 4, 8)


def _rates(name):
    """{(implementation, metadata, b): rows/s} of a committed bench record."""
    data = json.loads((RESULTS / name).read_text())
    return {(r["implementation"], r["metadata"], r["b"]): r["rows_per_second"] for r in data["bench"]}


def _ratio(now, before):
    return f"{now / before:.1f}x" if now and before else "-"


def table():
    """The markdown table."""
    baseline, now = _rates(BASELINE), _rates(NOW)
    lines = ["| implementation | " + " | ".join(f"b = {b}" for b in BS) + " | against 285b9d1, b = "
             + " / ".join(str(b) for b in BS) + " |", "|---" * (len(BS) + 2) + "|"]
    for impl, metadata, label in VARIANTS:
        keys = [(impl, metadata, b) for b in BS]
        cells = [f"{now[k]:,}" if k in now else "-" for k in keys]
        cells.append(" / ".join(_ratio(now.get(k), baseline.get(k)) for k in keys))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.soak.table", description=__doc__)
    parser.add_argument("--update-readme", action="store_true", help=f"rewrite the block in {README}")
    args = parser.parse_args(argv)
    return markdown_block.print_or_update(parser, args.update_readme, README, BLOCK, table, "soak table")


if __name__ == "__main__":
    sys.exit(main())
