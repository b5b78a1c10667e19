"""A tiny interpreter for the subset of Go that kustomize's `api/krusty` tests are written in.

`tools/krusty_cases.py` uses it to *run* each test function symbolically (ASTs from
`krusty_goparse.py`): file writes, builds and assertions are recorded by harness objects
supplied by the caller (`krusty_harness.py`), while everything the interpreter cannot know
(results of builds, error texts, test servers...) is the value `UNK`, which propagates through
expressions and makes `if`/`for` over it do nothing.
"""
import re


class Unportable(Exception):
    """Raised when a test (or sub-test) cannot be turned into a golden case; the message says why."""


# --- runtime ------------------------------------------------------------------------------------
class GoObj:
    """An object with Go-visible members: `x.name` resolves to the Python attribute `go_name`."""

    def member(self, name):
        return getattr(self, 'go_' + name, None) or (lambda *a: UNK)


class Unknown(GoObj):
    """A value the interpreter cannot know; operations on it yield UNK."""

    def __repr__(self):
        return 'UNK'


UNK = Unknown()


class PkgRef(str):
    """A package-qualified name such as 'types.LoadRestrictionsNone' (a str, so it compares)."""


class Struct(dict):
    """A Go struct value (fields by name)."""


class TypeVal:
    """A type used as a value (conversions, make, composite literals)."""

    def __init__(self, typ):
        self.typ = typ


class Closure:
    """A Go function value: parameters [(name, variadic)], body, scope, named results."""

    def __init__(self, params, body, env, results=()):
        self.params, self.body, self.env, self.results = params, body, env, results


class Lazy:
    """A package-level variable, evaluated on first use."""

    def __init__(self, expr, typ, env):
        self.expr, self.typ, self.env = expr, typ, env


class Return(Exception):
    """Unwinds a function call with its result."""


class Branch(Exception):
    """Unwinds to the enclosing loop or switch (break/continue)."""


class Env:
    """A scope: variables, with a parent scope."""

    def __init__(self, parent=None, interp=None):
        self.vars, self.parent = {}, parent
        self.interp = interp or parent.interp

    def find(self, name):
        """The scope that defines `name`, or None."""
        env = self
        while env is not None:
            if name in env.vars:
                return env
            env = env.parent
        return None

    def get(self, name):
        """The value of `name` (package-level variables are evaluated on first use)."""
        env = self.find(name)
        if env is None:
            return self.interp.unbound(name)
        v = env.vars[name]
        if isinstance(v, Lazy):
            v = env.vars[name] = self.interp.eval(v.expr, v.env) if v.expr else self.interp.zero(v.typ, v.env)
        return v


