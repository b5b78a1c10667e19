"""A tiny interpreter for the subset of Go that kustomize's `api/krusty` tests are written in.

`tools/krusty_cases.py` uses it to *run* each test function symbolically: file writes, builds
and assertions are recorded by harness objects supplied by the caller, while everything the
interpreter cannot know (results of builds, error texts, test servers...) is the value `UNK`,
which propagates through expressions and makes `if`/`for` over it do nothing.
"""
import ast
import re

TOKEN = re.compile(r'''(?P<nl>\n)|(?P<ws>[ \t\r\f]+)|(?P<com>//[^\n]*|/\*.*?\*/)
 |(?P<str>`[^`]*`|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])+')
 |(?P<num>\.?\d[\w.]*)|(?P<id>[A-Za-z_]\w*)
 |(?P<op>\.\.\.|&\^=|<<=|>>=|[:+\-*/%&|^<>=!]=|<<|>>|&\^|&&|\|\||<-|\+\+|--|[-+*/%&|^<>=!()\[\]{},;.:~])''',
                   re.S | re.X)
KEYWORDS = {'break', 'case', 'chan', 'const', 'continue', 'default', 'defer', 'else', 'fallthrough',
            'for', 'func', 'go', 'goto', 'if', 'import', 'interface', 'map', 'package', 'range',
            'return', 'select', 'struct', 'switch', 'type', 'var'}
ENDS_STATEMENT = {'break', 'continue', 'fallthrough', 'return', ')', ']', '}', '++', '--'}
PREC = {'||': 1, '&&': 2, '==': 3, '!=': 3, '<': 3, '<=': 3, '>': 3, '>=': 3, '+': 4, '-': 4,
        '|': 4, '^': 4, '*': 5, '/': 5, '%': 5, '<<': 5, '>>': 5, '&': 5, '&^': 5}


class Unportable(Exception):
    """Raised when a test (or sub-test) cannot be turned into a golden case; the message says why."""


def tokenize(src):
    """Splits Go source into (kind, value) tokens, inserting semicolons as the Go spec does."""
    toks, pos = [], 0
    def newline():
        if toks and (toks[-1][0] in ('lit', 'id') and toks[-1][1] not in KEYWORDS
                     or toks[-1][1] in ENDS_STATEMENT):
            toks.append(('op', ';'))
    while pos < len(src):
        m = TOKEN.match(src, pos)
        if not m:
            raise SyntaxError(f'bad character {src[pos]!r}')
        pos, kind, text = m.end(), m.lastgroup, m.group()
        if kind == 'nl' or kind == 'com' and '\n' in text:
            newline()
        elif kind == 'str':
            if text[0] == '`':
                toks.append(('lit', text[1:-1].replace('\r', '')))
            elif text[0] == "'":
                toks.append(('lit', ord(ast.literal_eval(text))))
            else:
                toks.append(('lit', ast.literal_eval(text)))
        elif kind == 'num':
            try:
                toks.append(('lit', int(text.replace('_', ''), 0)))
            except ValueError:
                toks.append(('lit', float(text) if re.fullmatch(r'[\d.eE+-]+', text) else 0))
        elif kind in ('id', 'op'):
            toks.append((kind, text))
    newline()
    toks.append(('eof', ''))
    return toks


