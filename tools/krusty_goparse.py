"""A parser for the subset of Go that kustomize's `api/krusty` tests are written in.

It turns Go source into tuple ASTs that `krusty_gointerp.py` runs (for `krusty_cases.py`).
Type information is kept only as far as composite literals need it (struct field order and
element types); generics, channels, select and goto are not supported.
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
        """The token k places ahead."""
        return self.toks[self.i + k]

    def at(self, *vals):
        """Whether the current token is one of the given keywords or operators."""
        t = self.toks[self.i]
        return t[0] in ('op', 'id') and t[1] in vals

    def accept(self, val):
        """Consumes the current token if it is `val`."""
        if self.at(val):
            self.i += 1
            return True
        return False

    def expect(self, val):
        """Consumes `val` or fails."""
        if not self.accept(val):
            raise SyntaxError(f'expected {val!r}, found {self.peek()!r} at token {self.i}')

    def ident(self):
        """Consumes an identifier."""
        t = self.toks[self.i]
        if t[0] != 'id':
            raise SyntaxError(f'expected identifier, found {t!r}')
        self.i += 1
        return t[1]

    def skip_balanced(self, open_, close):
        """Skips a bracketed token run (imports, receivers, interface bodies)."""
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
        """const/var specs, grouped or single: [(names, type, exprs)]."""
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
        """type specs, grouped or single: [(name, type)]."""
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
        """A type: ('tname', name), ('tslice', t), ('tmap', k, v), ('tptr', t), ('tstruct', fields)..."""
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
        """Struct fields as [(name, type)] (embedded fields named after their type)."""
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
        """A `{ ... }` statement list: ('block', stmts)."""
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
        """One statement (None for an empty one or a defer/go, which the tests use only for cleanup)."""
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
        """A simple statement: define, assign, op-assign, inc/dec, range clause or expression."""
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
        """Parses an if/for/switch header, where `T{` is not a composite literal."""
        old, self.nolit = self.nolit, True
        try:
            return parse()
        finally:
            self.nolit = old

    def if_stmt(self):
        """('if', init, cond, then, else)"""
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
        """('for', init, cond, post, body) or ('range', targets, op, expr, body)"""
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
        """('switch', init, tag, [(exprs or None for default, block)])"""
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
        """Comma-separated expressions."""
        out = [self.expr()]
        while self.accept(','):
            out.append(self.expr())
        return out

    def expr(self, prec=1):
        """A binary expression by precedence climbing."""
        x = self.unary()
        while self.peek()[0] == 'op' and PREC.get(self.peek()[1], 0) >= prec:
            op = self.peek()[1]
            self.i += 1
            x = ('bin', op, x, self.expr(PREC[op] + 1))
        return x

    def unary(self):
        """A unary expression."""
        if self.at('-', '!', '+', '^', '*', '&', '<-'):
            op = self.peek()[1]
            self.i += 1
            return ('unary', op, self.unary())
        return self.primary()

    def primary(self):
        """An operand followed by selectors, calls, index/slice expressions and composite literals."""
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
        """A literal, name, function literal, type or parenthesized expression."""
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
        """The `{...}` of a composite literal: ('comp', type, [(key or None, value)])."""
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
        """A composite literal element (`{...}` without a type is allowed)."""
        return self.complit(None) if self.at('{') else self.expr()


def dotted(x):
    """'a.b.c' for a chain of names and selectors, else None."""
    if x[0] == 'name':
        return x[1]
    if x[0] == 'sel':
        base = dotted(x[1])
        return base and base + '.' + x[2]
    return None
