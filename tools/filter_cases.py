#!/usr/bin/env python3
"""Turns kustomize's table tests of its filters (tag kustomize/v5.8.1) into golden build cases.

`api/krusty` tests whole builds (`tools/krusty_cases.py`); the transformers' edge cases live
in the table tests of `api/filters/*` and `kyaml/yaml/merge2`. Each table row that a
kustomization can express becomes one case under
`tests/fixtures/kustomize-upstream-filters/<area>--<TestName>--<row>/`, in the form of the
other golden cases: `input/` (the row's objects in `resource.yaml`, its patch in
`patch.yaml`, and a `kustomization.yaml` that applies it), then the oracle's verdict from
`kubectl kustomize` (Kustomize v5.8.1): `expected.yaml`, or `kubectl-error.txt` plus
`expected-error.txt` (the Go test's expected error where kubectl says it, else a name from
kubectl's message). The Go test's own expected text is not used: a filter alone neither
sorts nor formats as a build does, so only the oracle's output is.

Rows become cases as follows:
- `replacement` (`TestFilter`, `TestValueInlineStructuredData`): the row's `replacements:`
  text in the kustomization.
- `patchstrategicmerge` (`TestFilter`): the row's patch as a `patches:` entry.
- `patchjson6902` (`TestSomething`): the row's operations as a `patches:` entry targeting the
  row's object by kind and name.
- `imagetag`, `namespace`, `prefix`, `suffix`, `labels`, `annotations`, `replicacount`: the
  builtin transformer configured as the row's filter (with the field specs the test adds);
  `fieldspec`: a NamespaceTransformer whose one field spec is the row's, setting "e".
- `generators` (`api/internal/generators`): the row's ConfigMap or Secret arguments as a
  `configMapGenerator`/`secretGenerator` entry, over the files the test writes; `kv`
  (`api/kv`): the row's env-file text read by a `configMapGenerator`.
- `merge2` (`scalar`, `list`, `element`, `map` cases): `dest` is the resource and `source` the
  strategic-merge patch, given `apiVersion`, `kind` and `metadata.name` where they lack them
  (a kind with no schema, `example.com/v1` `Thing`, when neither says). The row's merge
  options and `infer` flag are the filter's, not the build's; the oracle decides.

`INDEX.md` maps every row to its case or says why it is not ported.

The builtin plugins' own tests (`plugin/builtin/*/*_test.go`, Helm's left out) are run by
the krusty tests' interpreter (`krusty_harness.py`), each plugin run becoming a case named
`plugin-<plugin>--<TestName>[--<subtest>]` whose kustomization lists the test's plugin
configuration under `transformers:` (or `generators:`) over the test's resources.

Usage: tools/filter_cases.py [--mirror GIT_DIR] (the mirror also comes from $KUSTOMIZE_MIRROR;
`kubectl` from `make setup`). Re-running regenerates every case.
"""
import argparse
import os
import re
import shutil
import sys
from pathlib import Path

import yaml