class Parser:
    """Recursive-descent parser producing tuple ASTs: ('kind', ...) for statements and expressions."""

    def __init__(self, src):
        self.toks, self.i, self.nolit = tokenize(src), 0, False

    def peek(self, k=0):
        return self.toks[self.i + k]

    def at(self, *vals):
        t = self.toks[self.i]
        return t[0] in ('op', 'id') and t[1] in vals

    def accept(self, val):
        if self.at(val):
            self.i += 1
            return True
        return False

    def expect(self, val):
        if not self.accept(val):
            raise SyntaxError(f'expected {val!r}, found {self.peek()!r} at token {self.i}')

    def ident(self):
        t = self.toks[self.i]
        if t[0] != 'id':
            raise SyntaxError(f'expected identifier, found {t!r}')
        self.i += 1
        return t[1]

    def skip_balanced(self, open_, close):
        depth = 0
        while True:
            t = self.toks[self.i][1]
            self.i += 1
            depth += (t == open_) - (t == close)
            if depth == 0:
                return

    # --- declarations -------------------------------------------------------------------------
    def file(self):
        """Top-level declarations: {'funcs': {name: (params, body)}, 'vars': [(names, type, exprs)],
        'types': [(name, type)]}. Methods (functions with receivers) are ignored."""
        decls = {'funcs': {}, 'vars': [], 'types': []}
        while not self.peek()[0] == 'eof':
            if self.accept('package'):
                self.ident()
            elif self.accept('import'):
                if self.at('('):
                    self.skip_balanced('(', ')')
                else:
                    self.i += 2 if self.peek()[0] == 'id' else 1
            elif self.accept('func'):
                receiver = self.at('(')
                if receiver:
                    self.skip_balanced('(', ')')
                name, params = self.ident(), self.params()
                results = self.result()
                body = self.block()
                if not receiver:
                    decls['funcs'][name] = (params, body, results)
            elif self.at('const', 'var'):
                self.i += 1
                decls['vars'] += self.var_specs()
            elif self.accept('type'):
                decls['types'] += self.type_specs()
            self.accept(';')
        return decls

    def var_specs(self):
        specs = []
        def spec():
            names = [self.ident()]
            while self.accept(','):
                names.append(self.ident())
            typ = None if self.at('=', ';', ')') else self.type()
            specs.append((names, typ, self.exprlist() if self.accept('=') else []))
        if self.accept('('):
            while not self.accept(')'):
                if not self.accept(';'):
                    spec()
        else:
            spec()
        return specs

    def type_specs(self):
        specs = []
        def spec():
            name = self.ident()
            self.accept('=')
            specs.append((name, self.type()))
        if self.accept('('):
            while not self.accept(')'):
                if not self.accept(';'):
                    spec()
        else:
            spec()
        return specs

    def params(self):
        """A parameter list, as [(name, variadic)]; unnamed parameters are named '_'."""
        self.expect('(')
        old, self.nolit, entries = self.nolit, False, []
        while not self.at(')'):
            if self.peek()[0] == 'id' and self.peek(1)[1] not in (',', ')', '.'):
                name = self.ident()
                variadic = self.accept('...')
                entries.append((name, self.type(), variadic))
            else:
                variadic = self.accept('...')
                entries.append((None, self.type(), variadic))
            if not self.accept(','):
                break
        self.expect(')')
        self.nolit = old
        named = any(e[0] for e in entries)
        return [((e[0] or e[1][1]) if named else '_', e[2]) for e in entries]

    def result(self):
        """A result list: the names of named results ([] if unnamed or none)."""
        if self.at('('):
            return [n for n, _ in self.params() if n != '_']
        if self.peek()[0] == 'id' and not self.at('{') or self.at('*', '['):
            self.type()
        return []

    def type(self):
        if self.accept('*'):
            return ('tptr', self.type())
        if self.accept('['):
            if not self.accept(']'):
                if not self.accept('...'):
                    self.expr()
                self.expect(']')
            return ('tslice', self.type())
        if self.accept('map'):
            self.expect('[')
            key = self.type()
            self.expect(']')
            return ('tmap', key, self.type())
        if self.accept('chan'):
            return ('tchan', self.type())
        if self.accept('func'):
            self.params()
            if not self.at(';', ')', ',', '}', ']', '{', '=') and self.peek()[0] != 'lit':
                self.result()
            return ('tfunc',)
        if self.accept('interface'):
            self.skip_balanced('{', '}')
            return ('tiface',)
        if self.accept('struct'):
            return ('tstruct', self.struct_fields())
        if self.accept('('):
            t = self.type()
            self.expect(')')
            return t
        name = self.ident()
        if self.accept('.'):
            name += '.' + self.ident()
        return ('tname', name)

    def struct_fields(self):
        self.expect('{')
        fields = []
        while not self.accept('}'):
            if self.accept(';'):
                continue
            if self.at('*') or self.peek(1)[1] in ('.', ';', '}') or self.peek(1)[0] == 'lit':
                typ = self.type()
                fields.append((typ[1].split('.')[-1] if typ[0] == 'tname' else '_', typ))
            else:
                names = [self.ident()]
                while self.accept(','):
                    names.append(self.ident())
                typ = self.type()
                fields += [(n, typ) for n in names]
            if self.peek()[0] == 'lit':
                self.i += 1
        return fields

    # --- statements ---------------------------------------------------------------------------
    def block(self):
        self.expect('{')
        old, self.nolit, stmts = self.nolit, False, []
        while not self.accept('}'):
            s = self.stmt()
            if s:
                stmts.append(s)
            self.accept(';')
        self.nolit = old
        return ('block', stmts)

    def stmt(self):
        t = self.peek()
        kw = t[1] if t[0] in ('id', 'op') else None
        if kw == ';':
            return None
        if kw in ('var', 'const'):
            self.i += 1
            return ('vars', self.var_specs())
        if kw == 'type':
            self.i += 1
            return ('types', self.type_specs())
        if kw == 'return':
            self.i += 1
            return ('return', [] if self.at(';', '}') else self.exprlist())
        if kw in ('defer', 'go'):
            self.i += 1
            self.expr()
            return None
        if kw in ('break', 'continue', 'goto', 'fallthrough'):
            self.i += 1
            if self.peek()[0] == 'id':
                self.i += 1
            return ('branch', kw)
        if kw == '{':
            return self.block()
        if kw == 'if':
            return self.if_stmt()
        if kw == 'for':
            return self.for_stmt()
        if kw == 'switch':
            return self.switch_stmt()
        if t[0] == 'id' and self.peek(1)[1] == ':' and kw not in KEYWORDS:
            self.i += 2
            return self.stmt()
        return self.simple()

    def simple(self):
        lhs = self.exprlist()
        if self.at(':=', '='):
            op = self.peek()[1]
            self.i += 1
            if self.accept('range'):
                return ('range', lhs, op, self.expr())
            return ('define' if op == ':=' else 'assign', lhs, self.exprlist())
        if self.peek()[0] == 'op' and self.peek()[1].endswith('=') and self.peek()[1][:-1] in PREC:
            op = self.peek()[1][:-1]
            self.i += 1
            return ('opassign', lhs[0], op, self.expr())
        if self.at('++', '--'):
            op = self.peek()[1][0]
            self.i += 1
            return ('opassign', lhs[0], op, ('lit', 1))
        return ('expr', lhs[0])

    def header(self, parse):
        old, self.nolit = self.nolit, True
        try:
            return parse()
        finally:
            self.nolit = old

    def if_stmt(self):
        self.expect('if')
        def head():
            s = self.simple()
            if self.accept(';'):
                return s, self.expr()
            return None, s[1]
        init, cond = self.header(head)
        then, other = self.block(), None
        if self.accept('else'):
            other = self.if_stmt() if self.at('if') else self.block()
        return ('if', init, cond, then, other)

    def for_stmt(self):
        self.expect('for')
        if self.at('{'):
            return ('for', None, None, None, self.block())
        def head():
            if self.accept('range'):
                return ('range', [], ':=', self.expr())
            first = None if self.at(';') else self.simple()
            if first and first[0] == 'range':
                return first
            if not self.accept(';'):
                return ('for', None, first[1], None)
            cond = None if self.at(';') else self.expr()
            self.expect(';')
            return ('for', first, cond, None if self.at('{') else self.simple())
        h = self.header(head)
        return h + (self.block(),)

    def switch_stmt(self):
        self.expect('switch')
        def head():
            if self.at('{'):
                return None, None
            s = self.simple()
            if self.accept(';'):
                return s, None if self.at('{') else self.simple()[1]
            return None, s[1]
        init, tag = self.header(head)
        self.expect('{')
        clauses = []
        while not self.accept('}'):
            exprs = None if self.accept('default') else (self.expect('case') or self.exprlist())
            self.expect(':')
            body = []
            while not self.at('case', 'default', '}'):
                s = self.stmt()
                if s:
                    body.append(s)
                self.accept(';')
            clauses.append((exprs, ('block', body)))
        return ('switch', init, tag, clauses)

    # --- expressions --------------------------------------------------------------------------
    def exprlist(self):
        out = [self.expr()]
        while self.accept(','):
            out.append(self.expr())
        return out

    def expr(self, prec=1):
        x = self.unary()
        while self.peek()[0] == 'op' and PREC.get(self.peek()[1], 0) >= prec:
            op = self.peek()[1]
            self.i += 1
            x = ('bin', op, x, self.expr(PREC[op] + 1))
        return x

    def unary(self):
        if self.at('-', '!', '+', '^', '*', '&', '<-'):
            op = self.peek()[1]
            self.i += 1
            return ('unary', op, self.unary())
        return self.primary()

    def primary(self):
        x = self.operand()
        while True:
            if self.accept('.'):
                if self.accept('('):
                    self.accept('type') or self.type()
                    self.expect(')')
                else:
                    x = ('sel', x, self.ident())
            elif self.at('('):
                self.i += 1
                old, self.nolit, args, ell = self.nolit, False, [], False
                while not self.at(')'):
                    args.append(self.expr())
                    ell = self.accept('...')
                    if not self.accept(','):
                        break
                self.expect(')')
                self.nolit = old
                x = ('call', x, args, ell)
            elif self.at('['):
                self.i += 1
                old, self.nolit = self.nolit, False
                lo = None if self.at(':') else self.expr()
                if self.accept(':'):
                    x = ('slice', x, lo, None if self.at(']') else self.expr())
                else:
                    x = ('index', x, lo)
                self.expect(']')
                self.nolit = old
            elif self.at('{') and (x[0] == 'type' or x[0] in ('name', 'sel') and not self.nolit):
                x = self.complit(x[1] if x[0] == 'type' else ('tname', dotted(x)))
            else:
                return x

    def operand(self):
        t = self.peek()
        if t[0] == 'lit':
            self.i += 1
            return ('lit', t[1])
        if self.accept('func'):
            params = self.params()
            results = [] if self.at('{') else self.result()
            return ('func', params, self.block(), results) if self.at('{') else ('type', ('tfunc',))
        if self.at('[', 'map', 'struct', 'chan', 'interface'):
            return ('type', self.type())
        if self.accept('('):
            old, self.nolit = self.nolit, False
            x = self.expr()
            self.expect(')')
            self.nolit = old
            return x
        return ('name', self.ident())

    def complit(self, typ):
        self.expect('{')
        old, self.nolit, elems = self.nolit, False, []
        while not self.at('}'):
            self.accept(';')
            if self.at('}'):
                break
            v = self.element()
            if self.accept(':'):
                elems.append((v, self.element()))
            else:
                elems.append((None, v))
            if not self.accept(','):
                self.accept(';')
        self.expect('}')
        self.nolit = old
        return ('comp', typ, elems)

    def element(self):
        return self.complit(None) if self.at('{') else self.expr()


