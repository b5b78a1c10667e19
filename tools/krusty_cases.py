#!/usr/bin/env python3
"""Turns kustomize's own `api/krusty/*_test.go` (tag kustomize/v5.8.1) into golden cases.

Each test function is run symbolically by a small Go-subset interpreter
(`krusty_goparse.py`, `krusty_gointerp.py`) against a model of the test harness
(`krusty_harness.py`): the harness calls it makes (`th.WriteK/WriteF/WriteC/
WriteLegacyConfigs`, `th.Run`, `th.RunWithErr`, `krusty.MakeKustomizer(..).Run`, testify
assertions) are recorded, each build becoming one case under
`tests/fixtures/kustomize-upstream/<file-stem>--<TestName>[--<subcase>][--runN]/`:
`input/` (the in-memory file system, `/` = `input/`), `build-dir` (the built directory,
relative to `input/`, when it is not `input/` itself) and the oracle's verdict, as
`tests/fixtures/kustomize/regen.sh` writes it: `expected.yaml`, or `kubectl-error.txt` plus
`expected-error.txt` (1-2 fragments any faithful implementation must print). `INDEX.md` maps
every upstream test to its cases or the reason it is not ported; `RESULTS.md` records how our
binary does on them.

Usage: tools/krusty_cases.py [--mirror GIT_DIR] [--no-generate] [--no-results]
(the mirror also comes from $KUSTOMIZE_MIRROR). Re-running regenerates everything.
"""
import argparse
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the helper modules
sys.path.insert(0, str(Path(__file__).resolve().parent))
from krusty_gointerp import Unportable  # noqa: E402
from krusty_harness import KUST_NAMES, TMP, load_tests, run_test  # noqa: E402

TAG = 'kustomize/v5.8.1'
MIRROR = '/work/.mirror/kubernetes-sigs+kustomize/repo'
REPO = Path(__file__).resolve().parent.parent
OUT = REPO / 'tests/fixtures/kustomize-upstream'
KUBECTL = REPO / 'target/venv/bin/kubectl'
OURS = REPO / 'target/debug/kustomize-controller'
REMOTE = (r'^\s*(-|path:)\s*["\']?((https?|ssh|git|file)://|git@|git::|github\.com/|gitlab\.com/'
          r'|[\w.-]+@[\w.-]+\.[a-z]+/)')  # a remote resource, base or schema
# Hand-picked error fragments (the automatic choice is a fallback): case -> fragments.
FRAGMENTS = {k: v.split('|') for k, v in {
    'accumulation--TestAccumulateResourcesErrors--malformed-yaml-yields-an-error': 'service.yaml',
    'accumulation--TestAccumulateResourcesErrors--relative-file-violates-restrictions':
        'base/resource.yaml|is not in or below',
    'accumulation--TestAccumulateResourcesErrors--relative-path-does-not-exist': 'file-or-directory',
    'accumulation--TestBaseMustHaveKustomizationFile': 'base|kustomization.yaml',
    'accumulation--TestResourceNotFound': 'deployment.yaml',
    'accumulation--TestTargetMustHaveKustomizationFile': 'kustomization.yaml',
    'accumulation--TestTargetMustHaveOnlyOneKustomizationFile': 'multiple kustomization files',
    'baseandoverlaysmall--TestSharedPatchDisAllowed': 'shared/deployment-patch.yaml|is not in or below',
    'basic_io--TestBasicIO3812': 'service.yaml',
    'blankvalues--TestBlankNamespace4240': 'namespace is blank',
    'complexcomposition--TestComplexComposition_Dev_Failure': 'already registered id|my-sts',
    'complexcomposition--TestComplexComposition_Prod_Failure': 'already registered id|my-sts',
    'component--TestComponentErrors--components-cannot-add-bases-containing-the-same-resource':
        'already registered id|proxy',
    'component--TestComponentErrors--components-cannot-add-the-same-base': 'already registered id|storefront',
    'component--TestComponentErrors--components-cannot-add-the-same-resource': 'already registered id|proxy',
    'component--TestComponentErrors--components-cannot-be-added-to-resources': 'Component|comp',
    'component--TestComponentErrors--files-cannot-be-added-to-components-list': 'stub.yaml|directory',
    'component--TestComponentErrors--invalid-component-api-version':
        'apiVersion for Component should be kustomize.config.k8s.io/v1alpha1',
    'component--TestComponentErrors--kustomizations-cannot-be-added-to-components':
        "expected kind 'Component'|Kustomization",
    'diamondcomposition--TestIssue1251_CompositeDiamond_Failure': 'already registered id|my-deployment',
    'diamondcomposition--TestIssue1251_Patches_ProdVsDev_Failure':
        'patches/patchAddProbe.yaml|is not in or below',
    'generatormergeandreplace--TestConfigMapGeneratingIntoSameNamespace': 'behavior must be merge or replace',
    'generatormergeandreplace--TestSecretGeneratingIntoSameNamespace': 'behavior must be merge or replace',
    'gvknpatch--TestPatchOriginalNameAndNewKind': 'new-name|no matches for Id',
    'intermediateresourceid--TestIntermediateNameAmbiguous': 'multiple matches for Id|foo',
    'kustomizer--TestEmptyFileSystem': 'noSuchThing',
    'openapicustomschema--TestCustomOpenApiFieldFileNotFound': 'mycrd_schema.json',
    'repeatbase--TestRepeatBase': 'multiple matches for Id|banana',
    'sortordertransformer--TestInvalidLegacySortOptionsWithFIFOOrder': 'sortOptions.legacySortOptions|fifo',
    'sortordertransformer--TestInvalidLegacySortOptionsWithoutOrderKey': 'sortOptions.order|must be one of',
    'sortordertransformer--TestSortOrderGivenAsTransformer': 'SortOrderTransformer',
    'variableref--TestBasicVarCollision': 'POD_NAME|already encountered',
    'variableref--TestBug506': 'POD_NAME|already encountered',
}.items()}


