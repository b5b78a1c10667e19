#!/usr/bin/env python3
"""Turns kustomize's own `api/krusty/*_test.go` (tag kustomize/v5.8.1) into golden cases.

Each test function is run symbolically by a small Go-subset interpreter
(`krusty_gosubset.py`): the harness calls it makes (`th.WriteK/WriteF/WriteC/
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
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from krusty_gosubset import (UNK, GoObj, Interp, Parser, PkgRef, Struct, Unknown,  # noqa: E402
                             Unportable, go_str, sprintf)

TAG = 'kustomize/v5.8.1'
MIRROR = '/work/.mirror/kubernetes-sigs+kustomize/repo'
REPO = Path(__file__).resolve().parent.parent
OUT = REPO / 'tests/fixtures/kustomize-upstream'
KUBECTL = REPO / 'target/venv/bin/kubectl'
OURS = REPO / 'target/debug/kustomize-controller'
TMP = '/TMPROOT'  # stands for on-disk temporary roots (MakeEnhancedHarnessWithTmpRoot, Setup)
KHEAD = '\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
CHEAD = '\napiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n'
REMOTE = r'^\s*(-|path:)\s*["\']?((https?|ssh|git|file)://|git@|git::|github\.com/|gitlab\.com/|[\w.-]+@[\w.-]+\.[a-z]+/)'
KUST_NAMES = ('kustomization.yaml', 'kustomization.yml', 'Kustomization')
LEGACY_ORDER = ['namePrefix', 'nameSuffix', 'commonLabel', 'templateLabel', 'commonAnnotation',
                'namespace', 'varReference', 'nameReference', 'images', 'replicas']
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


def git(mirror, *args):
    """Output of a git command in the mirror."""
    return subprocess.run(['git', '-C', mirror, *args], check=True, capture_output=True,
                          text=True).stdout


# --- the recorded world -------------------------------------------------------------------------
def fs_path(path):
    """A test file-system path as a path relative to the case's `input/` ('' for the root)."""
    if not isinstance(path, str) or isinstance(path, PkgRef):
        raise Unportable('a file path is not static')
    p = posixpath.normpath(posixpath.join('/', path))
    if p == TMP or p.startswith(TMP + '/'):
        p = p[len(TMP):] or '/'
    return p.strip('/')


def text(content):
    """File content as a str ([]byte values are lists of str or int)."""
    if isinstance(content, str) and not isinstance(content, PkgRef):
        return content
    if isinstance(content, list) and all(isinstance(c, str) for c in content):
        return ''.join(content)
    if isinstance(content, list) and all(isinstance(c, int) for c in content):
        return bytes(content).decode('utf-8', 'surrogateescape')
    raise Unportable('file content is not static')


class Build:
    """One build a test performs: the file tree at that moment, the directory, options and
    what the Go test expects (`expect` 'ok'/'error', `output`, error `frags`)."""

    def __init__(self, names, fs, path, opts, expect, prepared):
        self.names, self.path, self.expect = names, fs_path(path), expect
        self.files, self.dirs = dict(fs.files), set(fs.dirs)
        self.opts, self.prepared = opts, prepared
        self.output, self.frags, self.notes = None, [], []


class Recorder:
    """Collects builds and skipped sub-tests of one test function."""

    def __init__(self, interp):
        self.interp, self.stack, self.builds, self.skips, self.prepared = interp, [], [], [], []

    def build(self, fs, path, opts, expect):
        if not isinstance(opts, Options):
            raise Unportable('build options are not static')
        snap = {k: opts.get(k) for k in ('Reorder', 'AddManagedbyLabel', 'LoadRestrictions')}
        cfg = opts.get('PluginConfig')
        snap['plugins'] = cfg.kind if isinstance(cfg, PluginCfg) else 'custom'
        snap['mods'] = list(cfg.mods) if isinstance(cfg, PluginCfg) else ['?']
        rec = Build(tuple(self.stack), fs, path, snap, expect, list(self.prepared))
        self.builds.append(rec)
        return rec


class FS(GoObj):
    """filesys.FileSystem: the files a test writes."""

    def __init__(self):
        self.files, self.dirs = {}, set()

    def write(self, path, content):
        self.files[fs_path(path)] = text(content)

    def go_WriteFile(self, path, data):
        self.write(path, data)

    def go_Mkdir(self, path):
        self.dirs.add(fs_path(path))

    go_MkdirAll = go_Mkdir

    def go_ReadFile(self, path):
        return self.files.get(fs_path(path), UNK), None


class TmpDir(GoObj):
    """filesys.ConfirmedDir of a temporary directory."""

    def go_Join(self, p):
        return posixpath.join(TMP, p)

    def go_String(self):
        return TMP


