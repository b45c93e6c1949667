"""The index of properties/results/: one row per record file (what it shows; GPU, commit, date and verdict as
the record itself holds them), then the tables made from the phase-breakdown and kernel-variants records.

    python -m properties.report.records                  (print the index)
    python -m properties.report.records --update-readme  (rewrite its block in properties/results/README.md)

What a record shows is written once, here (WHAT); everything else in a row is read from the file. A file of the
folder without an entry in WHAT, or an entry without its file, stops the index with one line naming it.
"""

import json
import re
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from common import markdown_block
from common.args import OneLineParser
from properties.mutants import freshness

RESULTS = Path(__file__).resolve().parents[1] / "results"
README = RESULTS / "README.md"
BLOCK = markdown_block.Block("<!-- records:begin (python -m properties.report.records --update-readme) -->",
                             "<!-- records:end -->")
NOT_HELD = "-"
_COMMIT = re.compile(r"^[0-9a-f]{7,40}\b")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_PYTEST_SUMMARY = re.compile(r"\b\d+ (passed|failed)\b")

# What each record shows, by its path under properties/results/.
WHAT = {
    "bench.json": "the committed `make bench` record (`make bench BENCH_OUT=properties/results/bench.json "
        "BENCH_ARGS='--no-ncu --speed-rounds 2'`), on an H100 at 6583eb8 (idle): graphed, the kernel alone "
        "1.15-1.18 us (1.0 us missed) and with metadata 1.27-1.83 us, 1.22-1.42x FlashInfer's metadata kernel with "
        "PDL (1.3x missed at b = 3 and 5), 1.41-1.66x in the PDL chain; eager route() 6.5-7.6 us alone and "
        "7.5-8.7 us with metadata; the torch op's eager rows: with metadata 23-30 us, without it an error (torch "
        "2.11's custom_op bug, fixed since: `op-bench-h100-4baa4d8.json`); its speed_check section (2 rounds) the "
        "speed check's reference; its tables are below",
    "op-bench-h100-4baa4d8.json": "`make bench` (`BENCH_ARGS='--no-ncu --speed-rounds 2'`) on an H100 at 4baa4d8, "
        "in the call right after a default gate, kept for the torch op's eager rows (no breakdown at this commit, "
        "so not the committed bench record): the op registered with torch.library.Library, eager 10.7-17.8 us "
        "alone and 12.4-21.2 us with metadata, beside route()'s 6.9-11.3 and 7.9-13.1 us in the same run; "
        "graphed as before (alone 1.15-1.18 us; with metadata 1.20x and 1.27x FlashInfer's at b = 3 and 5)",
    "evidence.json": "the kernel's evidence record, PARTIAL: the refresh from the H100 record at ad3ddbd (which saved no "
        "killing cases, so every detected mutant ran its tier again) on an H100 at 4baa4d8, two calls (519 s and "
        "168 s) stopped at their time budget: 1,131 mutants at 727 sites, 876 decided (593 killed, 99 not viable, "
        "57 crashed, 126 equivalent, 1 survived, since listed: a doubled barrier), 255 not run; `make evidence` "
        "goes on from it",
    "evidence-cases/": "the killing cases of the evidence record, one case file per mutant the differential tier "
        "killed, each replayed alone by the next refresh",
    "bench-h200-8849ba8.json": "`make bench` on an H200 at 8849ba8 (load 11.6 at its start; no phase breakdown at "
        "this commit, so not the committed bench record): graphed, the kernel alone 1.03-1.09 us and with metadata "
        "1.20-1.76 us (1.29-1.45x FlashInfer's metadata kernel with PDL, b = 2 short of 1.3x); eager route() "
        "7.0-10.6 us alone and 8.1-12.0 us with metadata, its parts per b",
    "breakdown-h100-6583eb8.json": "the phase breakdown beside `bench.json`, same H100 and commit (table below): "
        "the launch floor 0.49-0.50 us, loads +0.13-0.16, the scores' phase the largest (+0.28-0.32 us), the top-8 "
        "rounds +0.11-0.14, the weights +0.08-0.10; with metadata the routes stage adds 0.45 us from b = 5 (two "
        "routing warps per scheduler) against 0.14-0.16 below",
    "breakdown-h200-d559af4.json": "the newest phase breakdown on an H200 (table below); its stage kernels cut the "
        "general 256-thread kernel, so at b = 1 and 2 its last row is not what route launches",
    "graph-branches-h200.json": "launches/s of a CUDA graph of independent branches against one chain: 16 to 264 "
        "branches 5.0-5.8 M launches/s, one chain 0.41 M (why the soak captures a quarter as many branches as SMs)",
    "h200-2026-11-29-e46e702.json": "the `gpu` Hypothesis profile (3,000 examples per generator and property) passing "
        "on the H200, with the bundle install, the corpus recording and FlashInfer's oracle tests",
    "harness-mutants.json": "the harness mutants' kill table (`make harness-mutants`; "
        "`--out properties/results/harness-mutants.json` refreshes it); CI checks it covers the catalog",
    "harness-mutants.md": "the same kill table as Markdown: each mutant, what it breaks, its intended test, its verdict",
    "kernel-variants-h200.json": "kernel variants tried on the way to the speculative rounds, each compared bit for bit "
        "with the committed kernel and timed beside it (assembled by hand from each call's JSON: "
        "`python -m properties.bench.variants` now writes such a record)",
    "mutants-h200.json": "the kernel's and the contract's mutant kill table of `make verify` on the H200 (mutant x tier; "
        "`make report` draws it)",
    "mutmut-report.json": "the periodic mutmut survivor report (`make mutmut`) over the model's routing and the "
        "case-file code",
    "probe-h200-metadata.json": "where the metadata's time goes: diagnostic copies of the kernel and `%clock` stamps "
        "per thread (one long dependent chain behind a barrier, not the caches or global memory)",
    "report-case.png": "headless-Chromium picture of `python -m properties.view` on "
        "`corpora/examples/soak-fault-ties-to-highest-index.json` (the README shows it)",
    "report-index.png": "headless-Chromium picture of `reports/index.html` built from this folder (the README shows it)",
    "soak-h200-3e9-3e2a673.json": "3,000,238,080 rows of b = 8 through the kernel, every family, metadata on "
        "2.46 x 10^9 of them: 0 disagreements, 7.69 x 10^6 rows/s (verdict: `verdict-h200-cute-3e9-3e2a673.json`)",
    "soak-h200-bench-f362aa5.json": "soak `--bench` with the draw and the model graphed: the rates of the soak table "
        "below (1.20 x 10^7 rows/s for the kernel with metadata at b = 8)",
    "soak-h200-bench.json": "soak `--bench` before the stages overlapped: the baseline of the soak table below",
    "soak-h200-fda8902-120s.json": "`make soak SOAK_ARGS=\"--rows 1e8 --seconds 120\"`: 41,967,616 rows through the "
        "kernel, the Triton oracle and FlashInfer, 0 disagreements, 349,389 rows/s with all three",
    "soak-h200-fi_fused-own-8af31a7.json": "FlashInfer's fused routing soaked against its own model: 100,032,512 rows in "
        "three resumed runs, 0 differing (verdict: `verdict-h200-fi_fused-own-8af31a7.json`)",
    "soak-h200-planted-faults-22a1690.json": "both planted faults caught in the first batch of the overlapped soak",
    "speed-spread-h100-6583eb8.json": "the speed check's figure of every shape of the unchanged kernel in 7 processes "
        "on one idle H100 at 6583eb8: the 2 rounds of that `make bench --speed-rounds 2` (0.27 % apart at most, so "
        "margin 0.54 %) and 5 later speed checks against it, which moved by up to +4.3 % (cute_meta b=8) and -4.8 % "
        "(cute_meta b=3) and failed; the widest (max - min) / median, 4.97 % (cute_meta b=3), makes the floor of "
        "the speed check's margin, 9.95 %; the planted slower kernel's figures (+109 % to +178.5 % against the bench record) kept beside them "
        "(`python -m properties.tools.speed --spread ...`, its command line in the file, from the GPU run's logs)",
    "topk-butterfly-h200.json": "a top 8 without rounds (a butterfly of the row's 8 largest keys), tried and not kept: "
        "slower at every b",
    "variants-h100-6583eb8.json": "`python -m properties.bench.variants` on an H100: two candidates for a cheaper "
        "top 8, tried and not kept. top3 (each lane orders its best 3 words by a 15-exchange network, not the 19 of "
        "SORT8, with an exact fallback): 0 of 854 calls differing but not faster (+0.01 us alone, -0.04 to +0.10 us "
        "with metadata), so the sorting network is not what bounds the scores phase; top3_lean (the shuffle's lane "
        "from bfind, a select tree for the pick): 313 of 854 calls differ from the model, caught",
    "variants-h100-f189379.json": "`python -m properties.bench.variants`: the kernel against main's in one process on "
        "an H100, 0 of 854 calls differing (table below)",
    "verdict-cases/fi_fused-tie_within_lane.json": "the first case file of FlashInfer's fused routing's verdict "
        "(`python -m properties.replay FILE --impl fi_fused=examples/plugins/fi_fused.py:route`, GPU)",
    "verdict-cases/torch_eager-cpu-tie_within_lane.json": "the first case file of PyTorch eager's CPU verdict "
        "(replays on the CPU: `--impl torch_eager=examples/plugins/torch_eager.py:route`)",
    "verdict-cases/torch_eager-tie_within_lane.json": "the first case file of PyTorch eager's GPU verdict",
    "verdict-cpu-torch_eager-da96f6b.json": "PyTorch eager (`examples/plugins/torch_eager.py`) against the model on the "
        "CPU, per family: ties fall otherwise than on the GPU (`tie_at_eighth_place` 10,537 of 13,756 rows)",
    "verdict-h200-cute-3e9-3e2a673.json": "the kernel's verdict per family and field of the 3 x 10^9-row soak: 0 differing",
    "verdict-h200-fi_fused-56804de.json": "FlashInfer's fused routing against the Muse Spark model (whose sigmoid it "
        "does not compute): weights differ in every family, ids where picks tie or saturate",
    "verdict-h200-fi_fused-own-8af31a7.json": "FlashInfer's fused routing against its own model: 0 rows differing in "
        "ids, weights or metadata in any family",
    "verdict-h200-torch_eager-56804de.json": "PyTorch eager against the model: `torch.topk` does not give ties to the "
        "lowest index (ids differ in every `all_equal` row); weights differ in every family",
    "eager-floors-h200-cd04ca3.json": "where an eager route() spends its host time on an idle H200 host (load 0.4), "
        "from one exploration run (its method in the file), and the floor of a launch issued from Python: an empty "
        "kernel through ctypes costs 5.5 us (cuLaunchKernel) and 4.5 us (cuLaunchKernelEx with PDL) per call, more "
        "than route's compiled TVM-FFI call (3.6-5.7 us); route() 7.2-12.4 us, its signature 2.1-5.0 us",
    "mutants-generated-cpu-2core-5e7c609-survivors.json": "the survivors of the generated mutants' first whole GPU "
        "run (an H100 at 3f803cf) whose sites still exist and that are not since listed equivalent (53 of 142), "
        "again through the CPU tiers (`--tier cpu --only ...`) after the static tier learnt the sorting network's "
        "0-1 check, the block shape and the barriers between shared stores and loads, and a static kill stopped "
        "yielding to a raising check: 15 killed (4 network comparators, 4 waits removed, 4 block dimensions, 3 "
        "barriers), 38 left to the GPU tiers",
    "verify-deep-cpu-2core-0c20ff6.json": "`make verify-deep` on this project's 2-core CPU machine: the deep tests' "
        "CPU tier (the harness's slow self-tests, the CPU kill tables, the clean-tree and end-to-end runs) PASS in "
        "382 s wall, their GPU checks named as not run",
    "verify-deep-h200-def5801.json": "`make verify-deep` on an H200 started a minute before (load 0.33): PASS, 431 s "
        "wall (417 s the gate's own; one 10-minute call), 0 GPU checks not run; its kill table PASS, 79 of 79 mutants "
        "killed in 202 s (`kill-table.json`, fresh for every commit whose inputs are def5801's)",
    "verify-deep-h200-def5801.log": "the log of `verify-deep-h200-def5801.json`, with the 30 slowest tests",
    "verify-h200-def5801.json": "the default gate on the H200 10 s after `verify-deep-h200-def5801.json` (load 8.7) "
        "on the tree at def5801 with the new kill table copied in: 82 s gate wall (96 s with the report; 90 s asked), "
        "pytest 76 s, 1,774 passed, 0 GPU checks not run, the kill table fresh; FAIL on one CPU test, the results "
        "index made stale by that copy (the kill table's seconds are in it), regenerated in the commit that added the "
        "table",
    "verify-h200-def5801.log": "the log of `verify-h200-def5801.json`, with the 40 slowest tests",
    "mutants-generated-h200-def5801.json": "the generated mutants on an H200 at def5801 (`python -m properties.mutants "
        "generated --tier gpu --jobs 16`, two calls: 479 s ended at its time budget, then `--resume` until the call's "
        "limit ended it; this is the record of its last write, each verdict settled from the tier outcomes it holds): "
        "917 mutants at 516 sites, 668 killed, 48 not viable, 71 crashed, 129 equivalent, 0 survived, 1 not run: "
        "`write_expert_metadata.int_minus_one.22` (the padding's part count 1 -> 0, a loop of step 0 that never ends), "
        "whose probe was still waiting on the GPU when the call ended; FAIL until a resumed run decides it",
    "verify-cpu-2core-241a468.json": "`make verify` on this project's 2-core CPU machine after the wave's merges: the CPU "
        "tier PASS in 118 s wall, 435 GPU checks named as not run; the evidence part reports that no evidence record "
        "exists yet (`make evidence` needs a GPU; no GPU was lent) and, on a CPU, does not fail the gate; `bash .ci/run` "
        "in a fresh clone at the same code passed in 584 s (wheel check, make test, 86 of 86 harness mutants killed)",
    "verify-h100-4baa4d8.json": "`VERIFY_REQUIRE_GPU=1 make verify` on an H100 at 4baa4d8 (torch 2.11): FAIL, 110 s "
        "to the verdict, 1,971 passed, 2 failed, 7 named skips, 0 GPU checks not run; the 2 failures were the results "
        "index meeting the evidence record the same call had just written, uncommitted (described since), and the "
        "evidence part failed on that record, not PASS; all 63 torch-op tests passed (21 in the GPU tier: opcheck "
        "for b = 1..8 with and without metadata, fullgraph compile, CUDA graphs)",
    "verify-deep-h100-ad3ddbd.json": "`make verify-deep` on an H100 at ad3ddbd after a default gate, the generated "
        "mutants and the bench (load 1.1): PASS, 419 s wall (405 s the gate's own; one 10-minute call), 379 passed, "
        "0 GPU checks not run; its kill table PASS, 79 of 79 mutants killed in 219 s (`kill-table.json`)",
    "verify-deep-h100-ad3ddbd.log": "the log of `verify-deep-h100-ad3ddbd.json`, with the 30 slowest tests",
    "mutants-generated-h100-ad3ddbd.json": "the generated mutants at the final code (`python -m properties.mutants "
        "generated --tier gpu --jobs 16 --resume mutants-generated-h200-def5801.json` on an H100, 167.5 s): PASS, 917 "
        "mutants at 516 sites, 668 killed, 48 not viable, 72 crashed, 129 equivalent, 0 survived, 0 not run, 788 of "
        "788 non-equivalent detected; 881 mutants' outcomes reused from the H200's run (same mutant and harness "
        "digests), 36 decided here: 35 crashed mutants' untried contract-gpu tier, and "
        "`write_expert_metadata.int_minus_one.22` ended by the watchdog after 122 s",
    "weights-placement-h200.json": "four placements of the metadata variant's weights, benched twice in one session",
}


