#!/usr/bin/env python3
"""Runs every command the README and docs/ show, at small sizes (issue 73, item 4).

A user copies commands from the docs; none may fail. This collects each command shown in
README.md and docs/**/*.md (code blocks and inline code) and decides what it is:

  run        a `hetla` command (also as `cargo run --release [--features F] --`,
             `target/release/hetla` or under `mpirun -np P`): run on the given binary with
             its sizes made small (orders, tiles, repeats, samples, counts; the options and
             flags as written), from a scratch directory; it must exit 0 with no panic.
             Inline in prose, a command that lacks options the subcommand requires
             (`hetla simulate --platform h200`) names those it shows: checked as a synopsis.
  option     one option named inline (`hetla lu --grid`): it must be in the subcommand's
             --help, and one that takes no value is run as a command.
  name       a bare subcommand named in prose (`hetla tune`): `hetla tune --help` must work.
  synopsis   a usage line with placeholders (N, SPEC, FILE, a|b, [--flag]): each option it
             names must appear in that subcommand's --help.
  ci         a script or example (`bash scripts/...`, `python python/...`, `cargo run
             --example ...`, `pip install ./python`): .ci/run runs it (its path appears
             there), else this script does, small (RECIPES below), else it fails the check.
  packages   `pip install` of registry packages: .ci/run must install each.
  needs      a command this machine cannot run, with the reason: real GPUs (`--gpus all`,
             `--compare gpu`, `scripts/gpu-check.sh`), more cores than it has, a hostfile.

and prints one line per command with where it was shown, then the counts; it exits 1 if any
command failed. Records of past runs (docs/gpu-runs/, docs/tune-runs/) show what was run on
other machines, not instructions: they are left out.

    python3 scripts/doc-commands.py target/debug/hetla [--python PY] [--jobs 2] [--list]
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUBCOMMANDS = {
    "cholesky", "lu", "qr", "ldlt", "gemm", "batch", "calibrate", "info", "bound",
    "simulate", "sweep", "tune",
}
# Subcommands that run kernels on this machine (the others simulate a model).
MEASURED = {"cholesky", "lu", "qr", "ldlt", "gemm", "batch", "calibrate"}


# The documented scripts and examples CI has no step for, each as a small bash run in a scratch
# directory: $HETLA the binary, $EXAMPLES the examples built beside it, $PY the Python with the
# package installed, $ROOT the repository.
RECIPES = {
    "--example factor_toolkit": '"$EXAMPLES/factor_toolkit" 256',
    "--example solve": '"$EXAMPLES/solve"',
    "--example layouts": '"$EXAMPLES/layouts" 256 1',
    "scripts/tune-table.py": '"$HETLA" tune --factorization lu --n 512 --sweep --repeat 1 --no-save '
                             '--json > lu-512.json && python3 "$ROOT/scripts/tune-table.py" lu-512.json',
    "python/benchmarks/tuned_defaults.py": '"$HETLA" tune --factorization cholesky --n 512 --sweep '
                                           '--repeat 1 --perfmodel-dir models > /dev/null && "$PY" '
                                           '"$ROOT/python/benchmarks/tuned_defaults.py" --tuned '
                                           'models/tuned-faer.json --models models --orders 512 '
                                           '--repeat 1 --only cholesky',
}


def shown_commands():
    """(file:line, text, inline) of every command-like piece of code in the docs."""
    files = ["README.md"] + sorted(glob.glob("docs/**/*.md", recursive=True))
    files = [f for f in files if not f.startswith(("docs/gpu-runs/", "docs/tune-runs/"))]
    found = []
    for path in files:
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        line_of = lambda offset: text.count("\n", 0, offset) + 1  # noqa: E731
        blocks = []
        for m in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
            blocks.append((m.start(), m.end()))
            start = m.start(1)
            lines = m.group(1).split("\n")
            i = 0
            offset = start
            while i < len(lines):
                line, first = lines[i], offset
                # A continued line (`\` at its end) is one command.
                while line.rstrip().endswith("\\") and i + 1 < len(lines):
                    offset += len(lines[i]) + 1
                    i += 1
                    line = line.rstrip()[:-1] + " " + lines[i].strip()
                offset += len(lines[i]) + 1
                i += 1
                command = strip_comment(line.strip().removeprefix("$ "))
                if re.match(r"(hetla (%s)( |$)|cargo run|target/release/hetla|mpirun|bash scripts|"
                            r"python3? (python|scripts)/|pip install)" % "|".join(SUBCOMMANDS),
                            command):
                    found.append((f"{path}:{line_of(first)}", command, False))
        for m in re.finditer(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)", text):
            if any(a <= m.start() < b for a, b in blocks):
                continue
            command = " ".join(m.group(1).split())
            if re.match(r"(hetla \w|cargo run|target/release/hetla|mpirun -np \d+ \S*hetla|bash scripts/"
                        r"|python3? (python|scripts)/|pip install)", command):
                found.append((f"{path}:{line_of(m.start())}", command, True))
    return found


def strip_comment(line):
    """The command without a trailing `# comment` (outside quotes)."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return shlex.join(list(lexer))
    except ValueError:
        return line