sys.dont_write_bytecode = True  # no __pycache__ beside the helper modules
sys.path.insert(0, str(Path(__file__).resolve().parent))
from krusty_cases import MIRROR, TAG, GitTag, case_names, port_build, run_oracle, sanitize  # noqa: E402
from krusty_harness import legacy_configs, make_builtins, run_test  # noqa: E402
import krusty_cases  # noqa: E402
from krusty_goparse import Parser  # noqa: E402
from krusty_gointerp import Env, Interp, Struct, TypeVal  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / 'tests/fixtures/kustomize-upstream-filters'
KUSTOMIZATION = 'kustomization.yaml'
MAP_TYPES = ('labelMap', 'annoMap')
# The field specs kustomize's filter tests add to each row's own (builtinconfig defaults).
NAMESPACE_DEFAULTS = [
    {'path': 'metadata/name', 'kind': 'Namespace', 'create': True},
    {'path': 'spec/service/namespace', 'group': 'apiregistration.k8s.io', 'kind': 'APIService',
     'create': True},
    {'path': 'spec/conversion/webhook/clientConfig/service/namespace',
     'group': 'apiextensions.k8s.io', 'kind': 'CustomResourceDefinition'},
]
ANNOTATION_DEFAULTS = [{'path': 'metadata/annotations', 'create': True}]
# Hand-picked error fragments where kubectl's words are Go's own (a type's name) or where
# ours also name the object: case -> fragments.
FRAGMENTS = {k: v.split('|') for k, v in {
    'patchstrategicmerge--TestFilter--honor-different-key-style-one': 'patch.yaml|9110',
    'patchstrategicmerge--TestFilter--nested-patch': 'patch.yaml',
    'patchstrategicmerge--TestFilter--simple-patch': 'patch.yaml',
    'replacement--TestFilter--missing-metadata': 'resource.yaml',
    'replacement--TestFilter--source-value-and-selector-error': 'sourceValue',
    'kv--TestKeyValuesFromLines--invalid-UTF-8-content': 'app.env|has invalid utf8 bytes',
    'plugin-namespacetransformer--TestNamespaceTransformerObjectConflict':
        'namespace transformation produces ID conflict|cm',
    'plugin-patchjson6902transformer--TestBadPatchJson6902Transformer': 'thisIsNotAPatch',
    'plugin-patchstrategicmergetransformer--TestBadPatchStrategicMergeTransformer':
        'missing Resource metadata',
    'plugin-patchtransformer--TestPatchTransformerBadPatch': 'unable to parse SM or JSON patch from',
    'plugin-secretgenerator--TestSecretGenerator': 'mySecret|does not exist; cannot merge or replace',
    # kubectl cannot load this builtin either.
    **{f'plugin-sortordertransformer--{name}': 'SortOrderTransformer' for name in (
        'TestSortOrderTransformer--default-ordering', 'TestSortOrderTransformer--fifo-order',
        'TestSortOrderTransformer--some-first-some-last-some-in-between',
        'TestSortOrderTransformer--webhooks-first-order-namespace-and-deployment-last',
        'TestWrongOrder')},
    'replacement--TestFilter--fail-to-append-to-sequence-using-a-distant-index':
        'unable to find or create field "spec.tls.5.hosts.5" in replacement target'
        '|index 5 specified but only 0 elements found',
}.items()}


class Row:
    """One table row as a build: its files, and the error the Go test expects if any."""

    def __init__(self, files, expected_error=''):
        self.files = files
        self.expected_error = expected_error


def tables(src, path):
    """Every table a test function of `path` declares (`name := map/[]struct{...}{...}`) or
    the file declares at package level: {function or variable: rows}."""
    decls = Parser(src.show(path)).file()
    interp = Interp({'yaml.MustParse': lambda text: text,
                     'filepath.Join': lambda *parts: '/'.join(p for p in parts if p)})
    interp.load(decls)
    for name in MAP_TYPES:  # declared beside the filters, not in their tests
        interp.globals.vars[name] = TypeVal(('tmap', ('tname', 'string'), ('tname', 'string')))
    found = {}
    for name, (_, body, _) in decls['funcs'].items():
        for stmt in body[1]:
            if stmt[0] == 'define' and stmt[2] and stmt[2][0][0] == 'comp':
                found[name] = interp.eval(stmt[2][0], Env(interp.globals))
    for names, _, exprs in decls['vars']:
        for name, expr in zip(names, exprs):
            if expr[0] == 'comp':
                found[name] = interp.eval(expr, Env(interp.globals))
    return found


def rows_of(table, label):
    """(row name, fields) of a map table, or of a slice table named by its `label` field."""
    if isinstance(table, dict) and not isinstance(table, Struct):
        return list(table.items())
    return [(row[label], row) for row in table]