def record_files(folder=RESULTS):
    """Every record file under ``folder`` (its README excepted), as sorted POSIX paths relative to it; the evidence
    record's folder of killing cases counts as one entry, its name with a trailing slash."""
    cases = freshness.cases_dir(folder / freshness.EVIDENCE.name)
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*")
             if p.is_file() and p != folder / "README.md" and not p.is_relative_to(cases)}
    if cases.is_dir():
        files.add(cases.name + "/")
    return sorted(files)


def _first(dicts, *keys):
    """The first non-empty value of any of ``keys`` in ``dicts``, in order, or None."""
    for d in dicts:
        for key in keys:
            if d.get(key) not in (None, ""):
                return d[key]
    return None


def _json_facts(data):
    """GPU, commit, date and verdict of a JSON record: its provenance first, then its environment, then its top."""
    if not isinstance(data, dict):
        return {}
    where = [d for d in (data.get("provenance"), data.get("environment"), data) if isinstance(d, dict)]
    gpu = _first(where, "gpu")
    commit = _first(where, "commit", "kernel_commit")
    date = _first(where, "date", "finished")
    commit_match = _COMMIT.match(commit) if isinstance(commit, str) else None
    date_match = _DATE.search(date) if isinstance(date, str) else None
    facts = {"gpu": "none (CPU)" if "gpu" in where[0] and gpu is None else gpu,
             "commit": commit_match.group(0)[:7] if commit_match else None,
             "date": date_match.group(0) if date_match else None}
    if isinstance(data.get("verdict"), str):  # a sentence in hand-made records: its first clause
        facts["verdict"] = re.split(r"[:(,;]", data["verdict"])[0].strip()
    return facts


