//! The CEL environment Flux evaluates `healthCheckExprs` and `readyExpr` in (fluxcd/pkg
//! `runtime/cel`): the standard library plus cel-go's extension libraries Flux enables —
//! `ext.Strings` (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`,
//! `split`, `substring`, `trim`, `join`, `reverse`, `strings.quote`), `ext.Encoders`
//! (`base64.encode`, `base64.decode`) and `ext.Sets` (`sets.contains`, `sets.equivalent`,
//! `sets.intersects`) — with cel-go's (v0.26) semantics and error words. Indexes count code
//! points, as cel-go's do.
//!
//! Not here: cel-go's optional types (`?.`, `[?…]`, `optional.of`), which need parser
//! support the CEL crate does not have, and `format`. An expression using them fails to
//! compile or evaluate, naming what is missing.
//!
//! The namespaced functions (`base64.encode(…)`) reach the crate as methods on the namespace
//! identifier, so each namespace is a variable holding a marker the functions recognise.

use std::sync::Arc;

use base64::Engine as _;
use cel::objects::Value;
use cel::{Context, ExecutionError, FunctionContext};

type Result<T> = std::result::Result<T, ExecutionError>;

const NAMESPACES: [&str; 3] = ["strings", "base64", "sets"];

fn marker(namespace: &str) -> Value {
    Value::String(Arc::new(format!("\u{0}cel-namespace:{namespace}")))
}

fn is_namespace(value: Option<&Value>, namespace: &str) -> bool {
    value.is_some_and(|v| *v == marker(namespace))
}

/// A context with the standard library and Flux's extensions.
pub fn context<'a>() -> Context<'a> {
    let mut context = Context::default();
    for namespace in NAMESPACES {
        context.add_variable_from_value(namespace, marker(namespace));
    }
    context.add_function("charAt", char_at);
    context.add_function("indexOf", index_of);
    context.add_function("lastIndexOf", last_index_of);
    context.add_function("lowerAscii", |ftx: &FunctionContext| {
        map_ascii(ftx, |c| c.to_ascii_lowercase())
    });
    context.add_function("upperAscii", |ftx: &FunctionContext| {
        map_ascii(ftx, |c| c.to_ascii_uppercase())
    });
    context.add_function("replace", replace);
    context.add_function("split", split);
    context.add_function("substring", substring);
    context.add_function("trim", |ftx: &FunctionContext| {
        let (this, _) = string_call(ftx, 0)?;
        Ok(string(this.trim()))
    });
    context.add_function("reverse", |ftx: &FunctionContext| {
        let (this, _) = string_call(ftx, 0)?;
        Ok(string(&this.chars().rev().collect::<String>()))
    });
    context.add_function("join", join);
    context.add_function("quote", quote);
    context.add_function("encode", encode);
    context.add_function("decode", decode);
    context.add_function("contains", contains);
    context.add_function("equivalent", |ftx: &FunctionContext| {
        let (a, b) = set_arguments(ftx, "equivalent")?;
        Ok(Value::Bool(subset(&a, &b) && subset(&b, &a)))
    });
    context.add_function("intersects", |ftx: &FunctionContext| {
        let (a, b) = set_arguments(ftx, "intersects")?;
        Ok(Value::Bool(a.iter().any(|item| b.contains(item))))
    });
    context
}

fn string(text: &str) -> Value {
    Value::String(Arc::new(text.to_string()))
}

fn out_of_range(index: i64) -> ExecutionError {
    ExecutionError::FunctionError {
        function: String::new(),
        message: format!("index out of range: {index}"),
    }
}

/// The arguments of a call, resolved.
fn arguments(ftx: &FunctionContext) -> Result<Vec<Value>> {
    ftx.args.iter().map(|arg| ftx.ptx.resolve(arg)).collect()
}

/// A method call on a string with `count` arguments (cel-go: "no such overload" otherwise).
fn string_call(ftx: &FunctionContext, count: usize) -> Result<(Arc<String>, Vec<Value>)> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    if args.len() != count {
        return Err(ExecutionError::NoSuchOverload);
    }
    Ok((this.clone(), args))
}

