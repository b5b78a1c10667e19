//! Reading `${…}` expressions as Flux's envsubst (fluxcd/pkg `envsubst/parse`, v1.7.0) reads
//! them: a scanner whose accepted characters and escapes change with what is being read, and
//! a parser that turns text into literal text and substitution functions. Every quirk that
//! decides what a manifest becomes is kept (what ends a name, where `$$` and `\/` are escapes,
//! which forms are refused and with which error), because a substitution that reads
//! differently writes a different object. The parse ends before any variable is looked up, as
//! Flux's does, so a malformed expression fails whatever the variables hold.

use super::expr::ExprError;

/// What an expression becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Node {
    Text(String),
    /// `${param<name>args…}`: `name` is the operator as written (`:-`, `##`, `//`, `^`, …,
    /// empty for a plain `${param}`).
    Func {
        param: String,
        name: String,
        args: Vec<Node>,
    },
}

/// How deeply expressions may nest in defaults and arguments (`${a:-${b:-…}}`).
const MAX_DEPTH: usize = 32;

/// Parses `text` into its nodes, in order.
pub(super) fn parse(text: &str) -> Result<Vec<Node>, ExprError> {
    let mut parser = Parser {
        scanner: Scanner::new(text),
        expression_start: 0,
        depth: 0,
    };
    parser.parse_any()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Illegal,
    Eof,
    Ident,
    Lbrack,
    Rbrack,
}

/// What the scanner recognises (bits).
const SCAN_IDENT: u8 = 1;
const SCAN_LBRACK: u8 = 2;
const SCAN_RBRACK: u8 = 4;
const SCAN_ESCAPE: u8 = 8;

/// Which escapes apply (bits): `$$` for `$`; `\/` and `\\` for `/` and `\`.
const ESCAPE_DOLLAR: u8 = 1;
const ESCAPE_BACKSLASH: u8 = 2;

/// Whether a character is accepted at 1-based index `i` of the token being scanned.
type Accept = fn(char, usize) -> bool;

/// The end of the text, as Flux's scanner marks it (a NUL in the text reads as the end).
const EOF: char = '\0';

struct Scanner {
    buf: Vec<char>,
    /// Escape characters dropped from the text (Flux cuts them out of its buffer; marking
    /// them keeps a text of many `$$` linear).
    skipped: Vec<bool>,
    pos: usize,
    start: usize,
    /// The width of the last character read: 0 at the end, so that stepping back there
    /// stays there, as Flux's does.
    width: usize,
    mode: u8,
    escapes: u8,
    accept: Accept,
}

impl Scanner {
    fn new(text: &str) -> Scanner {
        let buf: Vec<char> = text.chars().collect();
        Scanner {
            skipped: vec![false; buf.len()],
            buf,
            pos: 0,
            start: 0,
            width: 0,
            mode: 0,
            escapes: 0,
            accept: accept_any,
        }
    }

    fn read(&mut self) -> char {
        match self.buf.get(self.pos) {
            None => {
                self.width = 0;
                EOF
            }
            Some(&c) => {
                self.width = 1;
                self.pos += 1;
                c
            }
        }
    }

    fn unread(&mut self) {
        self.pos -= self.width;
    }

    fn peek(&mut self) -> char {
        let c = self.read();
        self.unread();
        c
    }

    /// Drops the escape character just read and takes the one it escapes into the token.
    fn skip(&mut self) {
        self.skipped[self.pos - 1] = true;
        self.pos += 1;
    }

    fn text(&self) -> String {
        (self.start..self.pos)
            .filter(|&i| !self.skipped[i])
            .map(|i| self.buf[i])
            .collect()
    }

    fn scan(&mut self) -> Token {
        self.start = self.pos;
        let c = self.read();
        if c == EOF {
            Token::Eof
        } else if self.scan_lbrack(c) {
            Token::Lbrack
        } else if self.scan_rbrack(c) {
            Token::Rbrack
        } else if self.scan_ident(c) {
            Token::Ident
        } else {
            Token::Illegal
        }
    }

    fn scan_ident(&mut self, first: char) -> bool {
        if self.mode & SCAN_IDENT == 0 {
            return false;
        }
        if self.scan_escaped(first) {
            self.skip();
        } else if !(self.accept)(first, self.pos - self.start) {
            return false;
        }
        loop {
            let c = self.read();
            if c == EOF {
                self.unread();
                break;
            }
            if self.scan_lbrack(c) {
                // Back before the `${` that ends the token.
                self.unread();
                self.unread();
                break;
            }
            if self.scan_escaped(c) {
                self.skip();
                continue;
            }
            if !(self.accept)(c, self.pos - self.start) {
                self.unread();
                break;
            }
        }
        true
    }

    fn scan_lbrack(&mut self, c: char) -> bool {
        if self.mode & SCAN_LBRACK == 0 {
            return false;
        }
        if c == '$' {
            if self.read() == '{' {
                return true;
            }
            self.unread();
        }
        false
    }