PLACEHOLDER = re.compile(
    r"^(-[-\w]+=)?([A-Z][A-Z0-9_*]*|[A-Z]x[A-Z]|FILE(\.\w+)?|\.\.\.|.*\|.*|.*[\[\]].*|.*,\.\.\.)$"
)


def hetla_args(command):
    """(mpi ranks or None, argv after the binary) of a hetla command, or None."""
    command = re.sub(r"\s*\|\s*(head|grep|less)\b.*$", "", command)
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    ranks = None
    if words[:1] == ["mpirun"]:
        if "--hostfile" in words:
            return ("hostfile", [])
        np = words[words.index("-np") + 1] if "-np" in words[:-1] else ""
        if not np.isdigit():
            return ("prose", [])
        ranks = int(np)
        binary = next((i for i, w in enumerate(words) if w.endswith("hetla")), None)
        if binary is None:
            return None
        words = words[binary:]
    if words[:2] == ["cargo", "run"]:
        if "--example" in words or "--" not in words:
            return None
        words = ["hetla"] + words[words.index("--") + 1:]
    if words and words[0].endswith("hetla"):
        return (ranks, words[1:])
    return None


def classify(command, inline=False):
    """(kind, detail) of a shown command: detail is what to run (ranks, argv, inline), the
    reason, or the path."""
    parsed = hetla_args(command)
    if parsed is None:
        # Scripts, examples and the Python package: CI's own steps run them.
        if command.startswith("pip install") and "./python" not in command:
            wanted = [w for w in command.split()[2:] if not w.startswith("-")]
            if any(w.startswith("nvidia") for w in wanted):
                return ("needs", "a GPU (NVIDIA's libraries from the registry)")
            return ("packages", wanted)
        for pattern in (r"scripts/[\w.-]+", r"python/[\w/.-]+\.py", r"--example \w+", r"\./python"):
            m = re.search(pattern, command)
            if m:
                if "gpu-check.sh" in m.group(0):
                    return ("needs", "a GPU lease (docs/gpu.md: the device issue runs it)")
                return ("ci", m.group(0))
        return ("ci", command)
    ranks, args = parsed
    if ranks == "prose":
        return ("prose", "mpirun without a rank count and a command: prose")
    if ranks == "hostfile":
        return ("needs", "several nodes (a hostfile)")
    if not args or args[0] not in SUBCOMMANDS:
        return ("unknown", "no hetla subcommand")
    if len(args) == 1 and args[0] != "info":
        return ("name", args)
    if any(PLACEHOLDER.match(a) for a in args[1:]):
        return ("synopsis", args)
    if len(args) == 2 and args[1].startswith("--") and args[1] != "--help":
        # `hetla lu --grid` in prose names an option; one that takes no value is a command.
        return ("option", args)
    reason = needs(args)
    if reason:
        return ("needs", reason)
    return ("run", (ranks, small(args), inline))


