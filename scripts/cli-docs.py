#!/usr/bin/env python3
"""Writes the option list of each page docs/cli/<command>.md from `hetla <command> --help`.

Each page keeps its own prose; only the text between `<!-- options: ... -->` and
`<!-- /options -->` is replaced. `cli/tests/help.rs` checks that every option --help shows is on
its command's page, so run this after adding or changing an option:

    cargo build --release && python3 scripts/cli-docs.py target/release/hetla
"""
import pathlib
import re
import subprocess
import sys

COMMANDS = ["cholesky", "lu", "qr", "ldlt", "batch", "calibrate", "info", "bound", "simulate", "sweep", "tune", "gemm"]


def options(help_text):
    """(signature, description) of every option in the "Options:" section."""
    out = []
    section = help_text.split("Options:", 1)[1]
    for line in section.splitlines():
        text = line.lstrip()
        indent = len(line) - len(text)
        if not text:
            continue
        if indent <= 6 and text.startswith("-"):
            signature, _, description = text.partition("  ")
            out.append([signature.strip(), description.strip()])
        elif out:
            out[-1][1] = (out[-1][1] + " " + text).strip()
    return out


def markdown(opts):
    lines = []
    for signature, description in opts:
        if signature.endswith("--help"):
            continue
        description = re.sub(r"\s+", " ", description)
        lines.append(f"- `{signature}`: {description}")
    return "\n".join(lines) + "\n"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/hetla"
    root = pathlib.Path(__file__).resolve().parent.parent
    for command in COMMANDS:
        page = root / "docs" / "cli" / f"{command}.md"
        help_text = subprocess.run(
            [binary, command, "--help"], check=True, capture_output=True, text=True
        ).stdout
        text = page.read_text()
        start = re.search(r"<!-- options:[^\n]*-->\n", text)
        end = text.index("<!-- /options -->")
        text = text[: start.end()] + markdown(options(help_text)) + text[end:]
        page.write_text(text)
        print(f"{page.relative_to(root)}: {len(options(help_text)) - 1} options")


if __name__ == "__main__":
    main()