def go_str(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if v is None:
        return '<nil>'
    if isinstance(v, list) and all(isinstance(c, str) for c in v):
        return ''.join(v)
    return str(v)


def sprintf(fmt, *args):
    """fmt.Sprintf for %s %v %d %q %t %%; UNK if an argument is unknown."""
    if fmt is UNK or any(isinstance(a, Unknown) for a in args):
        return UNK
    it = iter(args)
    def verb(m):
        if m.group(2) == '%':
            return '%'
        a = next(it)
        if m.group(2) == 'q':
            return '"' + go_str(a).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n') + '"'
        if m.group(2) == 'd':
            return ('%' + m.group(1) + 'd') % a
        return ('%' + m.group(1) + 's') % go_str(a)
    return re.sub(r'%([-+# 0]*\d*(?:\.\d+)?)([svdqt%])', verb, fmt)


class Interp:
    """Evaluates tuple ASTs. `builtins` maps names and 'pkg.Func' to Python callables/values;
    a name that is not in scope is taken as a package (its members are PkgRefs)."""

    def __init__(self, builtins):
        self.builtins = builtins
        self.globals = Env(interp=self)

    def load(self, decls):
        """Defines the declarations of one parsed file at package level."""
        for name, (params, body, results) in decls['funcs'].items():
            if name not in self.builtins:  # builtins may replace package functions
                self.globals.vars[name] = Closure(params, body, self.globals, results)
        for name, typ in decls['types']:
            self.globals.vars[name] = TypeVal(typ)
        for names, typ, exprs in decls['vars']:
            for i, name in enumerate(names):
                self.globals.vars[name] = Lazy(exprs[i] if i < len(exprs) else None, typ, self.globals)

    def unbound(self, name):
        """A name in no scope: a builtin, else a package (PkgRef)."""
        if name in self.builtins:
            return self.builtins[name]
        return PkgRef(name)

    def resolve(self, typ, env):
        """A type with named (locally declared) types replaced by their definitions."""
        while typ and typ[0] == 'tname':
            v = env.find(typ[1]) and env.get(typ[1])
            if not isinstance(v, TypeVal):
                break
            typ = v.typ
        return typ

    def zero(self, typ, env):
        """A type's zero value (UNK where it does not matter to the tests)."""
        typ = self.resolve(typ, env)
        if typ is None:
            return UNK
        if typ[0] == 'tstruct':
            return Struct((n, self.zero(t, env)) for n, t in typ[1])
        if typ[0] == 'tname':
            name = typ[1]
            if name == 'string':
                return ''
            if name == 'bool':
                return False
            if re.fullmatch(r'u?int\d*|float\d+|byte|rune', name):
                return 0
            return None if name in ('error', 'any') else UNK
        return None

    # --- calls --------------------------------------------------------------------------------
    def call(self, f, args):
        """Calls a Go function value, a conversion, a package function or a Python callable."""
        if isinstance(f, Closure):
            env = Env(f.env)
            for i, (name, variadic) in enumerate(f.params):
                env.vars[name] = list(args[i:]) if variadic else (args[i] if i < len(args) else UNK)
            for name in f.results:
                env.vars[name] = None
            try:
                self.exec(f.body, env)
            except Return as r:
                if r.args[0] is None and f.results:  # a bare return of named results
                    named = tuple(env.vars[n] for n in f.results)
                    return named if len(named) > 1 else named[0]
                return r.args[0]
            return None
        if isinstance(f, TypeVal):
            return args[0] if args else UNK
        if isinstance(f, PkgRef):
            fn = self.builtins.get(f)
            return fn(*args) if fn else UNK
        if callable(f):
            return f(*args)
        return UNK

    # --- expressions --------------------------------------------------------------------------
    def eval(self, x, env):
        """The value of an expression AST."""
        kind = x[0]
        if kind == 'lit':
            return x[1]
        if kind == 'name':
            return env.get(x[1])
        if kind == 'sel':
            v = self.eval(x[1], env)
            if isinstance(v, PkgRef):
                full = PkgRef(v + '.' + x[2])
                return self.builtins.get(full, full) if not callable(self.builtins.get(full)) else full
            if isinstance(v, dict):
                return v.get(x[2], UNK)
            return v.member(x[2]) if isinstance(v, GoObj) else UNK
        if kind == 'call':
            f = self.eval(x[1], env)
            args = [self.eval(a, env) for a in x[2]]
            if x[3] and args:
                last = args.pop()
                if isinstance(last, Unknown):
                    return UNK
                args += list(last or [])
            return self.call(f, args)
        if kind == 'index':
            v, i = self.eval(x[1], env), self.eval(x[2], env)
            if isinstance(v, dict):
                return v.get(i, UNK)
            if isinstance(v, (list, str, tuple)) and isinstance(i, int):
                return v[i] if -len(v) <= i < len(v) else UNK
            return UNK
        if kind == 'slice':
            v = self.eval(x[1], env)
            lo = self.eval(x[2], env) if x[2] else None
            hi = self.eval(x[3], env) if x[3] else None
            if isinstance(v, (list, str)) and not isinstance(lo, Unknown) and not isinstance(hi, Unknown):
                return v[lo:hi]
            return UNK
        if kind == 'unary':
            v = self.eval(x[2], env)
            if x[1] in ('&', '*', '+'):
                return v
            if isinstance(v, Unknown):
                return UNK
            return (not v) if x[1] == '!' else (-v if x[1] == '-' else UNK)
        if kind == 'bin':
            return self.binary(x[1], x[2], x[3], env)
        if kind == 'comp':
            return self.composite(x[1], x[2], env)
        if kind == 'func':
            return Closure(x[1], x[2], env, x[3])
        if kind == 'type':
            return TypeVal(x[1])
        raise Unportable(f'cannot evaluate {kind}')

    def binary(self, op, lx, rx, env):
        """A binary operation, with UNK propagating and && / || short-circuiting."""
        a = self.eval(lx, env)
        if op in ('&&', '||'):
            if a is (op == '||'):
                return a
            b = self.eval(rx, env)
            if b is (op == '||'):
                return b
            return UNK if isinstance(a, Unknown) or isinstance(b, Unknown) else b
        b = self.eval(rx, env)
        if op in ('==', '!='):
            eq = self.builtins['__eq__'](a, b)
            return eq if isinstance(eq, Unknown) else (eq if op == '==' else not eq)
        if isinstance(a, (Unknown, GoObj)) or isinstance(b, (Unknown, GoObj)):
            return UNK
        if op == '+' and isinstance(a, list):
            return a + list(b)
        ops = {'+': lambda: a + b, '-': lambda: a - b, '*': lambda: a * b,
               '/': lambda: a // b if isinstance(a, int) else a / b, '%': lambda: a % b,
               '<': lambda: a < b, '<=': lambda: a <= b, '>': lambda: a > b, '>=': lambda: a >= b}
        try:
            return ops[op]()
        except (KeyError, TypeError, ZeroDivisionError):
            return UNK

    def composite(self, typ, elems, env):
        """A composite literal: slice, map or struct (elided element types filled in)."""
        t = self.resolve(typ, env) or ('tname', '?')
        if t[0] == 'tptr':
            t = self.resolve(t[1], env)
        def elem(v, et):
            if v[0] == 'comp' and v[1] is None:
                return self.composite(et, v[2], env)
            if v[0] == 'unary' and v[1] == '&' and v[2][0] == 'comp' and v[2][1] is None:
                return self.composite(et, v[2][2], env)
            return self.eval(v, env)
        if t[0] == 'tslice':
            return [elem(v, t[1]) for _, v in elems]
        if t[0] == 'tmap':
            return {self.eval(k, env) if k[0] != 'comp' else UNK: elem(v, t[2]) for k, v in elems}
        if t[0] == 'tstruct':
            out = self.zero(t, env)
            ftypes = dict(t[1])
            for i, (k, v) in enumerate(elems):
                name = k[1] if k else t[1][i][0]
                out[name] = elem(v, ftypes.get(name))
            return out
        out = Struct()
        for i, (k, v) in enumerate(elems):
            out[k[1] if k and k[0] == 'name' else i] = elem(v, None)
        return out

    # --- statements ---------------------------------------------------------------------------
    def assign(self, target, value, env, define=False):
        """Assigns to a name, field or index expression."""
        if target[0] == 'name':
            if target[1] == '_':
                return
            scope = env if define else (env.find(target[1]) or env)
            scope.vars[target[1]] = value
        elif target[0] == 'sel':
            obj = self.eval(target[1], env)
            hook = self.builtins.get('__setattr__')
            if hook and hook(obj, target, value):
                return
            if isinstance(obj, dict):
                obj[target[2]] = value
        elif target[0] == 'index':
            obj, key = self.eval(target[1], env), self.eval(target[2], env)
            if isinstance(obj, dict) and not isinstance(key, Unknown):
                obj[key] = value
            elif isinstance(obj, list) and isinstance(key, int) and key < len(obj):
                obj[key] = value
        elif target[0] == 'unary':
            self.assign(target[2], value, env, define)

    def values(self, exprs, n, env):
        """Values for an n-target assignment (a tuple-valued call spreads)."""
        vals = [self.eval(e, env) for e in exprs]
        if n > 1 and len(vals) == 1:
            v = vals[0]
            if isinstance(v, tuple):
                return list(v) + [UNK] * (n - len(v))
            return [v] + [UNK] * (n - 1)
        return vals

    def exec(self, s, env):
        """Executes a statement AST."""
        kind = s[0]
        if kind == 'block':
            inner = Env(env)
            for st in s[1]:
                self.exec(st, inner)
        elif kind == 'expr':
            self.eval(s[1], env)
        elif kind in ('define', 'assign'):
            for target, v in zip(s[1], self.values(s[2], len(s[1]), env)):
                self.assign(target, v, env, kind == 'define')
        elif kind == 'opassign':
            self.assign(s[1], self.binary(s[2], s[1], s[3], env), env)
        elif kind == 'vars':
            for names, typ, exprs in s[1]:
                vals = self.values(exprs, len(names), env) if exprs else [self.zero(typ, env) for _ in names]
                for n, v in zip(names, vals):
                    env.vars[n] = v
        elif kind == 'types':
            for name, typ in s[1]:
                env.vars[name] = TypeVal(typ)
        elif kind == 'return':
            vals = [self.eval(e, env) for e in s[1]]
            raise Return(vals[0] if len(vals) == 1 else (tuple(vals) if vals else None))
        elif kind == 'if':
            inner = Env(env)
            if s[1]:
                self.exec(s[1], inner)
            cond = self.eval(s[2], inner)
            if cond is True:
                self.exec(s[3], inner)
            elif cond is False and s[4]:
                self.exec(s[4], inner)
        elif kind == 'range':
            self.exec_range(s, env)
        elif kind == 'for':
            inner = Env(env)
            if s[1]:
                self.exec(s[1], inner)
            for _ in range(10000):
                if s[2] is not None and self.eval(s[2], inner) is not True:
                    break
                try:
                    self.exec(s[4], inner)
                except Branch as b:
                    if b.args[0] == 'break':
                        break
                if s[3]:
                    self.exec(s[3], inner)
        elif kind == 'switch':
            inner = Env(env)
            if s[1]:
                self.exec(s[1], inner)
            tag = self.eval(s[2], inner) if s[2] else True
            if isinstance(tag, Unknown):
                return
            chosen = next((b for exprs, b in s[3] if exprs and any(
                self.builtins['__eq__'](self.eval(e, inner), tag) is True for e in exprs)), None)
            chosen = chosen or next((b for exprs, b in s[3] if exprs is None), None)
            if chosen:
                try:
                    self.exec(chosen, inner)
                except Branch as b:
                    if b.args[0] != 'break':
                        raise
        elif kind == 'branch':
            raise Branch(s[1])

    def exec_range(self, s, env):
        """Executes `for k, v := range x` (map keys in sorted order)."""
        _, lhs, op, x, body = s
        coll = self.eval(x, env)
        if isinstance(coll, dict):
            items = [(k, coll[k]) for k in sorted(coll, key=str)]
        elif isinstance(coll, (list, tuple, str)):
            items = list(enumerate(coll))
        elif isinstance(coll, int) and not isinstance(coll, bool):
            items = [(i, None) for i in range(coll)]
        else:
            return
        for k, v in items:
            inner = Env(env)
            for target, val in zip(lhs, (k, v)):
                self.assign(target, val, inner if op == ':=' else env, op == ':=')
            try:
                self.exec(body, inner)
            except Branch as b:
                if b.args[0] == 'break':
                    break