def needs(args):
    """What this machine lacks to run a measured command, or None."""
    sub = args[0]
    value = lambda opt: args[args.index(opt) + 1] if opt in args[:-1] else None  # noqa: E731
    if sub not in MEASURED and sub != "info":
        return None
    gpu = os.path.exists("/dev/nvidia0")
    gpus = value("--gpus")
    if gpus and gpus not in ("none", "0") and not gpus.startswith("emulated") and not gpu:
        return "a GPU (--gpus " + gpus + ")"
    if (value("--compare") == "gpu" or "--resident" in args) and not gpu:
        return "a GPU (cuSOLVER and cuBLAS peers, resident matrices)"
    clusters = value("--clusters")
    if clusters and re.fullmatch(r"\d+x\d+", clusters):
        k, c = map(int, clusters.split("x"))
        if k * c > os.cpu_count():
            return f"{k * c} cores (--clusters {clusters}; this machine has {os.cpu_count()})"
    return None


def small(args):
    """The command at sizes that run in seconds in a debug build."""
    sub = args[0]
    out = list(args)
    if "--help" in out:
        return out
    measured = sub in MEASURED

    def set_value(opt, fn):
        for i in range(len(out) - 1):
            if out[i] == opt:
                out[i + 1] = fn(out[i + 1])

    if measured:
        # Orders of a few 64-tiles, a handful of samples, repeats and matrices.
        tile = 64
        defaults = {"calibrate": {"--tile": "64", "--samples": "2"},
                    "batch": {"--count": "16", "--n": "64"},
                    "gemm": {"--m": "256", "--n": "256", "--k": "256", "--tile": "64"},
                    "qr": {"--m": "512", "--n": "128", "--tile": "64"}}.get(
                        sub, {"--n": "256", "--tile": "64"})
        for opt, v in defaults.items():
            if opt not in out:
                out += [opt, v]
        set_value("--tile", lambda v: str(min(int(v), tile)))
        set_value("--n", lambda v: str(min(int(v), 64 if sub == "batch" else 256)))
        set_value("--m", lambda v: str(min(int(v), 512)))
        set_value("--k", lambda v: str(min(int(v), 256)))
        set_value("--count", lambda v: str(min(int(v), 16)))
        set_value("--samples", lambda v: str(min(int(v), 2)))
        set_value("--lstsq", lambda v: str(min(int(v), 4)))
    else:
        # A simulation's cost grows with its tiles' count: at most 8 x 8 tiles (the options as
        # written; sweeps keep their ranges' shape).
        tiles = [int(t) for t in (dict(zip(out, out[1:])).get("--tile", "960")).split(",")]
        limit = 8 * max(tiles)

        def shrink(v):
            parts = v.split(":")
            return ":".join(str(min(int(p), limit)) if p.isdigit() else p for p in parts)

        set_value("--n", lambda v: ",".join(shrink(p) for p in v.split(",")))
        set_value("--nodes", lambda v: ",".join(p for p in v.split(",") if p in ("1", "2", "4", "1x1", "1x2")) or v)
    set_value("--repeat", lambda v: "1")
    return out


HELP = {}


def help_options(binary, sub):
    """(exit status, text) of `hetla SUB --help`, run once per subcommand."""
    if sub not in HELP:
        r = subprocess.run([binary, sub, "--help"], capture_output=True, text=True, timeout=60)
        HELP[sub] = (r.returncode, r.stdout + r.stderr)
    return HELP[sub]


