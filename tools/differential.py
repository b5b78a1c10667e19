"""What the differential checks against kubectl share (tools/mutate_*.py): where the golden
cases and the oracle are, how a variant of a case is built by both, and how a difference is
reported.

A check gives `compare_variants` a function that yields, for one case's input folder, the
variants to try: a name and the files to write over a copy of the folder (relative path to
text or bytes). Each variant is built by `kubectl kustomize` (the oracle `make setup` installs)
and by our binary; it differs when one fails and the other does not, or both succeed with
different output. Variants are written under target/mutations/; the differing ones stay.
"""
import argparse
import os
import shutil
import subprocess

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests/fixtures/kustomize")
KUBECTL = os.path.join(ROOT, "target/venv/bin/kubectl")
OUT = os.path.join(ROOT, "target/mutations")
BINARY = os.path.join(ROOT, "target/debug/kustomize-controller")


def run(command):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        # kustomize loops forever on some inputs (a created list element its own selector
        # does not match); that counts as a failure.
        return "timeout", "", "(no answer in 120 s)"
    return done.returncode, done.stdout, done.stderr


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1][:300] if lines else "(output differs)"


def succeeding_cases(only=""):
    """(name, input folder) of every golden case kubectl builds."""
    for case in sorted(os.listdir(GOLDEN)):
        if only in case and os.path.exists(os.path.join(GOLDEN, case, "expected.yaml")):
            yield case, os.path.join(GOLDEN, case, "input")


def kustomization_files(case_input):
    """(path, parsed mapping) of every kustomization.yaml under a case's input."""
    for folder, _, names in sorted(os.walk(case_input)):
        for name in sorted(names):
            if name not in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
                continue
            path = os.path.join(folder, name)
            try:
                kustomization = yaml.safe_load(open(path))
            except (yaml.YAMLError, ValueError):
                continue
            if isinstance(kustomization, dict):
                yield path, kustomization


def compare_variants(case_variants, binary=BINARY, only=""):
    """Builds every variant `case_variants(case_input)` yields, (name, {relative path: text
    or bytes}), of every succeeding golden case with kubectl and with `binary`, and prints
    where they part."""
    runs = differ = 0
    for case, case_input in succeeding_cases(only):
        for name, files in case_variants(case_input):
            work = os.path.join(OUT, f"{case}--{name}")
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(case_input, work)
            for relative, content in files.items():
                mode = "wb" if isinstance(content, bytes) else "w"
                with open(os.path.join(work, relative), mode, **({} if mode == "wb" else {"newline": ""})) as out:
                    out.write(content)
            target = os.path.join(work, "overlay") if os.path.isdir(os.path.join(work, "overlay")) else work
            kubectl = run([KUBECTL, "kustomize", target])
            ours = run([binary, "build", target])
            runs += 1
            if (kubectl[0] == 0) == (ours[0] == 0) and (kubectl[0] != 0 or kubectl[1] == ours[1]):
                shutil.rmtree(work, ignore_errors=True)
                continue
            differ += 1
            print(f"DIFF {os.path.basename(work)} kubectl={kubectl[0]} ours={ours[0]}", flush=True)
            print("   kubectl:", last_line(kubectl[2]))
            print("   ours:   ", last_line(ours[2]))
    print(f"{runs} variants, {differ} differ")


def main(case_variants):
    """A check's command line: `[--binary PATH] [--only SUBSTRING]`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=BINARY)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    compare_variants(case_variants, args.binary, args.only)


def compare_random_trees(label, tree, binary=BINARY, count=300, first_seed=0):
    """Builds `count` trees drawn by `tree(seed)` ({relative path: text}, built at `overlay/`)
    with kubectl and with `binary`, keeps the differing ones under
    target/mutations/<label>-<seed>/ and prints them, and counts the verdicts."""
    verdicts = {}
    for seed in range(first_seed, first_seed + count):
        work = os.path.join(OUT, f"{label}-{seed}")
        shutil.rmtree(work, ignore_errors=True)
        for relative, text in tree(seed).items():
            os.makedirs(os.path.dirname(os.path.join(work, relative)), exist_ok=True)
            with open(os.path.join(work, relative), "w") as out:
                out.write(text)
        target = os.path.join(work, "overlay")
        kubectl = run([KUBECTL, "kustomize", target])
        ours = run([binary, "build", target])
        same = (kubectl[0] == 0) == (ours[0] == 0) and (kubectl[0] != 0 or kubectl[1] == ours[1])
        verdict = ("both build" if kubectl[0] == 0 else "both fail") if same else "differ"
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        if same:
            shutil.rmtree(work, ignore_errors=True)
            continue
        print(f"DIFF {label}-{seed} kubectl={kubectl[0]} ours={ours[0]}", flush=True)
        print("   kubectl:", last_line(kubectl[2]))
        print("   ours:   ", last_line(ours[2]))
    print(f"{count} trees: " + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))


def random_main(label, tree):
    """A random check's command line: `[--binary PATH] [--count N] [--seed S]`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=BINARY)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    compare_random_trees(label, tree, args.binary, args.count, args.seed)


def flat(relative):
    """A relative path as part of a variant's folder name."""
    return relative.replace("/", "_")
