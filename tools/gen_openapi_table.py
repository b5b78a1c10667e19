#!/usr/bin/env python3
"""Generates crates/kustomize-engine/src/kustomize/openapi_v1_21_2.json from ../shared/reference/openapi/patch-merge-keys.json.

The engine needs two things from the Kubernetes v1.21.2 schema kustomize embeds: the scope of
each apiVersion/kind, and the strategic-merge metadata (merge key, patch strategy, list type)
along property paths from each kind's root definition. This keeps only definitions from which
such metadata can be reached, so the compiled-in table stays small.

Output: {"kinds": [[apiVersion, kind, definition or null, "Namespaced"|"Cluster"|null]],
         "definitions": {name: {property: [ref or null, mergeKey, strategy, listType, listMapKeys]}}}
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
source = os.path.join(here, "..", "..", "shared", "reference", "openapi", "patch-merge-keys.json")
target = os.path.join(here, "..", "crates", "kustomize-engine", "src", "kustomize", "openapi_v1_21_2.json")

data = json.load(open(source))
meta = {}
for p in data["properties"]:
    meta.setdefault(p["definition"], {})[p["property"]] = p
refs = data["refs"]

interesting = set(meta)
changed = True
while changed:
    changed = False
    for definition, props in refs.items():
        if definition in interesting:
            continue
        if any(link["ref"] in interesting for link in props.values()):
            interesting.add(definition)
            changed = True

definitions = {}
for definition in sorted(interesting):
    props = {}
    names = set(meta.get(definition, {})) | {p for p, l in refs.get(definition, {}).items() if l["ref"] in interesting}
    for name in sorted(names):
        m = meta.get(definition, {}).get(name, {})
        link = refs.get(definition, {}).get(name)
        ref = link["ref"] if link and link["ref"] in interesting else None
        props[name] = [ref, m.get("mergeKey"), m.get("strategy"), m.get("listType"), m.get("listMapKeys")]
    definitions[definition] = props

kinds = [
    [k["apiVersion"], k["kind"], k["definition"] if k["definition"] in interesting else None, k["scope"]]
    for k in data["kinds"]
    if k["scope"] is not None or k["definition"] in interesting
]
out = {"source": data["source"], "kinds": kinds, "definitions": definitions}
with open(target, "w") as f:
    json.dump(out, f, separators=(",", ":"), sort_keys=True)
    f.write("\n")
print(f"{target}: {len(kinds)} kinds, {len(definitions)} definitions, {os.path.getsize(target)} bytes", file=sys.stderr)