def _junit_facts(path):
    suite = ElementTree.parse(path).getroot().find("testsuite")
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    return {"date": _DATE.search(suite.get("timestamp", "")).group(0),
            "verdict": f"{suite.get('tests')} tests, {failed} failed"}


def _log_facts(path):
    summaries = [re.sub(r" in [0-9.]+s\b.*", "", line.strip(" =")) for line in
                 path.read_text(errors="replace").splitlines() if _PYTEST_SUMMARY.search(line)]
    return {"verdict": summaries[-1]} if summaries else {}


def facts(path):
    """{"gpu", "commit", "date", "verdict"} as the record at ``path`` holds them (a key it does not hold: absent)."""
    if path.is_dir():
        found = {"verdict": f"{sum(1 for p in path.rglob('*') if p.is_file())} case files"}
    elif path.suffix == ".json":
        found = _json_facts(json.loads(path.read_text()))
    elif path.suffix == ".xml":
        found = _junit_facts(path)
    elif path.suffix == ".log":
        found = _log_facts(path)
    else:
        found = {}
    return {key: value for key, value in found.items() if value is not None}


def _cell(value):
    return NOT_HELD if value is None else str(value).removeprefix("NVIDIA ").replace("|", "\\|")


def index(folder=RESULTS, what=WHAT):
    """The index table in Markdown; ValueError naming the file where ``what`` and the folder disagree."""
    files = record_files(folder)
    for name in files:
        if name not in what:
            raise ValueError(f"{name}: a record without a description: add it to WHAT in {__name__}")
    for name in what:
        if name not in files:
            raise ValueError(f"{name}: described in WHAT of {__name__} but not in {folder}")
    lines = ["| file | what it shows | GPU | commit | date | verdict |", "|---|---|---|---|---|---|"]
    for name in files:
        held = facts(folder / name)
        lines.append(f"| `{name}` | {what[name]} | " + " | ".join(
            _cell(held.get(key)) for key in ("gpu", "commit", "date", "verdict")) + " |")
    return "\n".join(lines)


