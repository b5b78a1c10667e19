"""A model of kustomize's test harness (`api/testutils/kusttest`), `krusty` and testify, for
running `api/krusty/*_test.go` with `krusty_gointerp.py`: what a test writes, builds and asserts
is recorded (a `Recorder` per test, one `Build` per build).
"""
import posixpath
import re

from krusty_gointerp import UNK, GoObj, Interp, PkgRef, Struct, Unknown, Unportable, go_str, sprintf
from krusty_goparse import Parser

TMP = '/TMPROOT'  # stands for on-disk temporary roots (MakeEnhancedHarnessWithTmpRoot, Setup)
KHEAD = '\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n'
CHEAD = '\napiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n'
KUST_NAMES = ('kustomization.yaml', 'kustomization.yml', 'Kustomization')
LEGACY_ORDER = ['namePrefix', 'nameSuffix', 'commonLabel', 'templateLabel', 'commonAnnotation',
                'namespace', 'varReference', 'nameReference', 'images', 'replicas']


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
        """Records a build of `path` on `fs` with `opts`; `expect` is what the call implies."""
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
        """Writes a file (path relative to the test file-system root)."""
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
    """A (nested) field of a PluginConfig, so that assignments to it can be remembered."""

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
    """The (unknown) YAML of a build, which assertions compare with the expected output."""

    def __init__(self, rec):
        self.rec = rec


class ErrVal(GoObj):
    """The error of a build: certainly an error (RunWithErr) or maybe nil (Kustomizer.Run)."""

    def __init__(self, rec, definite):
        self.rec, self.definite = rec, definite

    def go_Error(self):
        return ErrText(self.rec)


class ErrText(Unknown):
    """The (unknown) message of a build error, which assertions search for fragments."""

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

    # --- HarnessEnhanced's plugin runs (plugin/builtin tests), each as a build that lists the
    # plugin's configuration under `transformers:` (or `generators:`) of a kustomization at
    # the loader root.
    def go_ResetLoaderRoot(self, root):
        self.root = root

    def plugin_build(self, config, resources, field, expect):
        """Records a build running `config` over `resources` (None for a generator)."""
        fs = FS()
        fs.files, fs.dirs = dict(self.fs.files), set(self.fs.dirs)
        if any(posixpath.join(fs_path(self.root), n).strip('/') in fs.files for n in KUST_NAMES):
            raise Unportable('the test writes its own kustomization at the plugin root')
        kust = ''
        if resources is not None:
            fs.write(posixpath.join(self.root, 'plugin-resources.yaml'), resources)
            kust += 'resources:\n- plugin-resources.yaml\n'
        fs.write(posixpath.join(self.root, 'plugin-config.yaml'), config)
        kust += f'{field}:\n- plugin-config.yaml\n'
        fs.write(posixpath.join(self.root, 'kustomization.yaml'), kust)
        return self.rec.build(fs, self.root, Options(), expect)

    def go_LoadAndRunGenerator(self, config):
        return Built(self.plugin_build(config, None, 'generators', 'ok'))

    def go_LoadAndRunTransformer(self, config, resources):
        return Built(self.plugin_build(config, resources, 'transformers', 'ok'))

    def go_RunTransformer(self, config, resources):
        rec = self.plugin_build(config, resources, 'transformers', None)
        return Built(rec), ErrVal(rec, False)

    def go_RunTransformerAndCheckResult(self, config, resources, expected):
        rec = self.plugin_build(config, resources, 'transformers', 'ok')
        rec.output = expected if isinstance(expected, str) else None

    def go_ErrorFromLoadAndRunTransformer(self, config, resources):
        return ErrVal(self.plugin_build(config, resources, 'transformers', 'error'), True)

    def go_RunTransformerAndCheckError(self, config, resources, check):
        rec = self.plugin_build(config, resources, 'transformers', 'error')
        self.rec.interp.call(check, [T(self.rec), ErrVal(rec, True)])

    def go_RunTransformerFromResMap(self, config, resmap):
        raise Unportable('the test builds its resources in Go (RunTransformerFromResMap)')

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
        raise Unportable('skipped upstream: ' + (' '.join(map(go_str, args)) or 't.Skip'))

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
    """assert.Equal / require.Equal: an error text or a build output compared with a literal."""
    for x, y in ((a, b), (b, a)):
        if isinstance(x, ErrText):
            mark(x, 'error', y)
        elif isinstance(x, YamlText) and isinstance(y, str):
            x.rec.output, x.rec.expect = y, 'ok'


def strings_contains(s, sub):
    """strings.Contains, remembering substrings searched for in build errors."""
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


def refuse(reason):
    """A function that makes the (sub-)test unportable when called."""
    def f(*args):
        raise Unportable(reason)
    return f


def pure(f):
    """Wraps a Python function so that unknown arguments (or list items) give an unknown result."""
    known = lambda x: not isinstance(x, Unknown) and (not isinstance(x, list) or all(map(known, x)))
    return lambda *a: f(*a) if all(map(known, a)) else UNK


def make_builtins(src, rec_box):
    """Go builtins and the package functions the tests call ('pkg.Func')."""
    def harness(fs=None, root='/'):
        return Harness(rec_box[0], fs or FS(), root)

    def read_testdata(p):
        return src.show(posixpath.normpath(posixpath.join('api/krusty', p))), None
    def kustdir(t, content):
        fs = FS()
        fs.write(posixpath.join(TMP, 'kustomization.yaml'), content)
        return fs, TmpDir()
    b = {
        'true': True, 'false': False, 'nil': None, '__eq__': go_eq, '__setattr__': set_hook,
        'len': lambda x: UNK if isinstance(x, Unknown) else len(x or []),
        'append': lambda xs, *a: UNK if isinstance(xs, Unknown) else list(xs or []) + list(a),
        'make': lambda typ, *a: {} if getattr(typ, 'typ', ('',))[0] == 'tmap' else [],
        'panic': refuse('the test panics'),
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
        'filepath.Join': pure(lambda *a: posixpath.normpath('/'.join(x for x in a if x)) if any(a) else ''),
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
        'skipIfNoDocker': refuse('needs docker (KRM function)'),
        'configureGitSSHCommand': refuse('needs git over ssh (remote)'),
        'httptest.NewServer': refuse('needs a local HTTP server (remote resource)'),
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


def legacy_configs(src):
    """builtinpluginconsts' default field specs, concatenated (th.WriteLegacyConfigs)."""
    consts = Interp({})
    for f in src.ls('api/internal/konfig/builtinpluginconsts/'):
        consts.load(Parser(src.show(f)).file())
    return ''.join(consts.globals.get(p + 'FieldSpecs') for p in LEGACY_ORDER)


# --- running the tests symbolically -------------------------------------------------------------
def load_tests(src):
    """Parses every api/krusty/*_test.go of `src` (with `show(path)` and `ls(dir)`); returns the
    interpreter, a box holding the current Recorder, and [(file stem, test name)] in file order."""
    box = [None]
    interp = Interp(make_builtins(src, box))
    interp.builtins['__legacy__'] = legacy_configs(src)
    tests = []
    for f in src.ls('api/krusty/'):
        if f.endswith('_test.go'):
            decls = Parser(src.show(f)).file()
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