class GitTag:
    """Files of the kustomize mirror at TAG."""

    def __init__(self, mirror):
        self.mirror = mirror

    def git(self, *args):
        """The output of a git command in the mirror."""
        return subprocess.run(['git', '-C', self.mirror, *args], check=True, capture_output=True,
                              text=True).stdout

    def show(self, path):
        """The text of a file."""
        return self.git('show', f'{TAG}:{path}')

    def ls(self, directory):
        """The paths of a directory's entries."""
        return self.git('ls-tree', '--name-only', TAG, directory).split()


def sanitize(s):
    """A sub-test name as a folder-name component."""
    return re.sub(r'[^A-Za-z0-9_.]+', '-', s).strip('-')[:70] or 'case'


def case_names(stem, test, builds):
    """Folder names for a test's builds: --subcase per t.Run level, --runN when a (sub)test
    builds more than once."""
    per = Counter(b.names for b in builds)
    seen, seq, names = set(), Counter(), []
    for b in builds:
        seq[b.names] += 1
        name = '--'.join([f'{stem}--{test}'] + [sanitize(n) for n in b.names])
        name += f'--run{seq[b.names]}' if per[b.names] > 1 else ''
        base, i = name, 2
        while name in seen:
            name, i = f'{base}-{i}', i + 1
        seen.add(name)
        names.append(name)
    return names


def unportable_reason(b):
    """Why a recorded build cannot be a golden case built with default options, or None."""
    o = b.opts
    if o['LoadRestrictions'] != 'RootOnly':
        return f"needs --load-restrictor LoadRestrictions{o['LoadRestrictions']}"
    if o['AddManagedbyLabel'] is not False:
        return 'needs the AddManagedbyLabel build option'
    if any('EnableExec' in str(m) for m in o['mods']):
        return 'needs exec KRM functions (plugin config EnableExec)'
    if o['mods'] or o['plugins'] == 'custom':
        return 'custom plugin config (' + ', '.join(map(str, o['mods'])) + ')'
    if b.prepared and o['plugins'] == 'enabled':
        return 'needs a compiled plugin: ' + ', '.join(b.prepared)
    for path, content in b.files.items():
        if re.search(r'config\.(kubernetes\.io|k8s\.io)/function', content):
            return 'needs KRM functions'
        if posixpath.basename(path) in KUST_NAMES:
            for ref in re.findall(r'(?:^|[\s\'"])((?:\.\./)+[^\s\'"]*|\.\.)(?=$|[\s\'"])', content, re.M):
                if posixpath.normpath(posixpath.join(posixpath.dirname(path), ref)).startswith('..'):
                    return "refers above the root (in the test's in-memory file system '/..' is '/')"
            if re.search(r'^\s*helm(Charts|Globals|ChartInflationGenerator)\s*:', content, re.M):
                return 'needs helm (helmCharts)'
            if re.search(REMOTE, content, re.M):
                return 'needs git repositories the test creates (file:// remote)' \
                    if 'file://' in content else 'needs the network (remote resource)'
        if TMP in content:
            return 'a file names an absolute path of the test file system'
    return None


