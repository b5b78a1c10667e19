#!/usr/bin/env python3
"""Collects every Kustomization example of Flux kustomize-controller v1.9.4's API reference
(`docs/spec/v1/kustomizations.md`) into tests/fixtures/flux-docs/kustomizations.yaml, in the
order the document shows them, each preceded by a comment naming the section it is under.
`tests/integration/flux_docs.rs` checks that each is a Kustomization as Flux documents it:
our types read it, the API server takes it under our CRD, and its health check expressions
compile.

The document comes from a bare mirror of github.com/fluxcd/kustomize-controller (the `fetch`
tool's `/work/.mirror/fluxcd+kustomize-controller/repo`, or $FLUX_MIRROR). Needs PyYAML (a
developer tool, not a test dependency).

  python3 tools/flux_docs_examples.py [--mirror GIT_DIR]
"""
import argparse
import os
import re
import subprocess

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(HERE, "..", "tests", "fixtures", "flux-docs", "kustomizations.yaml")
TAG = "v1.9.4"
DOC = "docs/spec/v1/kustomizations.md"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", default=os.environ.get(
        "FLUX_MIRROR", "/work/.mirror/fluxcd+kustomize-controller/repo"))
    args = parser.parse_args()
    text = subprocess.run(["git", "--git-dir", args.mirror, "show", f"{TAG}:{DOC}"],
                          check=True, capture_output=True, text=True).stdout
    section = ""
    examples = []
    # Walk headings and YAML blocks in document order.
    for match in re.finditer(r"^(#+) ([^\n]+)$|^```yaml\n(.*?)^```", text, re.S | re.M):
        if match.group(1):
            section = match.group(2).strip()
            continue
        try:
            documents = [d for d in yaml.safe_load_all(match.group(3)) if d]
        except yaml.YAMLError:
            continue  # a block with placeholders (`...`), not a manifest
        for document in documents:
            if (isinstance(document, dict) and document.get("kind") == "Kustomization"
                    and str(document.get("apiVersion", "")).startswith("kustomize.toolkit.fluxcd.io/")):
                examples.append((section, document))
    os.makedirs(os.path.dirname(TARGET), exist_ok=True)
    with open(TARGET, "w") as out:
        out.write(f"# Every Kustomization example of fluxcd/kustomize-controller {TAG} {DOC},\n"
                  "# in document order, written by tools/flux_docs_examples.py.\n")
        for section, document in examples:
            out.write(f"---\n# {section}\n")
            out.write(yaml.safe_dump(document, sort_keys=False))
    print(f"{len(examples)} examples -> {os.path.relpath(TARGET)}")


if __name__ == "__main__":
    main()