class PluginCfg(GoObj):
    """types.PluginConfig: 'enabled' or 'disabled', with the fields a test changed."""

    def __init__(self, kind):
        self.kind, self.mods = kind, []

    def member(self, name):
        return Field(self, name)


class Field(GoObj):
    def __init__(self, cfg, path):
        self.cfg, self.path = cfg, path

    def member(self, name):
        return Field(self.cfg, self.path + '.' + name)


class Options(Struct):
    """krusty.Options, as krusty.MakeDefaultOptions makes them."""

    def __init__(self, plugins='disabled'):
        super().__init__(Reorder='none', AddManagedbyLabel=False, LoadRestrictions='RootOnly',
                         PluginConfig=PluginCfg(plugins))


class Built(GoObj):
    """The ResMap of a build."""

    def __init__(self, rec):
        self.rec = rec

    def go_AsYaml(self):
        return YamlText(self.rec), ErrVal(self.rec, False)


class YamlText(Unknown):
    def __init__(self, rec):
        self.rec = rec


class ErrVal(GoObj):
    """The error of a build: certainly an error (RunWithErr) or maybe nil (Kustomizer.Run)."""

    def __init__(self, rec, definite):
        self.rec, self.definite = rec, definite

    def go_Error(self):
        return ErrText(self.rec)


class ErrText(Unknown):
    def __init__(self, rec):
        self.rec = rec


class Harness(GoObj):
    """kusttest_test.Harness / HarnessEnhanced."""

    def __init__(self, rec, fs, root='/'):
        self.rec, self.fs, self.root = rec, fs, root
        self.go_Harness = self  # HarnessEnhanced embeds Harness

    def go_WriteK(self, path, content):
        self.fs.write(posixpath.join(fs_path(path), 'kustomization.yaml'), KHEAD + text(content))

    def go_WriteC(self, path, content):
        self.fs.write(posixpath.join(fs_path(path), 'kustomization.yaml'), CHEAD + text(content))

    def go_WriteF(self, path, content):
        self.fs.write(path, content)

    def go_WriteLegacyConfigs(self, path):
        self.fs.write(path, self.rec.interp.builtins['__legacy__'])

    def go_MakeDefaultOptions(self):
        return Options()

    go_MakeOptionsPluginsDisabled = go_MakeDefaultOptions

    def go_MakeOptionsPluginsEnabled(self):
        return Options('enabled')

    def go_Run(self, path, opts):
        return Built(self.rec.build(self.fs, path, opts, 'ok'))

    def go_RunWithErr(self, path, opts):
        return ErrVal(self.rec.build(self.fs, path, opts, 'error'), True)

    def go_AssertActualEqualsExpected(self, m, expected, note=None):
        if isinstance(m, Built):
            m.rec.output = expected if isinstance(expected, str) else None
            m.rec.notes += [note] if note else []

    def go_AssertActualEqualsExpectedNoIdAnnotations(self, m, expected):
        self.go_AssertActualEqualsExpected(m, expected)

    def go_AssertActualEqualsExpectedWithTweak(self, m, tweak, expected):
        self.go_AssertActualEqualsExpected(m, None, 'the Go test tweaks the output before comparing')

    def go_GetFSys(self):
        return self.fs

    def go_GetRoot(self):
        return self.root

    def go_MkDir(self, p):
        self.fs.go_Mkdir(posixpath.join(self.root, p))
        return posixpath.join(self.root, p)

    def go_PrepBuiltin(self, kind):
        return self

    def go_BuildGoPlugin(self, group, version, kind):
        self.rec.prepared.append(f'{group}/{version} {kind} (Go plugin)')
        return self

    def go_PrepExecPlugin(self, group, version, kind):
        self.rec.prepared.append(f'{group}/{version} {kind} (exec plugin)')
        return self

    def go_ErrIfNoHelm(self):
        raise Unportable('needs helm (helmCharts)')

    def go_GetT(self):
        return UNK


class T(GoObj):
    """*testing.T: t.Run runs a sub-test, recording why it is skipped if it cannot be ported."""

    def __init__(self, rec):
        self.rec = rec

    def go_Run(self, name, fn):
        self.rec.stack.append(go_str(name))
        try:
            self.rec.interp.call(fn, [self])
        except Unportable as e:
            self.rec.skips.append((tuple(self.rec.stack), str(e)))
        except Exception as e:  # a construct the interpreter does not handle
            self.rec.skips.append((tuple(self.rec.stack), f'interpreter: {type(e).__name__}: {e}'))
        finally:
            self.rec.stack.pop()
        return True

    def go_Skip(self, *args):
        raise Unportable('skipped upstream: ' + ' '.join(map(go_str, args)))

    go_Skipf = go_SkipNow = go_Skip

    def go_TempDir(self):
        return TMP