# --- the oracle -----------------------------------------------------------------------------------
def input_dir(case):
    """The directory a case builds: input/ or input/<build-dir>."""
    bd = case / 'build-dir'
    return case / 'input' / bd.read_text().strip() if bd.exists() else case / 'input'


def write_case(case, b):
    """Writes a build's file tree under case/input and its build-dir."""
    shutil.rmtree(case, ignore_errors=True)
    (case / 'input').mkdir(parents=True)
    for d in b.dirs:
        (case / 'input' / d).mkdir(parents=True, exist_ok=True)
    for path, content in sorted(b.files.items()):
        if not path:
            raise Unportable('a file is written at the root path')
        f = case / 'input' / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(content.encode('utf-8', 'surrogateescape'))
    if b.path or (case / 'input/overlay').is_dir():
        (case / 'build-dir').write_text((b.path or '.') + '\n')


def run_oracle(case):
    """Runs kubectl kustomize on a case: (True, output) or (False, normalized message)."""
    p = subprocess.run([str(KUBECTL), 'kustomize', str(input_dir(case))], capture_output=True,
                       text=True, errors='backslashreplace', timeout=120)
    if p.returncode == 0:
        return True, p.stdout.rstrip('\n') + '\n'
    msg = re.sub(r'^E\d+ [\d:.]+ +\d+ run.go:\d+\] "command failed" err=', '', p.stderr, flags=re.M)
    msg = re.sub(r'^error: ', '', msg, flags=re.M).replace(str(case / 'input'), 'INPUT')
    return False, re.sub(r'0x[0-9a-f]{6,}', '0x...', msg)  # pointers would change every run


def pick_fragments(case, msg, b):
    """1-2 short pieces of kubectl's message that a faithful implementation must also print:
    the Go test's own expected substring (or its longest plain clause) when kubectl's message
    has it, then a quoted name (file, field, resource) from the message that the input has."""
    if case.name in FRAGMENTS:
        return FRAGMENTS[case.name]
    msg = '\n'.join(l for l in msg.splitlines() if not l.startswith('# Warning'))
    plain = lambda f: (3 <= len(f) <= 60 and f in msg and 'INPUT' not in f and '[no' not in f
                       and re.search(r'[A-Za-z]{2}', f))
    frags = []
    for f in b.frags:
        if isinstance(f, str):
            pieces = [f] if plain(f) else sorted(filter(plain, re.split(r': |\n', f)), key=len)[-1:]
            frags += [p for p in pieces if p not in frags]
    corpus = '\n'.join(list(b.files) + list(b.files.values()))
    quoted = [re.sub(r'^INPUT/?', '', q) for pair in re.findall(r"'([^'\n]+)'|\"([^\"\n]+)\"", msg)
              for q in pair if q]
    quoted = [q for q in quoted if plain(q) and ': ' not in q and q.strip() == q
              and (q in corpus or posixpath.basename(q) in corpus)]
    frags += [q for q in quoted if not any(q in f or f in q for f in frags)][:1]
    if not frags:
        last = msg.strip().splitlines()[-1].split(': ')[-1].strip() if msg.strip() else ''
        frags = [last[:60]] if last and 'INPUT' not in last else []
    return frags[:2]


def compare_with_go(b, ok, result):
    """Notes on where kubectl disagrees with the Go test's own expectation."""
    notes = []
    if b.expect == 'error' and ok:
        notes.append('the Go test expects an error; kubectl succeeds')
    if b.expect == 'ok' and not ok:
        notes.append('the Go test expects success; kubectl fails')
    if ok and b.output is not None:
        want = b.output[1:] if b.output.startswith('\n') else b.output
        if want.rstrip('\n') != result.rstrip('\n'):
            docs = lambda s: sorted(d.strip() for d in re.split(r'^---$', s, flags=re.M))
            if docs(want) == docs(result):
                notes.append("kubectl's output differs from the Go test's in order only "
                             f"(the test builds with reorder={b.opts['Reorder']}, kubectl with legacy)")
            else:
                notes.append("kubectl's output differs from the Go test's expected output")
    if b.opts['plugins'] == 'enabled':
        notes.append('the Go test enables plugins')
    if ok and result == '\n':
        notes.append('kubectl prints nothing; expected.yaml holds the lone newline regen.sh writes')
    return notes


