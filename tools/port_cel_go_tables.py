#!/usr/bin/env python3
"""Ports the expectations of cel-go's `string.format` table (ext/formatting_v2_test.go,
TestStringFormatV2 — the formatter `ext.Strings()` uses at its default version, as Flux's
environment does) into tests/fixtures/cel-go/string_format_v2.json.

Each row becomes a CEL expression built as cel-go's test builds it (`"<format>".format([<args>])`)
with the expected output or the expected error text. Rows whose variables are Go values that a
Flux object cannot hold (protobuf messages) are left out and listed under "omitted"; other
variables are written inline as the CEL literal of their value.

Usage: tools/port_cel_go_tables.py <cel-go git dir> [tag]   (tag defaults to v0.26.1)
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests/fixtures/cel-go/string_format_v2.json")

GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
              "\\": "\\", '"': '"', "'": "'"}


def go_string(literal):
    """The value of a Go string literal (interpreted or raw)."""
    if literal.startswith("`"):
        return literal[1:-1]
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in GO_ESCAPES:
            out.append(GO_ESCAPES[e])
            i += 2
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            out.append(chr(int(body[i + 2:i + 2 + width], 16)))
            i += 2 + width
        else:
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
    return "".join(out)


def cel_string(text):
    """`text` as a double-quoted CEL string literal."""
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append("\\x%02x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


STRING = r'"(?:[^"\\]|\\.)*"|`[^`]*`'
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


def cel_literal(go):
    """The CEL literal of a Go value expression from the table's dynArgs, or None."""
    go = go.strip().rstrip(",").strip()
    if re.fullmatch(STRING, go):
        return cel_string(go_string(go))
    if re.fullmatch(r"-?\d+", go) or go in ("true", "false"):
        return go
    if re.fullmatch(r"-?\d+\.\d*(e[+-]?\d+)?", go):
        return go
    m = re.fullmatch(r"u?int(?:64|32)?\((\d+)\)", go)
    if m:
        return m.group(1) + ("u" if go.startswith("u") else "")
    if go == "math.NaN()":
        return 'double("NaN")'
    m = re.fullmatch(r"math\.Inf\((-?1)\)", go)
    if m:
        return 'double("%sInfinity")' % ("-" if m.group(1) == "-1" else "")
    m = re.fullmatch(r"mustParseDuration\((%s)\)" % STRING, go)
    if m:
        return "duration(%s)" % cel_string(go_string(m.group(1)))
    m = re.fullmatch(r"time\.Date\((\d+), time\.(\w+), (\d+), (\d+), (\d+), (\d+), 0, time\.UTC\)", go)
    if m:
        y, month, d, h, mi, s = m.groups()
        return 'timestamp("%s-%02d-%02dT%02d:%02d:%02dZ")' % (
            y, MONTHS.index(month) + 1, int(d), int(h), int(mi), int(s))
    m = re.fullmatch(r"\[\]any\{(.*)\}", go, re.S)
    if m:
        items = [cel_literal(item) for item in split_top(m.group(1))]
        return None if None in items else "[%s]" % ", ".join(items)
    m = re.fullmatch(r"map\[any\]any\{(.*)\}", go, re.S)
    if m:
        entries = []
        for entry in split_top(m.group(1)):
            key, value = split_top(entry, ":")
            key, value = cel_literal(key), cel_literal(value)
            if key is None or value is None:
                return None
            entries.append("%s: %s" % (key, value))
        return "{%s}" % ", ".join(entries)
    return None


def split_top(text, sep=","):
    """`text` split at `sep` outside brackets and strings, empty parts dropped."""
    parts, depth, current, i = [], 0, [], 0
    while i < len(text):
        m = re.match(STRING, text[i:])
        if m:
            current.append(m.group(0))
            i += len(m.group(0))
            continue
        c = text[i]
        depth += c in "([{"
        depth -= c in ")]}"
        if c == sep and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def rows(source):
    table = source.split("func TestStringFormatV2", 1)[1].split("\n\t}\n\tfor ", 1)[0]
    for block in re.split(r"\n\t\t\{\n", table)[1:]:
        fields = {}
        for name in ("name", "format", "formatArgs", "err", "expectedOutput"):
            m = re.search(r"\n?\s*%s:\s*(%s)," % (name, STRING), "\n" + block)
            if m:
                fields[name] = go_string(m.group(1))
        dyn = re.search(r"dynArgs: map\[string\]any\{\n(.*?)\n\t\t\t\},", block, re.S)
        fields["dynArgs"] = {}
        if dyn:
            for entry in split_top(dyn.group(1)):
                key, value = split_top(entry, ":")[0], entry.split(":", 1)[1]
                fields["dynArgs"][go_string(key)] = cel_literal(value)
        fields["compileCheck"] = "skipCompileCheck: true" not in block
        yield fields


def main():
    git_dir = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) > 2 else "v0.26.1"
    source = subprocess.run(["git", "--git-dir", git_dir, "show", tag + ":ext/formatting_v2_test.go"],
                            check=True, capture_output=True, text=True).stdout
    cases, omitted = [], []
    for row in rows(source):
        args = row.get("formatArgs", "")
        if None in row["dynArgs"].values() or "TestAllTypes" in args:
            omitted.append({"name": row["name"], "why": "a protobuf message value"})
            continue
        for variable, literal in row["dynArgs"].items():
            args = re.sub(r"\b%s\b" % re.escape(variable), lambda _: literal, args)
        case = {"name": row["name"], "expression": "%s.format([%s])" % (cel_string(row["format"]), args)}
        if "err" in row:
            case["error"] = row["err"]
            # Only cel-go's type-checker (StringsValidateFormatCalls, which Flux does not
            # enable) reports this one; at run time the extra arguments are ignored.
            if row["err"].startswith("too many arguments"):
                omitted.append({"name": row["name"], "why": "a check-time error only"})
                continue
        else:
            case["output"] = row["expectedOutput"]
        cases.append(case)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as out:
        json.dump({"source": "google/cel-go %s ext/formatting_v2_test.go TestStringFormatV2" % tag,
                   "cases": cases, "omitted": omitted}, out, indent=1, ensure_ascii=False)
        out.write("\n")
    print("%d cases, %d omitted -> %s" % (len(cases), len(omitted), os.path.relpath(OUT, ROOT)))


if __name__ == "__main__":
    main()