def mark(err, kind, frag=None):
    """Records what a testify assertion says about a build's error."""
    rec = err.rec if isinstance(err, (ErrVal, ErrText)) else None
    if rec:
        rec.expect = kind if kind == 'error' else rec.expect or kind
        if isinstance(frag, str):
            rec.frags.append(frag)


def assert_equal(t, a, b, *rest):
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ErrText):
            mark(x, 'error', y)
        elif isinstance(x, YamlText) and isinstance(y, str):
            x.rec.output, x.rec.expect = y, 'ok'


def strings_contains(s, sub):
    if isinstance(s, ErrText):
        mark(s, 'error', sub)
    return UNK if isinstance(s, Unknown) or isinstance(sub, Unknown) else sub in s


def go_eq(a, b):
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ErrVal) and y is None:
            return False if x.definite else UNK
        if isinstance(x, (Built, Harness, FS)) and y is None:
            return False
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        return UNK
    return a == b


def set_hook(obj, target, value):
    """Assignments into PluginConfig fields are remembered (they make a build unportable)."""
    if isinstance(obj, (PluginCfg, Field)):
        cfg = obj if isinstance(obj, PluginCfg) else obj.cfg
        cfg.mods.append((obj.path + '.' if isinstance(obj, Field) else '') + target[2])
        return True
    if isinstance(obj, Options) and target[2] == 'Reorder':
        obj['Reorder'] = str(value).rsplit('ReorderOption', 1)[-1].lower()
        return True
    if isinstance(obj, Options) and target[2] == 'LoadRestrictions':
        obj['LoadRestrictions'] = str(value).rsplit('LoadRestrictions', 1)[-1]
        return True
    return False


def pure(f):
    """Wraps a Python function so that unknown arguments (or list items) give an unknown result."""
    known = lambda x: not isinstance(x, Unknown) and (not isinstance(x, list) or all(map(known, x)))
    return lambda *a: f(*a) if all(map(known, a)) else UNK


def make_builtins(mirror, rec_box):
    """Go builtins and the package functions the tests call ('pkg.Func')."""
    def harness(fs=None, root='/'):
        return Harness(rec_box[0], fs or FS(), root)

    def read_testdata(p):
        return git(mirror, 'show', f'{TAG}:' + posixpath.normpath(posixpath.join('api/krusty', p))), None
    def kustdir(t, content):
        fs = FS()
        fs.write(posixpath.join(TMP, 'kustomization.yaml'), content)
        return fs, TmpDir()
    b = {
        'true': True, 'false': False, 'nil': None, '__eq__': go_eq, '__setattr__': set_hook,
        'len': lambda x: UNK if isinstance(x, Unknown) else len(x or []),
        'append': lambda xs, *a: UNK if isinstance(xs, Unknown) else list(xs or []) + list(a),
        'make': lambda typ, *a: {} if getattr(typ, 'typ', ('',))[0] == 'tmap' else [],
        'panic': lambda *a: (_ for _ in ()).throw(Unportable('the test panics')),
        'fmt.Sprintf': sprintf, 'fmt.Sprint': pure(lambda *a: ''.join(map(go_str, a))),
        'strings.Contains': strings_contains,
        'strings.ReplaceAll': pure(lambda s, a, r: s.replace(a, r)),
        'strings.Replace': pure(lambda s, a, r, n: s.replace(a, r, n if n >= 0 else -1)),
        'strings.Join': pure(lambda xs, sep: sep.join(xs)),
        'strings.Repeat': pure(lambda s, n: s * n),
        'strings.TrimSpace': pure(str.strip), 'strings.ToLower': pure(str.lower),
        'strings.TrimPrefix': pure(lambda s, p: s[len(p):] if s.startswith(p) else s),
        'strings.TrimSuffix': pure(lambda s, p: s[:-len(p)] if p and s.endswith(p) else s),
        'strings.HasPrefix': pure(str.startswith), 'strings.HasSuffix': pure(str.endswith),
        'strings.Split': pure(lambda s, sep: s.split(sep)),
        'filepath.Join': pure(lambda *a: posixpath.normpath(posixpath.join(*[x for x in a if x])) if any(a) else ''),
        'filepath.Dir': pure(posixpath.dirname), 'filepath.Base': pure(posixpath.basename),
        'os.ReadFile': read_testdata,
        'string': lambda x: x, 'MakeDefaultOptions': Options,
        'MakeKustomizer': lambda o: Kustomizer(rec_box[0], o),
        'kusttest_test.MakeHarness': lambda t: harness(),
        'kusttest_test.MakeHarnessWithFs': lambda t, fs: harness(fs if isinstance(fs, FS) else FS()),
        'kusttest_test.MakeEnhancedHarness': lambda t: harness(),
        'kusttest_test.MakeEnhancedHarnessWithTmpRoot': lambda t: harness(root=TMP),
        'kusttest_test.Setup': lambda t: (FS(), TmpDir()), 'kusttest_test.CreateKustDir': kustdir,
        'filesys.MakeFsInMemory': FS, 'filesys.MakeFsOnDisk': FS,
        'filesys.NewTmpConfirmedDir': lambda: (TmpDir(), None),
        'krusty.MakeDefaultOptions': Options,
        'krusty.MakeKustomizer': lambda o: Kustomizer(rec_box[0], o),
        'types.EnabledPluginConfig': lambda *a: PluginCfg('enabled'),
        'types.DisabledPluginConfig': lambda *a: PluginCfg('disabled'),
        'konfig.RecognizedKustomizationFileNames': lambda: list(KUST_NAMES),
        'konfig.DefaultKustomizationFileName': lambda: KUST_NAMES[0],
        'require.NoError': lambda t, e, *a: mark(e, 'ok'), 'require.Error': lambda t, e, *a: mark(e, 'error'),
        'require.ErrorContains': lambda t, e, s, *a: mark(e, 'error', s),
        'require.EqualError': lambda t, e, s, *a: mark(e, 'error', s),
        'require.Contains': lambda t, s, sub, *a: strings_contains(s, sub),
        'require.Equal': assert_equal, 'require.Regexp': lambda t, rx, s, *a: mark(s, 'error'),
        'filesys.Separator': '/', 'require.ErrorIs': lambda t, e, *a: mark(e, 'error'),
        'skipIfNoDocker': lambda t: (_ for _ in ()).throw(Unportable('needs docker (KRM function)')),
        'configureGitSSHCommand': lambda t: (_ for _ in ()).throw(Unportable('needs git over ssh (remote)')),
        'httptest.NewServer': lambda *a: (_ for _ in ()).throw(Unportable('needs a local HTTP server (remote resource)')),
    }
    for k in [k for k in b if k.startswith('require.')]:
        b['assert.' + k[8:]] = b[k]
    return b