def port_build(case, b):
    """Writes one build as a case with the oracle's verdict; returns its INDEX.md cell."""
    why = unportable_reason(b)
    try:
        if not why:
            write_case(case, b)
            ok, result = run_oracle(case)
            if not ok and b.expect != 'error' and b.opts['plugins'] == 'enabled':
                why = 'needs plugins enabled (kubectl: ' + result.strip()[:100] + ')'
    except (Unportable, subprocess.TimeoutExpired) as e:
        why = str(e) or 'kubectl timed out'
    if why:
        shutil.rmtree(case, ignore_errors=True)
        label = case.name.split('--', 2)[2] if case.name.count('--') >= 2 else '(build)'
        return f'{label}: not ported: {why}'
    if ok:
        (case / 'expected.yaml').write_text(result)
    else:
        (case / 'kubectl-error.txt').write_text(result)
        (case / 'expected-error.txt').write_text(''.join(f + '\n' for f in pick_fragments(case, result, b)))
    notes = ([f'builds `{b.path}`'] if b.path else []) + compare_with_go(b, ok, result) + b.notes
    return f'`{case.name}`' + (' (error)' if not ok else '') + (': ' + '; '.join(notes) if notes else '')


def generate(mirror):
    """Regenerates every case and INDEX.md."""
    interp, box, tests = load_tests(GitTag(mirror))
    OUT.mkdir(parents=True, exist_ok=True)
    for child in OUT.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
    rows = []
    for stem, test in tests:
        rec = run_test(interp, box, test)
        names = case_names(stem, test, rec.builds)
        cells = [port_build(OUT / name, b) for name, b in zip(names, rec.builds)]
        for names, why in rec.skips:
            label = '--'.join(map(sanitize, names)) or '(test)'
            cells.append(f'{label}: not ported: {why}')
        if not rec.builds and not rec.skips:
            cells.append('not ported: the test builds nothing')
        rows.append((stem, test, cells))
    write_index(rows)


def write_index(rows):
    """INDEX.md: one row per upstream test function."""
    ported = sum(1 for _, _, c in rows if any(x.startswith('`') for x in c))
    cases = sum(1 for _, _, c in rows for x in c if x.startswith('`'))
    lines = ['# Upstream krusty tests as golden cases', '',
             f'Generated by `tools/krusty_cases.py` from `api/krusty/*_test.go` at {TAG}; '
             'do not edit by hand.', '',
             f'{len(rows)} test functions, {ported} with at least one case, {cases} cases. '
             'Each case builds `input/` (or `input/<build-dir>`) with default options; '
             '`expected.yaml` / `kubectl-error.txt` come from `kubectl kustomize` '
             '(Kustomize v5.8.1), which is trusted over the Go test where they differ. '
             '(`build-dir` holds `.` where `input/overlay` exists but `input/` itself is built.)', '',
             '| file | test | cases |', '| --- | --- | --- |']
    for stem, test, cells in rows:
        lines.append(f'| {stem} | {test} | ' + '<br>'.join(c.replace('|', '\\|') for c in cells) + ' |')
    (OUT / 'INDEX.md').write_text('\n'.join(lines) + '\n')


# --- our binary ---------------------------------------------------------------------------------
THEMES = [  # (theme, regex over case name, failure reason and kustomization files), first match wins
    ('duplicate keys in a kustomization file (kustomize takes the last)',
     r'mapping key "\w+" already defined'),
    ('name references: ambiguous referrals across namespaces', r'multiple possible referrals'),
    ('strict parsing of transformer configs (`labels` field specs, fieldSpecs[].name)',
     r'unknown field `(labels|name)`'),
    ('IAMPolicyGenerator builtin', r'IAMPolicyGenerator'),
    ('missing validation errors', r'^succeeds where kustomize fails'),
    ('error wording', r'^error .* lacks'),
    ('origin annotations (configuredIn)', r'configuredIn'),
    ('openapi custom schema (patch merge keys)', r'^\s*openapi:'),
    ('local-config resources as name reference sources', r'LocalConfig'),
    ('empty output (regen.sh writes a lone newline)', r'expected 1 lines, got 0'),
    ('components', r'^components:'),
    ('vars', r'^vars:'),
    ('replacements', r'^replacements:'),
    ('patches', r'^(patches|patchesStrategicMerge|patchesJson6902):'),
    ('generators', r'^(configMapGenerator|secretGenerator):'),
]