fn as_str(value: &Value) -> Result<&str> {
    match value {
        Value::String(text) => Ok(text.as_str()),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn as_int(value: &Value) -> Result<i64> {
    match value {
        Value::Int(n) => Ok(*n),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn char_at(ftx: &FunctionContext) -> Result<Value> {
    let (this, args) = string_call(ftx, 1)?;
    let index = as_int(&args[0])?;
    let chars: Vec<char> = this.chars().collect();
    match usize::try_from(index) {
        Ok(i) if i < chars.len() => Ok(string(&chars[i].to_string())),
        Ok(i) if i == chars.len() => Ok(string("")),
        _ => Err(out_of_range(index)),
    }
}

/// Where `needle` starts in `haystack` at or after `from`, in code points.
fn find_from(haystack: &[char], needle: &[char], from: usize) -> Option<usize> {
    (from..=haystack.len().checked_sub(needle.len())?)
        .find(|&i| haystack[i..i + needle.len()] == *needle)
}

fn index_of(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let (needle, offset) = match args.as_slice() {
        [needle] => (as_str(needle)?, 0),
        [needle, offset] => (as_str(needle)?, as_int(offset)?),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    if needle.is_empty() {
        return Ok(Value::Int(offset));
    }
    if offset < 0 {
        return Err(out_of_range(offset));
    }
    let haystack: Vec<char> = this.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    let from = usize::try_from(offset).unwrap_or(usize::MAX);
    if from >= haystack.len() {
        return Ok(Value::Int(-1));
    }
    Ok(Value::Int(
        find_from(&haystack, &needle, from).map_or(-1, |i| i as i64),
    ))
}

fn last_index_of(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let haystack: Vec<char> = this.chars().collect();
    let (needle, offset) = match args.as_slice() {
        [needle] => {
            let needle = as_str(needle)?;
            if needle.is_empty() {
                return Ok(Value::Int(haystack.len() as i64));
            }
            if this.len() < needle.len() {
                return Ok(Value::Int(-1));
            }
            (needle, haystack.len() as i64 - 1)
        }
        [needle, offset] => (as_str(needle)?, as_int(offset)?),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    if needle.is_empty() {
        return Ok(Value::Int(offset));
    }
    if offset < 0 {
        return Err(out_of_range(offset));
    }
    let needle: Vec<char> = needle.chars().collect();
    let Ok(mut from) = usize::try_from(offset) else {
        return Ok(Value::Int(-1));
    };
    if from >= haystack.len() {
        return Ok(Value::Int(-1));
    }
    let Some(last_start) = haystack.len().checked_sub(needle.len()) else {
        return Ok(Value::Int(-1));
    };
    from = from.min(last_start);
    Ok(Value::Int(
        (0..=from)
            .rev()
            .find(|&i| haystack[i..i + needle.len()] == *needle)
            .map_or(-1, |i| i as i64),
    ))
}

fn map_ascii(ftx: &FunctionContext, change: fn(&char) -> char) -> Result<Value> {
    let (this, _) = string_call(ftx, 0)?;
    Ok(string(
        &this.chars().map(|c| change(&c)).collect::<String>(),
    ))
}

fn replace(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let (old, new, limit) = match args.as_slice() {
        [old, new] => (as_str(old)?, as_str(new)?, -1),
        [old, new, limit] => (as_str(old)?, as_str(new)?, as_int(limit)?),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    Ok(string(&match usize::try_from(limit) {
        Ok(limit) => this.replacen(old, new, limit),
        Err(_) => this.replace(old, new),
    }))
}

fn split(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let (separator, limit) = match args.as_slice() {
        [separator] => (as_str(separator)?, -1),
        [separator, limit] => (as_str(separator)?, as_int(limit)?),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    // Go's strings.SplitN: 0 parts for 0, all for a negative limit, and an empty separator
    // splits between code points.
    let parts: Vec<String> = if limit == 0 {
        Vec::new()
    } else if separator.is_empty() {
        let chars: Vec<String> = this.chars().map(String::from).collect();
        match usize::try_from(limit) {
            Ok(limit) if limit < chars.len() && limit > 0 => {
                let mut parts = chars[..limit - 1].to_vec();
                parts.push(chars[limit - 1..].concat());
                parts
            }
            _ => chars,
        }
    } else {
        match usize::try_from(limit) {
            Ok(limit) => this.splitn(limit, separator).map(String::from).collect(),
            Err(_) => this.split(separator).map(String::from).collect(),
        }
    };
    Ok(Value::List(Arc::new(
        parts.iter().map(|p| string(p)).collect(),
    )))
}

fn substring(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::String(this)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let chars: Vec<char> = this.chars().collect();
    let length = chars.len() as i64;
    let (start, end) = match args.as_slice() {
        [start] => (as_int(start)?, length),
        [start, end] => {
            let (start, end) = (as_int(start)?, as_int(end)?);
            if start > end {
                return Err(ExecutionError::FunctionError {
                    function: String::new(),
                    message: format!("invalid substring range. start: {start}, end: {end}"),
                });
            }
            (start, end)
        }
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    for bound in [start, end] {
        if !(0..=length).contains(&bound) {
            return Err(out_of_range(bound));
        }
    }
    Ok(string(
        &chars[start as usize..end as usize]
            .iter()
            .collect::<String>(),
    ))
}

fn join(ftx: &FunctionContext) -> Result<Value> {
    let Some(Value::List(items)) = &ftx.this else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let args = arguments(ftx)?;
    let separator = match args.as_slice() {
        [] => "",
        [separator] => as_str(separator)?,
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    let mut parts = Vec::with_capacity(items.len());
    for item in items.iter() {
        match item {
            Value::String(text) => parts.push(text.as_str()),
            other => {
                return Err(ExecutionError::FunctionError {
                    function: "join".into(),
                    message: format!("join: invalid input: {other:?}"),
                });
            }
        }
    }
    Ok(string(&parts.join(separator)))
}

/// `strings.quote`: the string in double quotes with CEL's escapes.
fn quote(ftx: &FunctionContext) -> Result<Value> {
    if !is_namespace(ftx.this.as_ref(), "strings") {
        return Err(ExecutionError::NoSuchOverload);
    }
    let args = arguments(ftx)?;
    let [Value::String(text)] = args.as_slice() else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{b}' => quoted.push_str("\\v"),
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    Ok(string(&quoted))
}

fn encode(ftx: &FunctionContext) -> Result<Value> {
    if !is_namespace(ftx.this.as_ref(), "base64") {
        return Err(ExecutionError::NoSuchOverload);
    }
    match arguments(ftx)?.as_slice() {
        [Value::Bytes(bytes)] => Ok(string(
            &base64::engine::general_purpose::STANDARD.encode(bytes.as_slice()),
        )),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn decode(ftx: &FunctionContext) -> Result<Value> {
    if !is_namespace(ftx.this.as_ref(), "base64") {
        return Err(ExecutionError::NoSuchOverload);
    }
    let args = arguments(ftx)?;
    let [Value::String(text)] = args.as_slice() else {
        return Err(ExecutionError::NoSuchOverload);
    };
    // As cel-go: padded first, then without padding.
    base64::engine::general_purpose::STANDARD
        .decode(text.as_bytes())
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text.as_bytes()))
        .map(|bytes| Value::Bytes(Arc::new(bytes)))
        .map_err(|error| ExecutionError::FunctionError {
            function: "base64.decode".into(),
            message: error.to_string(),
        })
}

/// `sets.contains(list, sublist)`, else the standard `contains`.
fn contains(ftx: &FunctionContext) -> Result<Value> {
    if is_namespace(ftx.this.as_ref(), "sets") {
        let (a, b) = set_arguments(ftx, "contains")?;
        return Ok(Value::Bool(subset(&b, &a)));
    }
    let this = ftx
        .this
        .clone()
        .ok_or(ExecutionError::MissingArgumentOrTarget)?;
    let args = arguments(ftx)?;
    let [arg] = args.as_slice() else {
        return Err(ExecutionError::InvalidArgumentCount {
            expected: 1,
            actual: args.len(),
        });
    };
    cel::functions::contains(cel::extractors::This(this), arg.clone())
}

/// A CEL list, as the crate holds it.
type List = Arc<Vec<Value>>;

fn set_arguments(ftx: &FunctionContext, name: &str) -> Result<(List, List)> {
    if !is_namespace(ftx.this.as_ref(), "sets") {
        return Err(ExecutionError::UndeclaredReference(Arc::new(
            name.to_string(),
        )));
    }
    match arguments(ftx)?.as_slice() {
        [Value::List(a), Value::List(b)] => Ok((a.clone(), b.clone())),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn subset(items: &[Value], of: &[Value]) -> bool {
    items.iter().all(|item| of.contains(item))
}

#[cfg(test)]
#[path = "cel_ext_tests.rs"]
mod tests;