def check(binary, kind, detail, ci_text, python):
    """(ok, what was done) for one command."""
    if kind == "packages":
        missing = [p for p in detail if not re.search(r"\b%s\b" % re.escape(p), ci_text)]
        return (not missing, f"installed by .ci/run: {' '.join(detail)}" if not missing
                else f"not installed by .ci/run: {' '.join(missing)}")
    if kind == "ci":
        if detail in ci_text:
            return (True, f"run by .ci/run ({detail})")
        if detail not in RECIPES:
            return (False, f"neither .ci/run nor this script runs {detail}")
        if not python and "$PY" in RECIPES[detail]:
            return (False, f"{detail}: give --python (the Python with the package installed)")
        return execute(["bash", "-c", RECIPES[detail]], f"{detail}: {RECIPES[detail]}", binary,
                       python)
    if kind == "needs":
        return (True, "not run here: needs " + detail)
    if kind == "prose":
        return (True, detail)
    if kind == "unknown":
        return (False, detail)
    if kind == "name":
        rc, text = help_options(binary, detail[0])
        return (rc == 0, f"`{detail[0]} --help` exit {rc}")
    if kind == "option":
        rc, text = help_options(binary, detail[0])
        m = re.search(r"^\s+(-\w, )?" + re.escape(detail[1]) + r"( <\w+>)?", text, re.M)
        if rc != 0 or not m:
            return (False, f"`{detail[0]} --help` has no {detail[1]}")
        if m.group(2):
            return (True, f"option in `{detail[0]} --help` (takes a value: a name, not a command)")
        reason = needs(detail)
        if reason:
            return (True, "not run here: needs " + reason)
        detail = (None, small(detail), True)
    if kind == "synopsis":
        rc, text = help_options(binary, detail[0])
        options = {a.split("=")[0].strip("[]") for a in detail[1:]}
        options = {o for o in options if o.startswith("--")}
        missing = sorted(o for o in options if not re.search(re.escape(o) + r"\b", text))
        if rc != 0 or missing:
            return (False, f"synopsis names options --help lacks: {' '.join(missing)}")
        return (True, f"options in `{detail[0]} --help`")
    ranks, args, inline = detail
    argv = [os.path.abspath(binary)] + args
    if ranks:
        argv = ["mpirun", "--oversubscribe", "-np", str(ranks)] + argv
    shown = ("mpirun -np %d " % ranks if ranks else "") + "hetla " + shlex.join(args)
    ok, what = execute(argv, shown, binary, python)
    if not ok and inline and what.startswith("exit 2:") and "required arguments" in what:
        # Prose naming a command by some of its options (`hetla simulate --platform h200`):
        # its options must exist; the rest of the command is the reader's.
        return check(binary, "synopsis", args, ci_text, python)
    return ok, what


def execute(argv, shown, binary, python):
    """(ok, what was done) for one run in a scratch directory: exit 0 and no panic."""
    with tempfile.TemporaryDirectory() as scratch:
        binary = os.path.abspath(binary)
        env = dict(os.environ, HETLA_PERFMODEL_DIR=os.path.join(scratch, "models"),
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   HETLA=binary, EXAMPLES=os.path.join(os.path.dirname(binary), "examples"),
                   PY=os.path.abspath(python) if python else "python3", ROOT=ROOT)
        start = time.time()
        try:
            r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True,
                               timeout=300)
        except subprocess.TimeoutExpired:
            return (False, "hung (300 s): " + shown)
        seconds = time.time() - start
    if r.returncode != 0 or "panicked" in r.stderr:
        lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
        # The first error line (clap's and hetla's say what was wrong), then the last lines.
        tail = [line for line in lines if line.startswith("error:")][:1] + lines[-2:]
        return (False, f"exit {r.returncode}: {shown}\n        " + "\n        ".join(tail))
    return (True, f"{seconds:5.1f} s  {shown}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binary", help="the hetla binary (every feature: openblas, mpi...)")
    parser.add_argument("--python", help="the Python with hetla installed (for its scripts)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--list", action="store_true", help="classify only, run nothing")
    options = parser.parse_args()
    os.chdir(ROOT)
    ci_text = open(".ci/run", encoding="utf-8").read()
    commands = shown_commands()
    # Each distinct command once (the places it is shown listed).
    distinct = {}
    for where, command, inline in commands:
        kind, detail = classify(command, inline)
        key = (kind, repr(detail))
        distinct.setdefault(key, (kind, detail, command, []))[3].append(where)
    items = list(distinct.values())
    if options.list:
        for kind, detail, command, wheres in items:
            print(f"{kind:9} {wheres[0]:32} {command}")
        return 0
    with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
        results = list(pool.map(lambda it: check(options.binary, it[0], it[1], ci_text, options.python), items))
    counts, failed = {}, 0
    for (kind, _, command, wheres), (ok, what) in zip(items, results):
        counts[kind] = counts.get(kind, 0) + 1
        failed += not ok
        more = f" (+{len(wheres) - 1})" if len(wheres) > 1 else ""
        print(f"{'ok  ' if ok else 'FAIL'} {kind:9} {wheres[0]}{more}: {what}")
    print(f"== {len(commands)} commands shown, {len(items)} distinct: "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + f"; {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