def dotted(x):
    """'a.b.c' for a chain of names and selectors, else None."""
    if x[0] == 'name':
        return x[1]
    if x[0] == 'sel':
        base = dotted(x[1])
        return base and base + '.' + x[2]
    return None


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
    def __init__(self, typ):
        self.typ = typ


class Closure:
    def __init__(self, params, body, env, results=()):
        self.params, self.body, self.env, self.results = params, body, env, results


class Lazy:
    def __init__(self, expr, typ, env):
        self.expr, self.typ, self.env = expr, typ, env


class Return(Exception):
    pass


class Branch(Exception):
    pass


class Env:
    """A scope: variables, with a parent scope."""

    def __init__(self, parent=None, interp=None):
        self.vars, self.parent = {}, parent
        self.interp = interp or parent.interp

    def find(self, name):
        env = self
        while env is not None:
            if name in env.vars:
                return env
            env = env.parent
        return None

    def get(self, name):
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
        return ('%' + m.group(1) + ('d' if m.group(2) == 'd' else 's')) % (a if m.group(2) == 'd' else go_str(a))
    return re.sub(r'%([-+# 0]*\d*(?:\.\d+)?)([svdqt%])', verb, fmt)


class Interp:
    """Evaluates tuple ASTs. `builtins` maps names and 'pkg.Func' to Python callables/values;
    a name that is not in scope is taken as a package (its members are PkgRefs)."""

    def __init__(self, builtins):
        self.builtins = builtins
        self.globals = Env(interp=self)

    def load(self, decls):
        for name, (params, body, results) in decls['funcs'].items():
            if name not in self.builtins:  # builtins may replace package functions
                self.globals.vars[name] = Closure(params, body, self.globals, results)
        for name, typ in decls['types']:
            self.globals.vars[name] = TypeVal(typ)
        for names, typ, exprs in decls['vars']:
            for i, name in enumerate(names):
                self.globals.vars[name] = Lazy(exprs[i] if i < len(exprs) else None, typ, self.globals)

    def unbound(self, name):
        if name in self.builtins:
            return self.builtins[name]
        return PkgRef(name)

    def resolve(self, typ, env):
        while typ and typ[0] == 'tname':
            v = env.find(typ[1]) and env.get(typ[1])
            if not isinstance(v, TypeVal):
                break
            typ = v.typ
        return typ

    def zero(self, typ, env):
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
        if isinstance(f, Closure):
            env = Env(f.env)
            for i, (name, variadic) in enumerate(f.params):
                env.vars[name] = list(args[i:]) if variadic else (args[i] if i < len(args) else UNK)
            for name in f.results:
                env.vars[name] = None
            try:
                self.exec(f.body, env)
            except Return as r:
                if r.args[0] is None and f.results:
                    return tuple(env.vars[n] for n in f.results) if len(f.results) > 1 else env.vars[f.results[0]]
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
        vals = [self.eval(e, env) for e in exprs]
        if n > 1 and len(vals) == 1:
            v = vals[0]
            if isinstance(v, tuple):
                return list(v) + [UNK] * (n - len(v))
            return [v] + [UNK] * (n - 1)
        return vals

    def exec(self, s, env):
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
