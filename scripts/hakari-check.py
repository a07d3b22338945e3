#!/usr/bin/env python3
"""Checks the workspace-hack crate (hetla-workspace-hack, kept by cargo-hakari: .config/hakari.toml).

Every workspace crate must depend on it: a crate that does not compiles its third-party
dependencies again with its own features, which is what the crate exists to prevent (CI's builds
share one compile of each, issue 71). Without that dependency nothing is wrong but time, so the
check fails loudly rather than letting CI grow back.

When cargo-hakari is installed (`cargo install cargo-hakari`), the crate's contents must also be
what `cargo hakari generate` would write now (after a dependency change: `cargo hakari generate
&& cargo hakari manage-deps`). A fresh CI machine has no cargo-hakari and checks the first part
only: a stale feature union costs a few crates compiled twice, never a wrong build.

    python3 scripts/hakari-check.py
"""

import json
import shutil
import subprocess
import sys

HACK = "hetla-workspace-hack"


def main():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    members = set(meta["workspace_members"])
    missing = [
        p["name"]
        for p in meta["packages"]
        if p["id"] in members
        and p["name"] != HACK
        and not any(d["name"] == HACK and d["kind"] is None for d in p["dependencies"])
    ]
    if missing:
        print(
            f"error: {', '.join(sorted(missing))} do not depend on {HACK}: run "
            "`cargo hakari manage-deps` (cargo install cargo-hakari) or add "
            f'`{HACK} = {{ version = "0.1", path = "<path to workspace-hack>" }}` to their '
            "[dependencies]",
            file=sys.stderr,
        )
        return 1
    print(f"every workspace crate depends on {HACK}")
    hakari = shutil.which("cargo-hakari")
    if hakari is None:
        print("cargo-hakari is not installed: the crate's contents are not checked")
        return 0
    diff = subprocess.run(["cargo", "hakari", "generate", "--diff"], capture_output=True, text=True)
    if diff.returncode != 0:
        print(diff.stdout + diff.stderr, file=sys.stderr)
        print(
            f"error: {HACK} is not current: run `cargo hakari generate && cargo hakari manage-deps`",
            file=sys.stderr,
        )
        return 1
    print(f"{HACK} is current (cargo hakari generate --diff)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