def with_identity(text, api_version, kind, name='x'):
    """A one-object YAML text given the apiVersion, kind and metadata.name it lacks (as text,
    so the rest keeps its formatting and comments), or None if it cannot be."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return None
    prefix = ''.join(f'{k}: {v}\n' for k, v in (('apiVersion', api_version), ('kind', kind))
                     if k not in doc)
    meta = doc.get('metadata')
    if meta is None:
        prefix += f'metadata:\n  name: {name}\n'
    elif not isinstance(meta, dict):
        return None
    elif 'name' not in meta:
        if not re.search(r'^metadata:[ \t]*$', text, re.M):
            return None
        text = re.sub(r'^metadata:[ \t]*$', f'metadata:\n  name: {name}', text, count=1, flags=re.M)
    return prefix + text.lstrip('\n')


def replacement_rows(src):
    rows = {}
    for test, table in tables(src, 'api/filters/replacement/replacement_test.go').items():
        for name, row in rows_of(table, None):
            rows[('replacement', test, name)] = Row({
                'resource.yaml': row['input'],
                KUSTOMIZATION: 'resources:\n- resource.yaml\n' + row['replacements'],
            }, row['expectedErr'])
    return rows


def patch_rows(src):
    rows = {}
    path = 'api/filters/patchstrategicmerge/patchstrategicmerge_test.go'
    for test, table in tables(src, path).items():
        for name, row in rows_of(table, None):
            rows[('patchstrategicmerge', test, name)] = Row({
                'resource.yaml': row['input'],
                'patch.yaml': row['patch'],
                KUSTOMIZATION: 'resources:\n- resource.yaml\npatches:\n- path: patch.yaml\n',
            })
    for test, table in tables(src, 'api/filters/patchjson6902/patchjson6902_test.go').items():
        for name, row in rows_of(table, 'testName'):
            target = yaml.safe_load(row['input'])
            rows[('patchjson6902', test, name)] = Row({
                'resource.yaml': row['input'],
                'patch.yaml': row['filter']['Patch'],
                KUSTOMIZATION: 'resources:\n- resource.yaml\npatches:\n- path: patch.yaml\n'
                               f"  target:\n    kind: {target['kind']}\n"
                               f"    name: {target['metadata']['name']}\n",
            })
    return rows


def merge2_rows(src):
    rows = {}
    for stem in ('scalar', 'list', 'element', 'map'):
        for table_name, table in tables(src, f'kyaml/yaml/merge2/{stem}_test.go').items():
            for name, row in rows_of(table, 'description'):
                dest, source = yaml.safe_load(row['dest']), yaml.safe_load(row['source'])
                if not isinstance(dest, dict) or not isinstance(source, dict):
                    rows[('merge2', table_name, name)] = 'the row merges something other than an object'
                    continue
                api = dest.get('apiVersion') or source.get('apiVersion') or 'example.com/v1'
                kind = dest.get('kind') or source.get('kind') or 'Thing'
                dest_text = with_identity(row['dest'], api, kind)
                patch_text = with_identity(row['source'], api, kind)
                if dest_text is None or patch_text is None:
                    rows[('merge2', table_name, name)] = 'metadata is not a mapping'
                    continue
                rows[('merge2', table_name, name)] = Row({
                    'resource.yaml': dest_text,
                    'patch.yaml': patch_text,
                    KUSTOMIZATION: 'resources:\n- resource.yaml\npatches:\n- path: patch.yaml\n',
                })
    return rows


def is_true(value):
    """A Go `true` as the interpreter leaves it (the identifier's name)."""
    return value is True or value == 'true'


def field_spec(spec):
    """A types.FieldSpec as a transformer configuration writes it."""
    out = {}
    gvk = spec.get('Gvk') or {}
    for go, name in (('Group', 'group'), ('Version', 'version'), ('Kind', 'kind')):
        if isinstance(gvk, dict) and isinstance(gvk.get(go), str) and gvk.get(go):
            out[name] = gvk[go]
    out['path'] = spec['Path']
    if is_true(spec.get('CreateIfNotPresent')):
        out['create'] = True
    return out


def specs(*lists):
    """The field specs of a row, from any of the places a test keeps them."""
    out = []
    for specs_ in lists:
        if isinstance(specs_, list):
            out += [field_spec(s) for s in specs_ if isinstance(s, dict)]
        elif isinstance(specs_, dict) and specs_.get('Path'):
            out.append(field_spec(specs_))
    return out


def named(text):
    """The objects of a filter test's input, each given a name where it has none (a build
    refuses unnamed objects; a filter does not need names)."""
    docs = re.split(r'^---[ \t]*$', text, flags=re.M)
    out = []
    for i, doc in enumerate(docs):
        parsed = yaml.safe_load(doc)
        if isinstance(parsed, dict) and parsed.get('kind') and \
                not (parsed.get('metadata') or {}).get('name'):
            doc = with_identity(doc, parsed.get('apiVersion'), parsed['kind'], f'object-{i}') or doc
            if 'apiVersion' not in parsed:  # only the name is added
                doc = re.sub(r'^apiVersion: None\n', '', doc, count=1, flags=re.M)
        out.append(doc)
    return '---\n'.join(d if d.endswith('\n') else d + '\n' for d in out)


def transformer_row(row, config, expected_error=''):
    """A row run as a builtin transformer over its input."""
    config = {'apiVersion': 'builtin', **config}
    config.setdefault('metadata', {})['name'] = 'under-test'
    return Row({
        'resource.yaml': named(row['input']),
        'transformer.yaml': yaml.safe_dump(config, sort_keys=False),
        KUSTOMIZATION: 'resources:\n- resource.yaml\ntransformers:\n- transformer.yaml\n',
    }, expected_error)


def image(tag):
    names = (('Name', 'name'), ('NewName', 'newName'), ('NewTag', 'newTag'),
             ('Digest', 'digest'), ('TagSuffix', 'tagSuffix'))
    return {name: tag[go] for go, name in names if isinstance(tag.get(go), str) and tag[go]}


def transformer_rows(src):
    """The rows of the filters that builtin transformers configure, each as that transformer."""
    rows = {}
    def add(area, path, label, make):
        for test, table in tables(src, path).items():
            if not table:
                continue
            for name, row in rows_of(table, label):
                try:
                    rows[(area, test, name)] = make(row)
                except (KeyError, TypeError, AttributeError) as e:
                    rows[(area, test, name)] = f'the row does not translate ({type(e).__name__})'
    add('imagetag', 'api/filters/imagetag/imagetag_test.go', None, lambda r: transformer_row(r, {
        'kind': 'ImageTagTransformer', 'imageTag': image(r['filter']['ImageTag']),
        'fieldSpecs': specs(r['fsSlice'])}))
    add('imagetag', 'api/filters/imagetag/legacy_test.go', None, lambda r: transformer_row(r, {
        'kind': 'ImageTagTransformer', 'imageTag': image(r['filter']['ImageTag'])}))
    add('namespace', 'api/filters/namespace/namespace_test.go', 'name', lambda r: transformer_row(r, {
        'kind': 'NamespaceTransformer', 'metadata': {'namespace': r['filter']['Namespace']},
        **({'unsetOnly': True} if is_true(r['filter'].get('UnsetOnly')) else {}),
        **({'setRoleBindingSubjects': r['filter']['SetRoleBindingSubjects']}
           if isinstance(r['filter'].get('SetRoleBindingSubjects'), str) else {}),
        'fieldSpecs': NAMESPACE_DEFAULTS + specs(r['fsslice'])}))
    for area, key in (('prefix', 'Prefix'), ('suffix', 'Suffix')):
        add(area, f'api/filters/{area}/{area}_test.go', None,
            lambda r, area=area, key=key: transformer_row(r, {
                'kind': f'{key}Transformer', area: r['filter'][key],
                'fieldSpecs': specs(r['filter'].get('FieldSpec'))}))
    add('labels', 'api/filters/labels/labels_test.go', None, lambda r: transformer_row(r, {
        'kind': 'LabelTransformer', 'labels': dict(r['filter']['Labels']),
        'fieldSpecs': specs(r['filter'].get('FsSlice'))}))
    add('annotations', 'api/filters/annotations/annotations_test.go', None,
        lambda r: transformer_row(r, {
            'kind': 'AnnotationsTransformer', 'annotations': dict(r['filter']['Annotations']),
            'fieldSpecs': ANNOTATION_DEFAULTS + specs(r['fsslice'])}))
    add('replicacount', 'api/filters/replicacount/replicacount_test.go', None,
        lambda r: transformer_row(r, {
            'kind': 'ReplicaCountTransformer',
            'replica': {'name': r['filter']['Replica']['Name'],
                        'count': r['filter']['Replica']['Count']},
            'fieldSpecs': specs(r['filter'].get('FieldSpec'))}))
    # The field spec walk itself (fieldspec.Filter), as the NamespaceTransformer walks its
    # field specs: the row's spec sets "e".
    add('fieldspec', 'api/filters/fieldspec/fieldspec_test.go', None, lambda r: transformer_row(r, {
        'kind': 'NamespaceTransformer', 'metadata': {'namespace': 'e'},
        'fieldSpecs': [yaml.safe_load(r['fieldSpec']) or {}]},
        r.get('error') if isinstance(r.get('error'), str) else ''))
    return rows


# The files kustomize's generator tests write before generating (`fSys.WriteFile`), by folder;
# `binaryHello` is `\xffhello`.
GENERATOR_FILES = {
    'configmap': {'app.env': b'DB_USERNAME=admin\nDB_PASSWORD=qwerty\n',
                  'app-init.ini': b'FOO=bar\nBAR=baz\n', 'app.bin': b'\xffhello' * 30},
    'secret': {'app.env': b'DB_USERNAME=admin\nDB_PASSWORD=qwerty\n',
               'app-init.ini': b'FOO=bar\nBAR=baz\n', 'app.bin': b'\xff\xfd'},
}


def generator_entry(args):
    """A types.ConfigMapArgs/SecretArgs as a generator entry of a kustomization."""
    generator = args.get('GeneratorArgs') or {}
    sources = generator.get('KvPairSources') or {}
    entry = {'name': generator.get('Name')}
    for go, name in (('Namespace', 'namespace'), ('Behavior', 'behavior')):
        if isinstance(generator.get(go), str) and generator[go]:
            entry[name] = generator[go]
    for go, name in (('LiteralSources', 'literals'), ('FileSources', 'files'),
                     ('EnvSources', 'envs')):
        if isinstance(sources.get(go), list) and sources[go]:
            entry[name] = list(sources[go])
    options = generator.get('Options')
    if isinstance(options, dict):
        out = {}
        for go, name in (('Labels', 'labels'), ('Annotations', 'annotations')):
            if isinstance(options.get(go), dict) and options[go]:
                out[name] = dict(options[go])
        for go, name in (('Immutable', 'immutable'), ('DisableNameSuffixHash', 'disableNameSuffixHash')):
            if is_true(options.get(go)):
                out[name] = True
        if out:
            entry['options'] = out
    if isinstance(args.get('Type'), str) and args['Type']:
        entry['type'] = args['Type']
    return entry


def raw(text):
    """A Go string as its bytes: the interpreter keeps `\x80` escapes as code points."""
    if all(ord(c) < 256 for c in text) and any(ord(c) >= 128 for c in text):
        return text.encode('latin-1')
    return text


def generator_rows(src):
    """kustomize's generator tests (`api/internal/generators`, `api/kv`) as generator entries."""
    rows = {}
    for kind, field in (('configmap', 'configMapGenerator'), ('secret', 'secretGenerator')):
        path = f'api/internal/generators/{kind}_test.go'
        for test, table in tables(src, path).items():
            if not test.startswith('Test'):
                continue
            for name, row in rows_of(table, None):
                files = {f'{kind}/{n}': data for n, data in GENERATOR_FILES[kind].items()}
                files[KUSTOMIZATION] = yaml.safe_dump({field: [generator_entry(row['args'])]},
                                                      sort_keys=False)
                error = (row.get('exp') or {}).get('errMsg')
                rows[('generators', test, name)] = Row(files, error if isinstance(error, str) else '')
    for test, table in tables(src, 'api/kv/kv_test.go').items():
        if test != 'TestKeyValuesFromLines':
            continue
        for name, row in rows_of(table, 'desc'):
            rows[('kv', test, name)] = Row({
                'app.env': raw(row['content']),
                KUSTOMIZATION: 'configMapGenerator:\n- name: kv\n  envs:\n  - app.env\n',
            }, 'error' if is_true(row.get('expectedErr')) else '')
    return rows


def fragments(case, row, message):
    """What our message must also say: the hand-picked fragments, else the Go test's expected
    error where kubectl's message has it, else kubectl's last clause."""
    if case.name in FRAGMENTS:
        return FRAGMENTS[case.name]
    if row.expected_error and row.expected_error in message:
        return [row.expected_error]
    for phrase in ('missing metadata.name', 'missing Resource metadata'):
        if phrase in message:
            return ['resource.yaml']
    last = message.strip().splitlines()[-1].split(': ')[-1].strip() if message.strip() else ''
    return [last[:60]] if last and 'INPUT' not in last else []


def port(case, row):
    """Writes one row as a case with the oracle's verdict; returns its INDEX.md cell."""
    shutil.rmtree(case, ignore_errors=True)
    (case / 'input').mkdir(parents=True)
    for name, content in row.files.items():
        target = case / 'input' / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    ok, result = run_oracle(case)
    notes = []
    if ok:
        (case / 'expected.yaml').write_text(result)
        if row.expected_error:
            notes.append('the Go test expects an error; kubectl succeeds')
    else:
        (case / 'kubectl-error.txt').write_text(result)
        (case / 'expected-error.txt').write_text(''.join(f + '\n' for f in fragments(case, row, result)))
        if not row.expected_error:
            notes.append('the Go test expects success; kubectl fails')
    return f'`{case.name}`' + (' (error)' if not ok else '') + (': ' + '; '.join(notes) if notes else '')


def plugin_rows(src):
    """plugin/builtin/*/*_test.go: each test function run against the krusty harness, whose
    plugin runs (`th.LoadAndRunTransformer(config, resources)` and the like) are recorded as
    builds listing the configuration under `transformers:` or `generators:`. Returns INDEX
    lines after writing the cases."""
    krusty_cases.FRAGMENTS.update(FRAGMENTS)  # port_build picks fragments from there
    lines = []
    for directory in src.ls('plugin/builtin/'):
        for path in src.ls(directory + '/'):
            if not path.endswith('_test.go') or 'helmchartinflation' in path:
                continue
            box = [None]
            interp = Interp(make_builtins(src, box))
            interp.builtins['__legacy__'] = legacy_configs(src)
            decls = Parser(src.show(path)).file()
            interp.load(decls)
            stem = 'plugin-' + os.path.basename(directory).lower()
            for test in [n for n in decls['funcs'] if re.match(r'Test[A-Z0-9_]', n)]:
                rec = run_test(interp, box, test)
                names = case_names(stem, test, rec.builds)
                cells = [port_build(OUT / name, b) for name, b in zip(names, rec.builds)]
                cells += [f"{'--'.join(map(sanitize, n)) or '(test)'}: not ported: {why}"
                          for n, why in rec.skips]
                if not cells:
                    cells.append('not ported: the test runs no plugin')
                lines.append(f'| {stem} | {test} | | ' +
                             '<br>'.join(c.replace('|', '\\|') for c in cells) + ' |')
    return lines


def generate(mirror):
    src = GitTag(mirror)
    rows = {**replacement_rows(src), **patch_rows(src), **merge2_rows(src), **transformer_rows(src),
            **generator_rows(src)}
    OUT.mkdir(parents=True, exist_ok=True)
    for child in OUT.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
    seen, lines = set(), []
    for (area, test, name), row in rows.items():
        case = f'{area}--{test}--{sanitize(name)}'
        base, i = case, 2
        while case in seen:
            case, i = f'{base}-{i}', i + 1
        seen.add(case)
        cell = f'not ported: {row}' if isinstance(row, str) else port(OUT / case, row)
        lines.append(f'| {area} | {test} | {name} | ' + cell.replace('|', '\\|') + ' |')
    lines += plugin_rows(src)
    cases = sum(1 for p in OUT.iterdir() if (p / 'input').is_dir())
    header = ['# Upstream filter tests as golden cases', '',
              f'Generated by `tools/filter_cases.py` from the table tests of `api/filters/` and '
              f'`kyaml/yaml/merge2/` at {TAG}; do not edit by hand.', '',
              f'{len(lines)} rows, {cases} cases. Each case builds `input/` (or `input/<build-dir>`) with default options; '
              '`expected.yaml` / `kubectl-error.txt` come from `kubectl kustomize` (Kustomize v5.8.1).',
              '', '| area | test | row | case |', '| --- | --- | --- | --- |']
    (OUT / 'INDEX.md').write_text('\n'.join(header + lines) + '\n')
    print(f'{len(lines)} rows and tests, {cases} cases')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--mirror', default=os.environ.get('KUSTOMIZE_MIRROR', MIRROR))
    generate(ap.parse_args().mirror)


if __name__ == '__main__':
    main()