class Kustomizer(GoObj):
    """krusty.MakeKustomizer(opts): Run(fs, path) builds."""

    def __init__(self, rec, opts):
        self.rec, self.opts = rec, opts

    def go_Run(self, fs, path):
        rec = self.rec.build(fs if isinstance(fs, FS) else FS(), path, self.opts, None)
        return Built(rec), ErrVal(rec, False)


def legacy_configs(mirror):
    """builtinpluginconsts' default field specs, concatenated (th.WriteLegacyConfigs)."""
    d = 'api/internal/konfig/builtinpluginconsts/'
    consts = Interp({})
    for f in git(mirror, 'ls-tree', '--name-only', TAG, d).split():
        consts.load(Parser(git(mirror, 'show', f'{TAG}:{f}')).file())
    return ''.join(consts.globals.get(p + 'FieldSpecs') for p in LEGACY_ORDER)


# --- running the tests symbolically -------------------------------------------------------------
def load_tests(mirror):
    """Parses every api/krusty/*_test.go; returns the interpreter, a box holding the current
    Recorder, and [(file stem, test name)] in file order."""
    box = [None]
    interp = Interp(make_builtins(mirror, box))
    interp.builtins['__legacy__'] = legacy_configs(mirror)
    tests = []
    for f in git(mirror, 'ls-tree', '--name-only', TAG, 'api/krusty/').split():
        if f.endswith('_test.go'):
            decls = Parser(git(mirror, 'show', f'{TAG}:{f}')).file()
            interp.load(decls)
            stem = posixpath.basename(f)[:-len('_test.go')]
            tests += [(stem, n) for n in decls['funcs'] if re.match(r'Test[A-Z0-9_]', n)]
    return interp, box, tests


def run_test(interp, box, name):
    """Runs one test function; returns its Recorder."""
    rec = box[0] = Recorder(interp)
    try:
        interp.call(interp.globals.get(name), [T(rec)])
    except Unportable as e:
        rec.skips.append(((), str(e)))
    except RecursionError:
        rec.skips.append(((), 'interpreter: recursion'))
    except Exception as e:  # a construct the interpreter does not handle
        rec.skips.append(((), f'interpreter: {type(e).__name__}: {e}'))
    return rec


