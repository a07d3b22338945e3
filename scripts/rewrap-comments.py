#!/usr/bin/env python3
"""Re-wraps the comments of Rust files at 100 columns (rustfmt leaves comments alone on
stable Rust).

    python3 scripts/rewrap-comments.py [FILE...]          # rewrite the files in place
    python3 scripts/rewrap-comments.py --check [FILE...]  # list the files it would change

Without files, every Rust file git tracks.

A comment paragraph (consecutive full-line `///` or `//!` lines of one indentation, up to a
blank comment line) is filled greedily: each line takes as many words as fit in 100
columns. List items (`- `, `* `, `1. `) are paragraphs of their own, their continuation
lines indented under the item's text. Fenced code blocks, headings, tables, link
definitions and indented code are left as they are. Plain `//` comments are filled the
same way only where a line of the paragraph is longer than 100 columns (they may hold
code or drawings).
"""

import re
import subprocess
import sys

WIDTH = 100
COMMENT = re.compile(r"^(\s*)(//[/!]?)(.*)$")
ITEM = re.compile(r"^([-*+]|\d+[.)]) +")


STARTER = re.compile(r"^([-*+]|\d+[.)]|[#>|].*)$")
LINK_DEFINITION = re.compile(r"^\[[^\]]+\]:\s")
SPAN = 50  # a code span up to this long is kept on one line


def spans(words):
    """`words` with the words of each short code span (`a b c`) joined into one."""
    out, open_span = [], None
    for w in words:
        if open_span is not None:
            open_span.append(w)
            if w.count("`") % 2 == 1:
                joined = " ".join(open_span)
                out.extend([joined] if len(joined) <= SPAN else open_span)
                open_span = None
        elif w.count("`") % 2 == 1:
            open_span = [w]
        else:
            out.append(w)
    out.extend(open_span or [])
    return out


def fill(words, first, rest):
    """Lines of `words`: the first after `first`, the others after `rest`. A line never
    starts with a word Markdown would read as a list item, heading, quote or table."""
    lines, line = [], []
    width = len(first)
    for w in spans(words):
        if not line or width + 1 + len(w) <= WIDTH:
            width += (1 if line else 0) + len(w)
            line.append(w)
            continue
        carried = []
        if STARTER.match(w) and len(line) > 1:
            carried = [line.pop()]
        lines.append(line)
        line = carried + [w]
        width = len(rest) + len(" ".join(line))
    lines.append(line)
    return [(first if i == 0 else rest) + " ".join(l) for i, l in enumerate(lines)]


class Run:
    """The comment lines of one indentation and marker, rewrapped into `out`."""

    def __init__(self, prefix, plain):
        self.prefix = prefix
        self.plain = plain
        self.out = []
        self.paragraph = None  # [first, rest, words, original lines]

    def flush(self):
        p = self.paragraph
        self.paragraph = None
        if p is None:
            return
        first, rest, words, original = p
        too_long = any(len(l) > WIDTH for l in original)
        if self.plain and not too_long:
            self.out.extend(original)
        else:
            self.out.extend(fill(words, first, rest))

    def verbatim(self, line):
        self.flush()
        self.out.append(line.rstrip())

    def add(self, line):
        prefix = self.prefix
        body = line[len(prefix):]
        if body and not body.startswith(" "):
            return self.verbatim(line)  # "//-" and the like: not prose
        text = body[1:]
        if not text.strip():
            return self.verbatim(prefix)
        lead = len(text) - len(text.lstrip(" "))
        if (
            text.startswith(("#", "|", "<", "```", "~~~"))
            or LINK_DEFINITION.match(text)
            or text.rstrip() != text and text.endswith("  ")
        ):
            return self.verbatim(line)
        item = ITEM.match(text)
        if item and lead == 0:
            self.flush()
            hang = " " * len(item.group(0))
            self.paragraph = [
                prefix + " " + item.group(0),
                prefix + " " + hang,
                text[len(item.group(0)):].split(),
                [line],
            ]
            return None
        p = self.paragraph
        if lead > 0:
            # Under a list item, at its text's column: more of the item.
            if p is not None and p[1] == prefix + " " + " " * lead and not ITEM.match(text.lstrip()):
                p[2].extend(text.split())
                p[3].append(line)
                return None
            return self.verbatim(line)
        if p is not None:
            p[2].extend(text.split())
            p[3].append(line)
        else:
            self.paragraph = [prefix + " ", prefix + " ", text.split(), [line]]
        return None


def rewrap(src):
    lines = src.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = COMMENT.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent, marker = m.group(1), m.group(2)
        run = Run(indent + marker, marker == "//")
        fence = False
        while i < len(lines):
            m2 = COMMENT.match(lines[i])
            if not m2 or m2.group(1) != indent or m2.group(2) != marker:
                break
            body = m2.group(3)
            text = body[1:] if body.startswith(" ") else body
            if text.startswith(("```", "~~~")):
                run.verbatim(lines[i])
                fence = not fence
            elif fence:
                run.out.append(lines[i])
            else:
                run.add(lines[i])
            i += 1
        run.flush()
        out.extend(run.out)
    return "\n".join(out)


def main():
    check = "--check" in sys.argv
    files = [a for a in sys.argv[1:] if a != "--check"]
    if not files:
        # Every Rust file git tracks.
        listed = subprocess.run(
            ["git", "ls-files", "*.rs"], capture_output=True, text=True, check=True
        )
        files = listed.stdout.split()
    changed = []
    for f in files:
        src = open(f).read()
        new = rewrap(src)
        if new != src:
            changed.append(f)
            if not check:
                open(f, "w").write(new)
    for f in changed:
        print(f)
    if check and changed:
        sys.exit(1)


if __name__ == "__main__":
    main()