def record_tables(folder=RESULTS):
    """The table of every phase-breakdown and kernel-variants record, each under its file's name."""
    from properties.bench import breakdown, variants

    parts = []
    for pattern, module in (("breakdown-*.json", breakdown), ("variants-*.json", variants)):
        for path in sorted(folder.glob(pattern)):
            parts += [f"#### `{path.name}`", "", module.table(json.loads(path.read_text())).rstrip("\n"), ""]
    return "\n".join(parts).rstrip("\n")


# The gate's tiers: (label, depth, with a GPU); each row shows the newest gate record of that depth and machine.
TIERS = (("default gate, GPU", "default", True), ("default gate, CPU", "default", False),
         ("deep tests, GPU", "deep", True), ("deep tests, CPU", "deep", False))


def tiers_table(folder=RESULTS):
    """Each tier's newest gate record (verify-*.json by its date) and the evidence record's last refresh: where it
    ran, the verdict and the wall seconds; a tier with no record says so."""
    gates = []
    for path in sorted(folder.glob("verify-*.json")):
        data = json.loads(path.read_text())
        environment = data.get("environment") or {}
        if data.get("depth") and environment.get("date"):
            gates.append((environment["date"], path.name, data, environment))
    lines = ["| tier | record | where | verdict | wall seconds |", "|---|---|---|---|---|"]
    for label, depth, with_gpu in TIERS:
        chosen = [g for g in gates if g[2]["depth"] == depth and (g[2].get("gpu") == "available") == with_gpu]
        if not chosen:
            lines.append(f"| {label} | {NOT_HELD} | {NOT_HELD} | no record yet | {NOT_HELD} |")
            continue
        _, name, data, environment = max(chosen, key=lambda g: g[0])
        where = environment.get("gpu") or f"{(environment.get('host') or {}).get('cores', '?')} CPU cores"
        lines.append(f"| {label} | `{name}` | {where} | {data['verdict']} | {data['seconds']} |")
    if (folder / freshness.EVIDENCE.name).is_file():
        record = json.loads((folder / freshness.EVIDENCE.name).read_text())
        counts = record["refresh"]
        calls = counts.get("calls", 1)
        verdict = record["verdict"] + ("" if record.get("complete") else ", partial: stopped at its time budget")
        lines.append(f"| evidence refresh ({counts['confirmed_by_case']} re-confirmed by case, {counts['reprobed']} "
                     f"re-probed, {counts['recompiled']} recompiled, {counts['equivalent_by_digest']} equivalent by "
                     f"digest{f'; {calls} calls' if calls > 1 else ''}) | `{freshness.EVIDENCE.name}` | "
                     f"{record['provenance'].get('gpu') or NOT_HELD} | {verdict} | {counts['seconds']} |")
    return "\n".join(lines)