def sanitize(s):
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
                       text=True, timeout=120)
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
    return notes


def generate(mirror):
    """Regenerates every case, INDEX.md; returns nothing."""
    interp, box, tests = load_tests(mirror)
    if OUT.exists():
        for child in OUT.iterdir():
            shutil.rmtree(child) if child.is_dir() else None
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    for stem, test in tests:
        rec = run_test(interp, box, test)
        cells, notes = [], []
        for name, b in zip(case_names(stem, test, rec.builds), rec.builds):
            case = OUT / name
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
                cells.append(f'{name[len(stem) + len(test) + 4:] or "(build)"}: not ported: {why}')
                continue
            if ok:
                (case / 'expected.yaml').write_text(result)
            else:
                (case / 'kubectl-error.txt').write_text(result)
                frags = pick_fragments(case, result, b)
                (case / 'expected-error.txt').write_text(''.join(f + '\n' for f in frags))
            extra = compare_with_go(b, ok, result) + b.notes
            if b.path:
                extra.insert(0, f'builds `{b.path}`')
            cells.append(f'`{name}`' + (' (error)' if not ok else '') +
                         (': ' + '; '.join(extra) if extra else ''))
        for names, why in rec.skips:
            label = '--'.join(map(sanitize, names)) or '(test)'
            cells.append(f'{label}: not ported: {why}')
        if not rec.builds and not rec.skips:
            cells.append('not ported: the test builds nothing')
        rows.append((stem, test, cells))
    write_index(rows)


def write_index(rows):
    ported = sum(1 for _, _, c in rows if any(x.startswith('`') for x in c))
    cases = sum(1 for _, _, c in rows for x in c if x.startswith('`'))
    lines = ['# Upstream krusty tests as golden cases', '',
             f'Generated by `tools/krusty_cases.py` from `api/krusty/*_test.go` at {TAG}; '
             'do not edit by hand.', '',
             f'{len(rows)} test functions, {ported} with at least one case, {cases} cases. '
             'Each case builds `input/` (or `input/<build-dir>`) with default options; '
             '`expected.yaml` / `kubectl-error.txt` come from `kubectl kustomize` '
             '(Kustomize v5.8.1), which is trusted over the Go test where they differ.', '',
             '| file | test | cases |', '| --- | --- | --- |']
    for stem, test, cells in rows:
        lines.append(f'| {stem} | {test} | ' + '<br>'.join(c.replace('|', '\\|') for c in cells) + ' |')
    (OUT / 'INDEX.md').write_text('\n'.join(lines) + '\n')


# --- our binary ---------------------------------------------------------------------------------
THEMES = [  # (theme, regex over failure reason + kustomization files), first match wins
]


def first_difference(want, got):
    w, g = want.splitlines(), got.splitlines()
    for i, (a, b) in enumerate(zip(w, g)):
        if a != b:
            return f'line {i + 1}: expected {a!r}, got {b!r}'
    return f'line {min(len(w), len(g)) + 1}: expected {len(w)} lines, got {len(g)}'


def check_case(case):
    """Runs our binary on a case: None if it matches, else a one-line reason."""
    for _ in range(10):
        if OURS.exists():
            break
        import time
        time.sleep(30)
    p = subprocess.run([str(OURS), 'build', str(input_dir(case))], capture_output=True,
                       text=True, timeout=120)
    err = ' '.join(p.stderr.split())
    if (case / 'expected.yaml').exists():
        if p.returncode != 0:
            return f'fails where kustomize succeeds: {err[:200]}'
        want = (case / 'expected.yaml').read_text()
        return None if p.stdout == want else first_difference(want, p.stdout)
    if p.returncode == 0:
        return 'succeeds where kustomize fails'
    for frag in (case / 'expected-error.txt').read_text().splitlines():
        if frag and frag not in p.stderr:
            return f'error {err[:200]!r} lacks {frag!r}'
    return None


def theme_of(case, reason):
    blob = reason + '\n' + '\n'.join(f.read_text(errors='replace') for f in (case / 'input').rglob('*')
                                     if f.is_file() and f.name in KUST_NAMES)
    for theme, pattern in THEMES:
        if re.search(pattern, blob, re.M):
            return theme
    return 'other'


def results():
    """Runs our binary on every case and writes RESULTS.md."""
    cases = sorted(p for p in OUT.iterdir() if (p / 'input').is_dir())
    fails, counts = [], Counter()
    for case in cases:
        kind = 'error' if (case / 'kubectl-error.txt').exists() else 'ok'
        why = check_case(case)
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
    print(f'{len(cases)} cases, {len(fails)} failures')


def main():
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
