#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/) from the project's own fixtures.

build: a golden case's kustomization.yaml, then each resource file it lists beside it, joined
by NUL bytes (the layout fuzz/harness.rs reads). sops_decrypt: a format selector byte, then a
SOPS file from tests/fixtures/sops. Run from the repository root; the output is committed.
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests/fixtures/kustomize")
SOPS = os.path.join(ROOT, "tests/fixtures/sops")
OUT = os.path.join(ROOT, "fuzz/corpus")
FORMATS = {".yaml": 0, ".yml": 0, ".json": 1, ".env": 2, ".ini": 3}
# Cases seeded whatever the sampling picks: features the sample may miss.
ALWAYS = [
    "transformers-valueadd-defaults-namespace-and-lists",
    "transformers-valueadd-filter-rows",
]


def build_seeds():
    seeds = []
    for case in sorted(os.listdir(GOLDEN)):
        inp = os.path.join(GOLDEN, case, "input")
        kust = os.path.join(inp, "kustomization.yaml")
        if not os.path.isfile(kust):
            continue
        files = [f for f in sorted(os.listdir(inp)) if f != "kustomization.yaml"
                 and os.path.isfile(os.path.join(inp, f))]
        if not files or len(files) > 4:
            continue
        text = open(kust, "rb").read()
        # The harness names resource files r0.yaml, r1.yaml, …
        parts = []
        for index, name in enumerate(files):
            text = text.replace(name.encode(), f"r{index}.yaml".encode())
            parts.append(open(os.path.join(inp, name), "rb").read())
        if any(b"\0" in p for p in [text] + parts):
            continue
        seeds.append((case, b"\0".join([text] + parts)))
    sampled = seeds[::6][:60]
    return sampled + [seed for seed in seeds if seed[0] in ALWAYS and seed not in sampled]


def sops_seeds():
    seeds = []
    for dirpath, _, names in os.walk(SOPS):
        for name in sorted(names):
            ext = os.path.splitext(name)[1]
            path = os.path.join(dirpath, name)
            data = open(path, "rb").read()
            if b"sops" not in data or name.endswith((".asc", ".md", ".txt")) and b"ENC[" not in data:
                continue
            selector = FORMATS.get(ext, 4)
            seeds.append((os.path.relpath(path, SOPS).replace("/", "_"), bytes([selector]) + data))
    return sorted(seeds)[:60]


def write(target, seeds):
    # The corpus only grows: inputs libFuzzer found, or added by hand, stay.
    out = os.path.join(OUT, target)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds:
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{target}: {len(seeds)} seeds")


write("build_tree", build_seeds())
write("sops_decrypt", sops_seeds())
