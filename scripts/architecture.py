"""The size and shape checks of the architecture (issue 50), printed and held to a ratchet.

Prints: the functions longer than LONG_FUNCTION lines outside tests, examples and benches (their
place and length), the `too_many_arguments` allowances, the items of the root crate's API docs
(from target/doc/hetla/all.html, so after `cargo doc`, or from `--doc-dir`: CI's docs, the optional
features' items included), and the pairs of places that share six or
more lines when the `duplicates` tool is on PATH (the workplace's; "not measured" elsewhere).

With ``--baseline FILE`` (JSON: metric -> the most allowed) it exits 1 when a metric is above its
baseline (a regression) and says which are below theirs (lower the baseline); the issue's
targets are printed beside: no long function, no allowance, at most 100 items, at most 60 pairs.

    python3 scripts/architecture.py [--baseline scripts/architecture-baseline.json] [--doc-dir DIR]
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_FUNCTION = 120
TARGETS = {"long_functions": 0, "too_many_arguments": 0, "root_doc_items": 100, "duplicate_pairs": 60}

FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)')
SKIPPED = {"target", "tests", "benches", "examples", ".git"}


def code_of(line):
    """The line without its string and char literals and its comment, for counting braces."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "''", line)
    return line.split("//")[0]


def long_functions():
    """(lines, place, name) of every function longer than LONG_FUNCTION lines, longest first; a
    file's `#[cfg(test)] mod` and what follows it are tests and not read."""
    found = []
    for path in sorted(ROOT.rglob("*.rs")):
        rel = path.relative_to(ROOT)
        if SKIPPED & set(rel.parts):
            continue
        lines = path.read_text().split("\n")
        end = len(lines)
        for i, line in enumerate(lines[:-1]):
            if line.strip() == "#[cfg(test)]" and re.match(r"\s*mod \w+", lines[i + 1]):
                end = i
                break
        for i in range(end):
            m = FN.match(lines[i])
            if not m:
                continue
            depth, started, j = 0, False, i
            while j < end:
                code = code_of(lines[j])
                for ch in code:
                    if ch == "{":
                        depth, started = depth + 1, True
                    elif ch == "}":
                        depth -= 1
                if (started and depth == 0) or (not started and code.rstrip().endswith(";")):
                    break
                j += 1
            if started and j - i + 1 > LONG_FUNCTION:
                found.append((j - i + 1, f"{rel}:{i + 1}", m.group(7)))
    return sorted(found, reverse=True)


def allowances():
    """Places that allow clippy's too_many_arguments."""
    hits = []
    for path in sorted(ROOT.rglob("*.rs")):
        rel = path.relative_to(ROOT)
        if "target" in rel.parts:
            continue
        for i, line in enumerate(path.read_text().split("\n")):
            if "too_many_arguments" in line and "allow" in line:
                hits.append(f"{rel}:{i + 1}")
    return hits


def root_doc_items(doc_dir):
    """The items listed by the root crate's API docs under `doc_dir` (`cargo doc`'s target/doc, or
    CI's per-library tree, where the page is hetla/hetla/all.html), or None with no page or one
    older than the newest source file of the crate (a stale page counts what is no longer there)."""
    pages = [doc_dir / "hetla" / "all.html", doc_dir / "hetla" / "hetla" / "all.html"]
    page = next((p for p in pages if p.exists()), None)
    if page is None:
        return None
    newest = max(f.stat().st_mtime for f in (ROOT / "src").rglob("*.rs"))
    if page.stat().st_mtime < newest:
        print(f"root_doc_items: {page} is older than the crate's sources (run `cargo doc`)")
        return None
    return len(re.findall(r'<li><a href="[^"]+">[^<]+</a></li>', page.read_text()))


def duplicate_pairs():
    """The pairs of places the `duplicates` tool finds in the tree, or None without the tool."""
    if shutil.which("duplicates") is None:
        return None
    done = subprocess.run(["duplicates", "--repo", str(ROOT)], capture_output=True, text=True)
    m = re.match(r"(\d+) pairs? of places", done.stdout)
    return int(m.group(1)) if m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="JSON: metric -> the most allowed")
    parser.add_argument("--doc-dir", default=str(ROOT / "target" / "doc"),
                        help="where the API docs were written (default: target/doc)")
    args = parser.parse_args()
    long = long_functions()
    allowed = allowances()
    metrics = {
        "long_functions": len(long),
        "too_many_arguments": len(allowed),
        "root_doc_items": root_doc_items(Path(args.doc_dir)),
        "duplicate_pairs": duplicate_pairs(),
    }
    print(f"functions over {LONG_FUNCTION} lines outside tests: {len(long)}")
    for lines, place, name in long:
        print(f"  {lines:4d} {place} {name}")
    print(f"too_many_arguments allowances: {len(allowed)}")
    for place in allowed:
        print(f"  {place}")
    for name in ("root_doc_items", "duplicate_pairs"):
        value = metrics[name]
        print(f"{name}: {'not measured' if value is None else value}")
    print("targets: " + ", ".join(f"{k} <= {v}" for k, v in TARGETS.items()))
    if not args.baseline:
        return
    baseline = json.loads(Path(args.baseline).read_text())
    worse = [k for k, v in metrics.items() if v is not None and k in baseline and v > baseline[k]]
    better = [k for k, v in metrics.items() if v is not None and k in baseline and v < baseline[k]]
    for k in better:
        print(f"below the baseline (lower it): {k} {metrics[k]}, baseline {baseline[k]}")
    if worse:
        for k in worse:
            print(f"ABOVE THE BASELINE: {k} {metrics[k]}, baseline {baseline[k]}")
        sys.exit(1)


if __name__ == "__main__":
    main()
