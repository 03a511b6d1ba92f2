#!/usr/bin/env python3
"""Size limits of the store's sources (docs/store.md "Components"): every file under src/store below
600 lines, every function (from its signature's first line to its closing brace) at most 80
lines, and only the SQLite backend includes sqlite3.h.

    python3 scripts/check-store-sizes.py [ROOT]      (exit status 1 when a limit is exceeded)

The function scan is a brace matcher over the source with comments, strings and character
literals blanked: a brace whose header (the text since the previous ';', '{' or '}') has a
parameter list and is not a class, struct, enum, namespace, initializer or lambda opens a
function. Lambdas and blocks count towards the function that holds them."""
import pathlib
import re
import sys

MAX_FILE = 600
MAX_FUNCTION = 80
NOT_FUNCTION = re.compile(r"\b(namespace|class|struct|enum|union)\b|=\s*$|\]\s*\(.*\)\s*(mutable\s*)?(->.*)?$")


def blank(src):
    """Comments, string and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', src[i:])
            end = ")" + m.group(1) + '"'
            j = src.find(end, i) + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", src[i + 2:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and src[i - 1].isalnum()):
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, line count) of every function body in the file."""
    text = blank(path.read_text())
    found, stack, header_start = [], [], 0
    line_of = lambda pos: text.count("\n", 0, pos) + 1
    for pos, c in enumerate(text):
        if c == "{":
            header = text[header_start:pos].strip()
            inside_function = any(kind == "function" for kind, _, _ in stack)
            is_function = (not inside_function and "(" in header and ")" in header
                           and not NOT_FUNCTION.search(" ".join(header.split())))
            first = header_start + (len(text[header_start:pos]) - len(text[header_start:pos].lstrip()))
            stack.append(("function" if is_function else "block", first, header))
            header_start = pos + 1
        elif c == "}":
            if stack:
                kind, first, header = stack.pop()
                if kind == "function":
                    name = header.split("(")[0].split()[-1] if header.split("(")[0].split() else "?"
                    found.append((name, line_of(first), line_of(pos) - line_of(first) + 1))
            header_start = pos + 1
        elif c == ";":
            header_start = pos + 1
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    store = root / "src" / "store"
    bad = 0
    for path in sorted(p for p in store.rglob("*") if p.suffix in (".h", ".cpp")):
        rel = path.relative_to(root)
        lines = path.read_text().count("\n")
        if lines >= MAX_FILE:
            print(f"{rel}: {lines} lines (limit {MAX_FILE - 1})")
            bad += 1
        for name, first, count in functions(path):
            if count > MAX_FUNCTION:
                print(f"{rel}:{first}: function {name} is {count} lines (limit {MAX_FUNCTION})")
                bad += 1
        if "sqlite3.h" in path.read_text() and path.name not in ("sqlite.cpp",):
            print(f"{rel}: mentions sqlite3.h (only db/sqlite.cpp may include it)")
            bad += 1
    print(f"check-store-sizes: {bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