# The kinds of record a command writes again and again: (kind, file pattern, what else tells two records of the
# pattern apart besides the card). The folder keeps the newest of each kind and card; git keeps the rest.
REPEATED = (("gate", "verify-*.json", lambda data: data.get("depth")),
            ("bench", "bench*.json", lambda data: None),
            ("phase breakdown", "breakdown-*.json", lambda data: None),
            ("speed spread", "speed-spread-*.json", lambda data: None),
            ("generated mutants", "mutants-generated-*.json", lambda data: None),
            ("verdict", "verdict-*.json", lambda data: (data.get("implementation"), data.get("reference"))))


def superseded(folder=RESULTS):
    """[(record, the newer record of its kind and card)] for every record of REPEATED in ``folder`` that a newer
    one replaces; the card is the GPU its provenance names (or none), the time its provenance's date (a record
    without one is the oldest)."""
    replaced = []
    for _, pattern, detail in REPEATED:
        groups = {}
        for path in sorted(folder.glob(pattern)):
            data = json.loads(path.read_text())
            where = [d for d in (data.get("provenance"), data.get("environment"), data) if isinstance(d, dict)]
            key = (facts(path).get("gpu"), detail(data))
            groups.setdefault(key, []).append((str(_first(where, "date", "finished") or ""), path.name))
        for group in groups.values():
            newest = max(group)[1]
            replaced += [(name, newest) for _, name in sorted(group) if name != newest]
    return sorted(replaced)


def generated(folder=RESULTS):
    """Everything between the markers: the index, the tiers' newest runs, the breakdown and variants tables."""
    return (index(folder) + "\n\n### The gate's tiers: the newest run of each\n\n" + tiers_table(folder)
            + "\n\n### Phase breakdowns and kernel variants\n\n" + record_tables(folder))


def main(argv=None):
    parser = OneLineParser(prog="python -m properties.report.records", description=__doc__)
    parser.add_argument("--update-readme", action="store_true", help=f"rewrite the block in {README}")
    args = parser.parse_args(argv)
    return markdown_block.print_or_update(parser, args.update_readme, README, BLOCK, generated, "records index")


if __name__ == "__main__":
    sys.exit(main())
