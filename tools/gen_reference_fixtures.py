#!/usr/bin/env python3
"""Derives the reference CRDs the tests need from ../shared/reference/crds into
tests/fixtures/reference/crds, so that a fresh clone tests with nothing beside it.

Each CRD keeps every field but `description` (documentation only: the schema comparison in
tests/integration/crd.rs skips it, and the test API server does not read it). Needs PyYAML
(a developer tool, not a test dependency).

  python3 tools/gen_reference_fixtures.py          # write the fixtures
  python3 tools/gen_reference_fixtures.py --check  # exit 1 if the fixtures are stale
"""
import argparse
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..", "shared", "reference", "crds")
TARGET = os.path.join(HERE, "..", "tests", "fixtures", "reference", "crds")
FILES = [
    "kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    "source.toolkit.fluxcd.io_buckets.yaml",
    "source.toolkit.fluxcd.io_externalartifacts.yaml",
    "source.toolkit.fluxcd.io_gitrepositories.yaml",
    "source.toolkit.fluxcd.io_ocirepositories.yaml",
]
HEADER = (
    "# Derived by tools/gen_reference_fixtures.py from Flux's CRD of the same name\n"
    "# (see tests/fixtures/reference/README.md): descriptions removed, nothing else changed.\n"
)


def without_descriptions(node, in_properties=False):
    """Drops `description` keywords; a property that is itself named `description` stays."""
    if isinstance(node, dict):
        return {
            key: without_descriptions(value, key == "properties")
            for key, value in node.items()
            if in_properties or key != "description"
        }
    if isinstance(node, list):
        return [without_descriptions(item) for item in node]
    return node


def derive(name):
    with open(os.path.join(SOURCE, name), encoding="utf-8") as source:
        documents = [d for d in yaml.safe_load_all(source) if d is not None]
    body = "---\n".join(
        yaml.safe_dump(without_descriptions(d), sort_keys=False, width=100) for d in documents
    )
    return HEADER + body


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    if not os.path.isdir(SOURCE):
        sys.exit(f"reference CRDs not found at {SOURCE}: the shared/ folder must sit beside the repository")
    os.makedirs(TARGET, exist_ok=True)
    stale = []
    for name in FILES:
        text = derive(name)
        path = os.path.join(TARGET, name)
        if args.check:
            current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if current != text:
                stale.append(name)
            continue
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {os.path.relpath(path)} ({len(text)} bytes)")
    if stale:
        sys.exit("stale fixtures (run tools/gen_reference_fixtures.py): " + ", ".join(stale))


if __name__ == "__main__":
    main()
