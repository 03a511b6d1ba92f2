#!/usr/bin/env python3
"""Size limits of the sources that keep them (docs/experiments.md "Code layout", docs/store.md
"Components"): lists functions over 80 lines and files over 600 lines, and files that mention a
header only one file may include (`--only HEADER=FILE`: the store's sqlite3.h, db/sqlite.cpp).

Usage: scripts/check-sizes.py [--strict] [--only HEADER=FILE ...] [DIR ...]
       (default: src/experiments src/lm src/store --only sqlite3.h=src/store/db/sqlite.cpp)

A crude scan: comments and string/char literals are blanked, then every top-level or
namespace-level `{` that follows a `)` (optionally with const/noexcept/override/-> T or a
constructor's initialiser list) opens a function whose body runs to the matching `}`; lambdas
inside count toward their enclosing function. Prints one line per offender and a summary;
--strict exits 1 when there is any.
"""
import os
import re
import sys

kMaxFunction = 80
kMaxFile = 600


def blank(text):
    """Comments and literals replaced by spaces, newlines kept (line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, line count) of every function body in the file."""
    text = blank(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # per open brace: "scope" (namespace/class/extern), "func", or "other"
    i = 0
    while i < len(text):
        c = text[i]
        if c == "{":
            head = text[max(0, i - 400):i]
            in_func = any(k == "func" for k, _, _ in stack)
            kind = "other"
            if not in_func:
                stmt = re.split(r"[;{}]", head)[-1]
                if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", stmt) or \
                        re.search(r'extern\s*$', stmt):
                    kind = "scope"
                elif re.search(r"\)\s*(const|noexcept|override|final|mutable|\s|->[^;{}]*|"
                               r":[^;{}]*)*$", stmt):
                    kind = "func"
                    if ":" in stmt and ")" not in stmt.split(":")[0] and "::" not in stmt:
                        pass
            name = ""
            if kind == "func":
                stmt = re.split(r"[;{}]", head)[-1]
                m = re.search(r"([~\w:<>]+)\s*\([^()]*(\([^()]*\)[^()]*)*\)", stmt)
                name = m.group(1) if m else stmt.strip()[:40]
            line = text.count("\n", 0, i) + 1
            stack.append((kind, line, name))
        elif c == "}" and stack:
            kind, line, name = stack.pop()
            if kind == "func":
                end = text.count("\n", 0, i) + 1
                found.append((name, line, end - line + 1))
        i += 1
    return found


def header_users(dirs, only):
    """Files under `dirs` that mention HEADER without being its one allowed FILE."""
    bad = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                path = os.path.join(root, f)
                if not f.endswith((".cpp", ".h")):
                    continue
                text = open(path, encoding="utf-8", errors="replace").read()
                for header, allowed in only:
                    if header in text and not os.path.samefile(path, allowed):
                        bad.append(f"{path} mentions {header} (only {allowed} may include it)")
    return bad


def parse(argv):
    strict = "--strict" in argv
    only, dirs, k = [], [], 0
    while k < len(argv):
        if argv[k] == "--only" and k + 1 < len(argv) and "=" in argv[k + 1]:
            only.append(tuple(argv[k + 1].split("=", 1)))
            k += 2
            continue
        if not argv[k].startswith("--"):
            dirs.append(argv[k])
        k += 1
    if not dirs:
        dirs = ["src/experiments", "src/lm", "src/store"]
        only = only or [("sqlite3.h", "src/store/db/sqlite.cpp")]
    return strict, only, dirs


def main(argv):
    strict, only, dirs = parse(argv)
    long_functions, long_files, n_functions, n_files = [], [], 0, 0
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(root, f)
                n_files += 1
                lines = sum(1 for _ in open(path, encoding="utf-8", errors="replace"))
                if lines > kMaxFile:
                    long_files.append((lines, path))
                for name, line, length in functions(path):
                    n_functions += 1
                    if length > kMaxFunction:
                        long_functions.append((length, f"{path}:{line}", name))
    headers = header_users(dirs, only)
    for lines, path in sorted(long_files, reverse=True):
        print(f"file     {lines:5d} lines  {path}")
    for length, where, name in sorted(long_functions, reverse=True):
        print(f"function {length:5d} lines  {where}  {name}")
    for line in headers:
        print(f"include  {line}")
    print(f"{n_files} files, {n_functions} functions; over {kMaxFile} lines: {len(long_files)} "
          f"files; over {kMaxFunction} lines: {len(long_functions)} functions; "
          f"misplaced includes: {len(headers)}")
    return 1 if strict and (long_files or long_functions or headers) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
