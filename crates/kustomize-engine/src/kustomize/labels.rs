//! Kubernetes label selectors (`a=b,c!=d,e in (f,g),!h,i,j>3`) as k8s.io/apimachinery's
//! `labels.Parse` reads them: its lexer (whitespace, the special symbols `=!(),<>` read
//! greedily into operators, identifiers and the keywords `in`/`notin`), its parser (what may
//! follow what, and its words when something else does) and its validation of keys (qualified
//! names) and values (label values). kustomize selects by it, Flux's drift-ignore targets and
//! watch selectors parse with it, so a selector one refuses the other must refuse, in the same
//! words.

use std::borrow::Cow;

/// A selector's operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl Operator {
    /// The operator as Kubernetes names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

/// One requirement: a key, an operator and its values (sorted, without repeats).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether a label map (read through `get`) satisfies it.
    pub fn matches<'v>(&self, get: &impl Fn(&str) -> Option<Cow<'v, str>>) -> bool {
        let value = get(&self.key);
        let value = value.as_deref();
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        let number = |v: &str| v.parse::<i64>().ok();
        let bound = self.values.first().and_then(|v| number(v));
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(listed),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !listed(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan => {
                matches!((value.and_then(number), bound), (Some(v), Some(b)) if v > b)
            }
            Operator::LessThan => {
                matches!((value.and_then(number), bound), (Some(v), Some(b)) if v < b)
            }
        }
    }
}

/// Parses a selector; the error is Kubernetes' message.
pub fn parse(text: &str) -> Result<Vec<Requirement>, String> {
    let tokens = lex(text);
    let mut parser = Parser {
        tokens: &tokens,
        position: 0,
    };
    parser.parse()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(text: &str) -> Option<Token> {
    Some(match text {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Every token of `text`, the end included (a NUL byte ends it too, as in Kubernetes).
fn lex(text: &str) -> Vec<(Token, String)> {
    let bytes = text.as_bytes();
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while is_whitespace(at(i)) {
            i += 1;
        }
        let first = at(i);
        if first == 0 {
            tokens.push((Token::EndOfString, String::new()));
            return tokens;
        }
        let start = i;
        if is_special(first) {
            // The longest run of symbols that is an operator (every single one is).
            let mut end = i;
            let mut found = None;
            while is_special(at(end)) {
                match keyword(&text[start..end + 1]) {
                    Some(token) => found = Some((token, end + 1)),
                    None if found.is_some() => break,
                    None => {}
                }
                end += 1;
            }
            let (token, end) = found.expect("a single symbol is an operator");
            tokens.push((token, text[start..end].to_string()));
            i = end;
        } else {
            while !matches!(at(i), 0) && !is_special(at(i)) && !is_whitespace(at(i)) {
                i += 1;
            }
            let word = &text[start..i];
            let token = keyword(word).unwrap_or(Token::Identifier);
            tokens.push((token, word.to_string()));
        }
        // Kubernetes' lexer reads a NUL byte right after a token as its end and steps over
        // it (only one where a token starts ends the selector).
        if bytes.get(i) == Some(&0) {
            i += 1;
        }
    }
}

struct Parser<'t> {
    tokens: &'t [(Token, String)],
    position: usize,
}

impl Parser<'_> {
    /// The next token; where a value may stand, `in` and `notin` are identifiers.
    fn lookahead(&self, values: bool) -> (Token, &str) {
        let (token, literal) = &self.tokens[self.position];
        let token = match token {
            Token::In | Token::NotIn if values => Token::Identifier,
            other => *other,
        };
        (token, literal)
    }

    fn consume(&mut self, values: bool) -> (Token, String) {
        let (token, literal) = self.lookahead(values);
        let literal = literal.to_string();
        self.position = (self.position + 1).min(self.tokens.len() - 1);
        (token, literal)
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(true);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .requirement()
                        .map_err(|error| format!("unable to parse requirement: {error}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(true);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(true);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.key_and_inferred_operator()?;
        let (operator, values) = match operator {
            Some(operator) => (operator, Vec::new()),
            None => {
                let operator = self.operator()?;
                let values = match operator {
                    Operator::In | Operator::NotIn => self.values()?,
                    _ => self.exact_value()?,
                };
                (operator, values)
            }
        };
        new_requirement(key, operator, values)
    }

    /// The key, and its operator when the key alone (or `!key`) makes the requirement.
    fn key_and_inferred_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(true);
        let mut operator = None;
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(true);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        if let Some(error) = key_error(&literal) {
            return Err(invalid("<nil>", &literal, &error));
        }
        let (next, _) = self.lookahead(true);
        if operator.is_none() && matches!(next, Token::EndOfString | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(false);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `(a,b)`; `()` is the empty value.
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(true);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(true);
        let literal = literal.to_string();
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.identifiers()?;
                if self.consume(true).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(true);
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    /// The values of a set, up to its `)`; an empty place between commas is the empty value.
    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut values = std::collections::BTreeSet::new();
        loop {
            let (token, literal) = self.consume(true);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, literal) = self.lookahead(true);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values.into_iter().collect()),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(true).0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values.into_iter().collect());
                        }
                        Token::Comma => {
                            self.consume(true);
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// The one value after `=`, `==`, `!=`, `>` or `<` (none: the empty value).
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (next, _) = self.lookahead(true);
        if matches!(next, Token::EndOfString | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(true);
        if token == Token::Identifier {
            return Ok(vec![literal]);
        }
        Err(format!("found '{literal}', expected: identifier"))
    }
}

/// Kubernetes' `NewRequirement`: the operator's rules for its values, and each value a label
/// value; every error at once.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, String> {
    let mut errors = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                errors.push(invalid(
                    &format!("values[{i}]"),
                    value,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        if let Some(error) = value_error(value) {
            errors.push(invalid(&format!("values[{i}][{key}]"), value, &error));
        }
    }
    match errors.len() {
        0 => Ok(Requirement {
            key,
            operator,
            values,
        }),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// `field.Invalid(...).Error()`.
fn invalid(field: &str, value: &str, detail: &str) -> String {
    format!("{field}: Invalid value: {}: {detail}", go_std::quote(value))
}

const NAME_MESSAGE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const NAME_FORMAT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FORMAT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Kubernetes' `RegexError`.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        examples.join(" or ")
    )
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
fn is_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
fn is_subdomain(text: &str) -> bool {
    text.split('.').all(|label| {
        let bytes = label.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(edge)
            && bytes.last().is_some_and(edge)
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
    })
}

/// Kubernetes' `IsQualifiedName`, its errors joined as `validateLabelKey` joins them.
fn key_error(key: &str) -> Option<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errors.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_subdomain(prefix) {
                    errors.push(format!(
                        "prefix part {}",
                        regex_error(SUBDOMAIN_MESSAGE, SUBDOMAIN_FORMAT, &["example.com"])
                    ));
                }
            }
            *name
        }
        _ => {
            return Some(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(NAME_MESSAGE, NAME_FORMAT, &["MyName", "my.name", "123-abc"])
            ));
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_string());
    }
    if !is_name(name) {
        errors.push(format!(
            "name part {}",
            regex_error(NAME_MESSAGE, NAME_FORMAT, &["MyName", "my.name", "123-abc"])
        ));
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// Kubernetes' `IsValidLabelValue`.
fn value_error(value: &str) -> Option<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_name(value) {
        errors.push(regex_error(
            VALUE_MESSAGE,
            &format!("({NAME_FORMAT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    (!errors.is_empty()).then(|| errors.join("; "))
}
