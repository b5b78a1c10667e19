#!/usr/bin/env python3
"""Ports the expectations of gopkg.in/evanphx/json-patch.v4's own tables (patch_test.go:
Cases, MutationTestCases, BadCases, TestCases) into tests/fixtures/go/json-patch-v4.json,
for the unit tests of crates/kustomize-engine/src/kustomize/json6902.rs.

kustomize v5.8.1 pins v4.13.0. The mirror has tags up to v4.12.0 only; the v4 code lives on in
the repository's root package, whose last change (42f26cb, January 2025: errors wrapped with
fmt, a `test` without `value` passing on a missing member) is read by default. Left out and
counted under "omitted": rows built at run time by Go code (`fmt.Sprintf`), rows with an empty
document (kustomize never patches one), and `Cases` rows whose document is a list (Go's test
compares results as JSON objects, so for those it asserts nothing, and one row's stated result
is not what the library returns; kustomize only patches objects).

Usage: tools/port_json_patch_tables.py <evanphx/json-patch git dir> [rev]   (rev: 42f26cb)
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests/fixtures/go/json-patch-v4.json")

TOKEN = re.compile(r'`[^`]*`|"(?:[^"\\]|\\.)*"|\btrue\b|\bfalse\b|fmt\.Sprintf|[{}]|//[^\n]*')


def groups(source, table):
    """The literal fields of each `{...}` row of a Go table, or None for a row built by code."""
    start = source.index(f"var {table} = ")
    body = source[source.index("{", start) + 1:]
    depth, row, built = 0, [], False
    for token in TOKEN.findall(body):
        if token.startswith("//"):
            continue
        if token == "{":
            depth += 1
            row, built = ([], False) if depth == 1 else (row, built)
        elif token == "}":
            if depth == 0:
                return
            depth -= 1
            if depth == 0:
                yield None if built else row
        elif token == "fmt.Sprintf":
            built = True
        elif depth == 1:
            row.append(token)


def value(token):
    if token in ("true", "false"):
        return token == "true"
    if token.startswith("`"):
        return token[1:-1]
    return json.loads(token)


def main():
    git_dir = sys.argv[1]
    tag = sys.argv[2] if len(sys.argv) > 2 else "42f26cb"
    source = subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:patch_test.go"],
                            check=True, capture_output=True, text=True).stdout
    fixture = {"source": f"evanphx/json-patch {tag} patch_test.go", "omitted": 0}
    for table, fields in (("Cases", ("doc", "patch", "result")),
                          ("MutationTestCases", ("doc", "patch")),
                          ("BadCases", ("doc", "patch")),
                          ("TestCases", ("doc", "patch", "passes", "failed_path"))):
        rows = []
        for row in groups(source, table):
            vacuous = table == "Cases" and row is not None and value(row[0]).lstrip().startswith("[")
            if row is None or not value(row[0]).strip() or vacuous:
                fixture["omitted"] += 1
                continue
            rows.append(dict(zip(fields, map(value, row))))
        fixture[table] = rows
    with open(OUT, "w") as out:
        json.dump(fixture, out, indent=1)
        out.write("\n")
    print(f"{OUT}: " + ", ".join(f"{t} {len(fixture[t])}" for t in
                                 ("Cases", "MutationTestCases", "BadCases", "TestCases"))
          + f", {fixture['omitted']} omitted")


if __name__ == "__main__":
    main()