    fn scan_rbrack(&self, c: char) -> bool {
        self.mode & SCAN_RBRACK != 0 && c == '}'
    }

    fn scan_escaped(&mut self, c: char) -> bool {
        if self.mode & SCAN_ESCAPE == 0 {
            return false;
        }
        if c == '$' && self.escapes & ESCAPE_DOLLAR != 0 && self.peek() == '$' {
            return true;
        }
        c == '\\' && self.escapes & ESCAPE_BACKSLASH != 0 && matches!(self.peek(), '/' | '\\')
    }
}

fn accept_any(_: char, _: usize) -> bool {
    true
}

/// A name's characters: Go's `unicode.IsLetter`, `unicode.IsDigit` or `_`.
fn accept_ident(c: char, _: usize) -> bool {
    c == '_' || go_std::is_letter(c) || go_std::is_digit(c)
}

fn accept_colons(c: char, _: usize) -> bool {
    c == ':'
}

fn accept_one_hash(c: char, i: usize) -> bool {
    c == '#' && i == 1
}

fn accept_not_closing(c: char, _: usize) -> bool {
    c != '}'
}

fn accept_hash_func(c: char, i: usize) -> bool {
    c == '#' && i < 3
}

fn accept_percent_func(c: char, i: usize) -> bool {
    c == '%' && i < 3
}

fn accept_default_func(c: char, i: usize) -> bool {
    (i == 1 && c == ':') || (i == 2 && matches!(c, '=' | '-' | '?' | '+'))
}

fn accept_replace_func(c: char, i: usize) -> bool {
    (i == 1 && c == '/') || (i == 2 && matches!(c, '/' | '#' | '%'))
}

fn accept_one_equal(c: char, i: usize) -> bool {
    i == 1 && c == '='
}

fn accept_one_colon(c: char, i: usize) -> bool {
    i == 1 && c == ':'
}

fn reject_colon_close(c: char, _: usize) -> bool {
    c != ':' && c != '}'
}

fn accept_slashes(c: char, _: usize) -> bool {
    c == '/'
}

fn accept_not_slash(c: char, _: usize) -> bool {
    c != '/'
}

fn accept_casing_func(c: char, i: usize) -> bool {
    matches!(c, ',' | '^') && i < 3
}

struct Parser {
    scanner: Scanner,
    /// Where the outermost expression being read starts (a character index), for errors.
    expression_start: usize,
    depth: usize,
}

impl Parser {
    fn set(&mut self, accept: Accept, mode: u8) {
        self.scanner.accept = accept;
        self.scanner.mode = mode;
    }

    fn error(&self, kind: fn(usize) -> ExprError) -> ExprError {
        kind(self.expression_start)
    }

    /// The text: literal runs (`$$` is `$`) and expressions, until the end.
    fn parse_any(&mut self) -> Result<Vec<Node>, ExprError> {
        let mut nodes = Vec::new();
        loop {
            self.set(accept_any, SCAN_IDENT | SCAN_LBRACK | SCAN_ESCAPE);
            self.scanner.escapes = ESCAPE_DOLLAR;
            match self.scanner.scan() {
                Token::Ident => nodes.push(Node::Text(self.scanner.text())),
                Token::Eof => return Ok(nodes),
                Token::Lbrack => {
                    self.expression_start = self.scanner.start;
                    nodes.push(self.parse_func()?);
                }
                _ => return Err(self.error(ExprError::Syntax)),
            }
        }
    }