def first_difference(want, got):
    """The first line where two outputs differ, as a one-line reason."""
    w, g = want.splitlines(), got.splitlines()
    for i, (a, b) in enumerate(zip(w, g)):
        if a != b:
            return f'line {i + 1}: expected {a!r}, got {b!r}'
    return f'line {min(len(w), len(g)) + 1}: expected {len(w)} lines, got {len(g)}'


def check_case(case, ours):
    """Runs our binary on a case: None if it matches, else a one-line reason."""
    p = subprocess.run([ours, 'build', str(input_dir(case))], capture_output=True,
                       text=True, timeout=120)
    err = ' '.join(p.stderr.replace(str(case / 'input'), 'INPUT').split())
    err = re.sub(r'^error: building INPUT\S*: ', '', err)
    if (case / 'expected.yaml').exists():
        if p.returncode != 0:
            return f'fails where kustomize succeeds: {err[:200]}'
        want = (case / 'expected.yaml').read_text()
        if want == '\n':  # regen.sh's line break after an empty output
            want = ''
        return None if p.stdout == want else first_difference(want, p.stdout)
    if p.returncode == 0:
        return 'succeeds where kustomize fails'
    for frag in (case / 'expected-error.txt').read_text().splitlines():
        if frag and frag not in p.stderr:
            return f'error {err[:200]!r} lacks {frag!r}'
    return None


def theme_of(case, reason):
    """The THEMES entry a failure belongs to."""
    kusts = [f.read_text(errors='replace') for f in (case / 'input').rglob('*') if f.name in KUST_NAMES]
    blob = '\n'.join([case.name, reason] + kusts)
    for theme, pattern in THEMES:
        if re.search(pattern, blob, re.M):
            return theme
    return 'other'


def snapshot_binary():
    """A private copy of our binary (it may be rebuilt meanwhile; wait if it is missing)."""
    copy = Path(tempfile.gettempdir()) / f'krusty-cases-{os.getpid()}'
    for _ in range(20):
        try:
            shutil.copy2(OURS, copy)
            return str(copy)
        except OSError:
            time.sleep(30)
    sys.exit(f'{OURS} is missing')


def results():
    """Runs our binary on every case and writes RESULTS.md."""
    cases = sorted(p for p in OUT.iterdir() if (p / 'input').is_dir())
    ours = snapshot_binary()
    fails, counts = [], Counter()
    for case in cases:
        kind = 'error' if (case / 'kubectl-error.txt').exists() else 'ok'
        why = check_case(case, ours)
        counts[kind, why is None] += 1
        if why:
            fails.append((case.name, why, theme_of(case, why)))
    themes = Counter(t for _, _, t in fails)
    n_ok, n_err = counts['ok', True] + counts['ok', False], counts['error', True] + counts['error', False]
    lines = ['# Our binary on the upstream krusty cases', '',
             'Generated by `tools/krusty_cases.py` (`kustomize-controller build` on every case).', '',
             f'- cases: {len(cases)} ({n_ok} success cases, {n_err} error cases)',
             f'- pass: {len(cases) - len(fails)}', f'- fail: {len(fails)}',
             f"- success cases: {counts['ok', True]} pass, {counts['ok', False]} fail",
             f"- error cases: {counts['error', True]} pass, {counts['error', False]} fail", '',
             '## Failures by theme', '', '| theme | failures |', '| --- | --- |']
    lines += [f'| {t} | {n} |' for t, n in themes.most_common()]
    lines += ['', '## Failing cases', '']
    lines += [f'- `{n}` ({t}): {w}' for n, w, t in fails]
    (OUT / 'RESULTS.md').write_text('\n'.join(lines) + '\n')
    os.unlink(ours)
    print(f'{len(cases)} cases, {len(fails)} failures')


def main():
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--mirror', default=os.environ.get('KUSTOMIZE_MIRROR', MIRROR))
    ap.add_argument('--no-generate', action='store_true')
    ap.add_argument('--no-results', action='store_true')
    args = ap.parse_args()
    if not args.no_generate:
        generate(args.mirror)
    if not args.no_results:
        results()


if __name__ == '__main__':
    main()
