"""scipy's (and numpy's) own tests as the contract of hetla's drop-in calls.

Runs the tests of the installed scipy and numpy for the calls hetla offers twice, once as they
are and once with hetla's functions in their places (``substitute.py``), and prints per file: the
tests that pass on scipy, those of them that pass on hetla, and those that do not. With
``--baseline FILE`` (JSON: file -> the failures allowed) it exits 1 when a file fails more tests
on hetla than its baseline allows (a regression), and says which files now fail fewer (lower the
baseline). ``--details FILE`` writes every failing test's id and its first error line.

    python python/scipy_suite/run.py [--baseline python/scipy_suite/baseline.json] [--details F]
                                     [--fresh] [--record]

The pytest runs go side by side, ``--jobs`` at a time (default: one per CPU). scipy's side is the
same on every run for one scipy, numpy, Python and CPU vendor: ``scipy_outcomes.json`` keeps, per
such key, each file's test count and the tests that do not pass on scipy, and a run whose key is
there runs hetla's side only (``--fresh`` runs both; ``--record`` writes the key's entry from a run
of both). A file whose hetla run collects another number of tests than recorded runs on scipy too.
A baseline is the
most failures a file may have on either machine kind the project runs on (AMD Zen 4 and Intel
Emerald Rapids): round-off at a test's tolerance edge differs between them (docs/python.md).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "scipy_outcomes.json"

# (label, module whose tests run, pytest -k expression or None for all).
SUITES = [
    ("scipy test_decomp_cholesky", "scipy.linalg.tests.test_decomp_cholesky", None),
    ("scipy test_decomp_lu", "scipy.linalg.tests.test_decomp_lu", None),
    ("scipy test_decomp_ldl", "scipy.linalg.tests.test_decomp_ldl", None),
    ("scipy test_decomp", "scipy.linalg.tests.test_decomp", None),
    ("scipy test_basic", "scipy.linalg.tests.test_basic", None),
    ("scipy test_batch", "scipy.linalg.tests.test_batch", None),
    ("numpy TestCholesky", "numpy.linalg.tests.test_linalg", "TestCholesky"),
]

# Documented differences: where hetla does more than scipy on purpose, or an option it documents
# as not offered (with a clear error). A failing test whose id contains the first string and whose
# first error line contains the second is counted apart, with the reason.
DIFFERENCES = [
    (
        "test_structure_detection[",
        "DID NOT RAISE NotImplementedError",
        "more: hetla solves A^T x = b for a complex A (transposed=True), which scipy refuses",
    ),
]


def difference(test, why):
    """The reason a failing test is a documented difference, or None."""
    for name, message, reason in DIFFERENCES:
        if name in test and message in why:
            return reason
    return None


def outcomes(module, select, substitute, timeout):
    """Each test's outcome (passed, failed, skipped) and first error line, by id."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "junit.xml")
        # By module name: the package's own conftest (scipy's skips its xslow tests) applies.
        args = [sys.executable, "-m", "pytest", "--pyargs", module, "-q", "-p", "no:cacheprovider",
                "--junitxml", report, "-o", "junit_family=xunit1"]
        if select:
            args += ["-k", select]
        env = dict(os.environ)
        if substitute:
            args += ["-p", "substitute"]
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        done = subprocess.run(args, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
        if not os.path.exists(report):
            raise SystemExit(f"pytest wrote no report for {module}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        result = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            outcome, why = "passed", ""
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                    why = (child.get("message") or "").strip().splitlines()[0:1]
                    why = why[0][:200] if why else child.tag
                elif child.tag == "skipped":
                    outcome = "skipped"
            result[name] = (outcome, why)
        return result


def recorded_key():
    """The versions and CPU vendor scipy's outcomes depend on, as one string."""
    import numpy
    import scipy

    vendor = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("vendor_id"):
                vendor = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    python = ".".join(map(str, sys.version_info[:2]))
    return f"scipy {scipy.__version__} numpy {numpy.__version__} python {python} {vendor}"


def from_record(entry, on_hetla):
    """scipy's outcomes rebuilt from a recorded entry and hetla's run of the same file: every test
    hetla's run collected passes on scipy except the recorded ones; None when the counts differ."""
    if entry is None or len(on_hetla) != entry["tests"]:
        return None
    not_passing = entry["not_passing"]
    return {t: (not_passing.get(t, "passed"), "") for t in on_hetla}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="JSON file: suite label -> failures allowed on hetla")
    parser.add_argument("--details", help="write each failing test and its first error line here")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per pytest run")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pytest runs at once")
    parser.add_argument("--fresh", action="store_true", help="run scipy's side even if recorded")
    parser.add_argument("--record", action="store_true",
                        help=f"run both sides and write scipy's outcomes for this key to {RECORDED.name}")
    args = parser.parse_args()
    baseline = json.load(open(args.baseline)) if args.baseline else None
    details, counts, worse, better = [], {}, [], []
    key = recorded_key()
    record = json.loads(RECORDED.read_text()) if RECORDED.exists() else {}
    entries = {} if args.fresh or args.record else record.get(key, {})
    print(f"scipy's side: {'recorded' if entries else 'run'} ({key})")
    print("| suite | pass on scipy | pass on hetla | fail on hetla | documented differences |")
    print("|---|---|---|---|---|")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = {
            (label, substitute): pool.submit(outcomes, module, select, substitute, args.timeout)
            for label, module, select in SUITES
            for substitute in (False, True)
            if substitute or label not in entries
        }
        on_hetla_of = {label: runs[(label, True)].result() for label, _, _ in SUITES}
        on_scipy_of = {}
        for label, module, select in SUITES:
            on_scipy_of[label] = from_record(entries.get(label), on_hetla_of[label])
            if on_scipy_of[label] is None:
                if label in entries:
                    print(f"{label}: hetla's run collected {len(on_hetla_of[label])} tests, "
                          f"{entries[label]['tests']} recorded: scipy's side runs")
                on_scipy_of[label] = (runs.get((label, False)) or pool.submit(
                    outcomes, module, select, False, args.timeout)).result()
    if args.record:
        record[key] = {
            label: {
                "tests": len(on_scipy),
                "not_passing": {t: o for t, (o, _) in sorted(on_scipy.items()) if o != "passed"},
            }
            for label, on_scipy in on_scipy_of.items()
        }
        RECORDED.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    for label, _, _ in SUITES:
        on_scipy = on_scipy_of[label]
        on_hetla = on_hetla_of[label]
        passing = [t for t, (o, _) in on_scipy.items() if o == "passed"]
        not_passing = [t for t in passing if on_hetla.get(t, ("missing", ""))[0] != "passed"]
        why = {t: on_hetla.get(t, ("missing", "not run"))[1] for t in not_passing}
        differing = [t for t in not_passing if difference(t, why[t])]
        failing = [t for t in not_passing if t not in differing]
        counts[label] = len(failing)
        print(
            f"| {label} | {len(passing)} | {len(passing) - len(not_passing)} | {len(failing)} "
            f"| {len(differing)} |",
            flush=True,
        )
        details += [f"{label}: {t}: {why[t]}" for t in failing]
        details += [f"{label}: {t}: difference: {difference(t, why[t])}" for t in differing]
        if baseline is not None:
            allowed = baseline.get(label)
            if allowed is None or len(failing) > allowed:
                worse.append(f"{label}: {len(failing)} failures, baseline {allowed}")
            elif len(failing) < allowed:
                better.append(f"{label}: {len(failing)} failures, baseline {allowed}")
    total = sum(counts.values())
    print(f"\n{total} tests that pass on scipy fail on hetla (documented differences apart)")
    for _, _, reason in DIFFERENCES:
        print(f"difference: {reason}")
    if args.details:
        Path(args.details).write_text("\n".join(details) + "\n")
    for line in better:
        print(f"fewer failures than the baseline (lower it if it holds on both machine kinds): {line}")
    if worse:
        for line in worse:
            print(f"MORE failures than the baseline: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