    /// After `${`: a name, then the operation its next character starts.
    fn parse_func(&mut self) -> Result<Node, ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ExprError::TooDeep);
        }
        let node = self.parse_func_body();
        self.depth -= 1;
        node
    }

    fn parse_func_body(&mut self) -> Result<Node, ExprError> {
        self.scanner.escapes = ESCAPE_DOLLAR | ESCAPE_BACKSLASH;
        if self.scanner.peek() == '#' {
            return self.parse_len_func();
        }
        self.set(accept_ident, SCAN_IDENT);
        let param = match self.scanner.scan() {
            Token::Ident => self.scanner.text(),
            _ => return Err(self.error(ExprError::VariableName)),
        };
        match self.scanner.peek() {
            ':' => return self.parse_default_or_substr(param),
            '=' => return self.parse_default_func(param),
            ',' | '^' => return self.parse_casing_func(param),
            '/' => return self.parse_replace_func(param),
            '#' => return self.parse_remove_func(param, accept_hash_func),
            '%' => return self.parse_remove_func(param, accept_percent_func),
            _ => {}
        }
        self.set(accept_ident, SCAN_RBRACK);
        match self.scanner.scan() {
            Token::Rbrack => Ok(Node::Func {
                param,
                name: String::new(),
                args: Vec::new(),
            }),
            _ => Err(self.error(ExprError::Unterminated)),
        }
    }

    /// One argument of a function: literal text, or an expression.
    fn parse_param(&mut self, accept: Accept, mode: u8) -> Result<Node, ExprError> {
        self.set(accept, mode | SCAN_LBRACK);
        match self.scanner.scan() {
            Token::Lbrack => self.parse_func(),
            Token::Ident | Token::Rbrack => Ok(Node::Text(self.scanner.text())),
            _ => Err(self.error(ExprError::FunctionArgument)),
        }
    }

    /// The operator of a function (scanned by `accept`), or a bad substitution.
    fn operator(&mut self, accept: Accept) -> Result<String, ExprError> {
        self.set(accept, SCAN_IDENT);
        match self.scanner.scan() {
            Token::Ident => Ok(self.scanner.text()),
            _ => Err(self.error(ExprError::Syntax)),
        }
    }

    fn parse_default_or_substr(&mut self, param: String) -> Result<Node, ExprError> {
        self.scanner.read();
        let next = self.scanner.peek();
        self.scanner.unread();
        match next {
            '=' | '-' | '?' | '+' => self.parse_default_func(param),
            _ => self.parse_substr_func(param),
        }
    }

    /// `${param:offset}` and `${param:offset:length}`.
    fn parse_substr_func(&mut self, param: String) -> Result<Node, ExprError> {
        let name = self.operator(accept_one_colon)?;
        let mut args = vec![self.parse_param(reject_colon_close, SCAN_IDENT)?];
        self.set(accept_colons, SCAN_IDENT | SCAN_RBRACK);
        match self.scanner.scan() {
            Token::Rbrack => return Ok(Node::Func { param, name, args }),
            Token::Ident => {}
            _ => return Err(self.error(ExprError::Syntax)),
        }
        args.push(self.parse_param(accept_not_closing, SCAN_IDENT)?);
        self.consume_rbrack()?;
        Ok(Node::Func { param, name, args })
    }

    /// `${#param}`.
    fn parse_len_func(&mut self) -> Result<Node, ExprError> {
        let name = self.operator(accept_one_hash)?;
        let param = self.operator(accept_ident)?;
        self.consume_rbrack()?;
        Ok(Node::Func {
            param,
            name,
            args: Vec::new(),
        })
    }

    /// `${param=word}`, `${param:=word}`, `${param:-word}`, `${param:?word}`, `${param:+word}`.
    fn parse_default_func(&mut self, param: String) -> Result<Node, ExprError> {
        let accept = if self.scanner.peek() == '=' {
            accept_one_equal
        } else {
            accept_default_func
        };
        self.set(accept, SCAN_IDENT);
        let name = match self.scanner.scan() {
            Token::Ident => self.scanner.text(),
            _ => return Err(self.error(ExprError::DefaultFunction)),
        };
        let mut args = Vec::new();
        while self.scanner.peek() != '}' {
            args.push(self.parse_param(accept_not_closing, SCAN_IDENT)?);
        }
        self.consume_rbrack()?;
        Ok(Node::Func { param, name, args })
    }

    /// `${param,}`, `${param,,}`, `${param^}`, `${param^^}` (and their mixtures, which
    /// change nothing).
    fn parse_casing_func(&mut self, param: String) -> Result<Node, ExprError> {
        let name = self.operator(accept_casing_func)?;
        self.consume_rbrack()?;
        Ok(Node::Func {
            param,
            name,
            args: Vec::new(),
        })
    }

    /// `${param#word}`, `${param##word}`, `${param%word}`, `${param%%word}`.
    fn parse_remove_func(&mut self, param: String, accept: Accept) -> Result<Node, ExprError> {
        let name = self.operator(accept)?;
        let args = vec![self.parse_param(accept_not_closing, SCAN_IDENT)?];
        self.consume_rbrack()?;
        Ok(Node::Func { param, name, args })
    }

    /// `${param/pattern/string}`, `${param//pattern/string}`, `${param/#pattern/string}`,
    /// `${param/%pattern/string}`.
    fn parse_replace_func(&mut self, param: String) -> Result<Node, ExprError> {
        let name = self.operator(accept_replace_func)?;
        let mut args = vec![self.parse_param(accept_not_slash, SCAN_IDENT | SCAN_ESCAPE)?];
        self.operator(accept_slashes)?;
        if self.scanner.peek() != '}' {
            args.push(self.parse_param(accept_not_closing, SCAN_IDENT | SCAN_ESCAPE)?);
        }
        self.consume_rbrack()?;
        Ok(Node::Func { param, name, args })
    }

    fn consume_rbrack(&mut self) -> Result<(), ExprError> {
        self.scanner.mode = SCAN_RBRACK;
        match self.scanner.scan() {
            Token::Rbrack => Ok(()),
            _ => Err(self.error(ExprError::Syntax)),
        }
    }
}
