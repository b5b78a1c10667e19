//! The CEL environment Flux evaluates `healthCheckExprs`, `readyExpr` and a dependency's
//! `readyExpr` in (fluxcd/pkg `runtime/cel`): the standard library with cel-go's optional
//! types (`a.?b`, `a[?b]`, `[?a]`, `{?k: v}`, `optional.of/none/ofNonZeroValue`, `value`,
//! `hasValue`, `or`, `orValue`), `ext.Strings` (`charAt`, `indexOf`, `lastIndexOf`,
//! `lowerAscii`, `upperAscii`, `replace`, `split`, `substring`, `trim`, `join`, `reverse`,
//! `format`, `strings.quote`), `ext.Encoders` (`base64.encode`, `base64.decode`) and
//! `ext.Sets` (`sets.contains`, `sets.equivalent`, `sets.intersects`).
//!
//! The CEL crate brings the optional types, strings and encoders; here are the sets library
//! and what cel-go's optional library adds at its current version (2), which Flux gets:
//! `list.first()`, `list.last()`, `optional.unwrap(list)` and `list.unwrapOpt()`. The crate's
//! `indexOf`/`lastIndexOf` with an offset fail where cel-go v0.26 answers (an offset past the
//! end is `-1`, an empty substring is found at the offset given): those two calls are routed
//! to cel-go's semantics here.
//! One environment is built per process and shared: programs compile against it, so its
//! macros and optional syntax apply, and every evaluation context borrows it.

use std::sync::{Arc, LazyLock};

use cel::common::ast::{CallExpr, EntryExpr, Expr};
use cel::common::types::{
    CelBool, CelInt, CelList, CelOptional, CelString, INT_TYPE, LIST_TYPE, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::parser::Macro;
use cel::{Context, DeclarationError, Env, ExecutionError, IdedExpr, Program};

use super::cel_issues::CompileError;

type Library = fn(&mut Env) -> Result<(), DeclarationError>;

static ENVIRONMENT: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    let libraries: [Library; 5] = [
        cel::extensions::strings,
        cel::extensions::encoders,
        sets,
        optional_v2,
        offsets,
    ];
    for library in libraries {
        env.add_extension(library)
            .expect("Flux's CEL libraries declare disjoint overloads");
    }
    Arc::new(env)
});

/// The namespaces of the environment's functions (`optional.of`, `sets.contains`, …): a
/// call on one of these names calls a function rather than reading a variable.
const FUNCTION_NAMESPACES: [&str; 4] = ["optional", "strings", "base64", "sets"];

pub fn is_function_namespace(name: &str) -> bool {
    FUNCTION_NAMESPACES.contains(&name)
}

/// Compiles `expression` in Flux's environment; what does not parse fails in cel-go's words.
pub fn compile(expression: &str) -> Result<Program, CompileError> {
    ENVIRONMENT
        .compile(expression)
        .map_err(|errors| CompileError::parsing(expression, &errors))
}

/// An object's JSON as CEL sees it in Flux: Kubernetes decodes a JSON integer to an int64
/// (a float when it does not fit), so an integer field is a CEL `int`, never a `uint`.
pub fn json_value(value: &serde_json::Value) -> cel::Value {
    use serde_json::Value as Json;
    match value {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(int), _) => cel::Value::Int(int),
            (None, Some(float)) => cel::Value::Float(float),
            (None, None) => cel::Value::Null,
        },
        Json::String(s) => cel::Value::String(Arc::new(s.clone())),
        Json::Array(items) => cel::Value::List(Arc::new(items.iter().map(json_value).collect())),
        Json::Object(fields) => cel::Value::Map(cel::objects::Map {
            map: Arc::new(
                fields
                    .iter()
                    .map(|(k, v)| {
                        (
                            cel::objects::Key::String(Arc::new(k.clone())),
                            json_value(v),
                        )
                    })
                    .collect(),
            ),
        }),
    }
}

/// An evaluation context over Flux's environment, without variables yet.
pub fn context<'v>() -> Context<'static, 'v> {
    Context::with_env(Arc::clone(&ENVIRONMENT))
}

/// An evaluation error in cel-go's words where the crate words it otherwise, for the errors an
/// object's data causes (a missing key, a zero divisor, an overflow): they reach the Ready
/// condition and events, where Flux users match them.
pub fn describe(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        other => other.to_string(),
    }
}

/// An evaluation error of `program` in cel-go's words, in `context`, whose variables' JSON
/// values `variable` gives by name. cel-go reports the error of the operand it evaluated
/// first (the left one of `&&` and `||` when both fail, where the crate reports the right
/// one), and names an attribute it cannot resolve by its qualified name: a variable the
/// object lacks (`status` of an object without one: `no such attribute(s):
/// status.conditions`), or an intermediate field missing under `has()` (`has(data.foo.bar)`
/// on empty `data`: `no such attribute(s): data.foo.bar`); a key missing from a field read
/// outside `has()` stays `no such key: conditions`.
pub fn describe_for<'v>(
    program: &Program,
    context: &Context,
    variable: impl Fn(&str) -> Option<&'v serde_json::Value>,
    error: &ExecutionError,
) -> String {
    let blamed = blame(program.expression(), context);
    if let Some(message) = chain_of(blamed).and_then(|chain| chain.failure(variable)) {
        return message;
    }
    match cel::Value::resolve(blamed, context) {
        Err(own) => describe(&own),
        Ok(_) => describe(error),
    }
}

/// The operand whose error cel-go reports for `expression`, which fails in `context`: the
/// first failing operand of a call in evaluation order (the left of `&&` and `||` before the
/// right; a conditional's condition, then the branch it takes), else the expression itself.
fn blame<'e>(expression: &'e IdedExpr, context: &Context) -> &'e IdedExpr {
    let fails = |e: &IdedExpr| cel::Value::resolve(e, context).is_err();
    let next = match &expression.expr {
        Expr::Call(call) if call.func_name == "_?_:_" && call.args.len() == 3 => {
            match cel::Value::resolve(&call.args[0], context) {
                Err(_) => Some(&call.args[0]),
                Ok(value) => match value {
                    cel::Value::Bool(true) => Some(&call.args[1]),
                    cel::Value::Bool(false) => Some(&call.args[2]),
                    _ => None,
                },
            }
        }
        Expr::Call(call) => {
            let target = call
                .target
                .as_deref()
                .filter(|t| !matches!(&t.expr, Expr::Ident(n) if is_function_namespace(n)));
            target.into_iter().chain(&call.args).find(|e| fails(e))
        }
        Expr::Select(select) if chain_of(expression).is_none() => {
            Some(select.operand.as_ref()).filter(|e| fails(e))
        }
        Expr::Comprehension(comprehension) => Some(&comprehension.iter_range).filter(|e| fails(e)),
        Expr::List(list) => list.elements.iter().find(|e| fails(e)),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::MapEntry(pair) => [&pair.key, &pair.value].into_iter().find(|e| fails(e)),
            EntryExpr::StructField(field) => Some(&field.value).filter(|e| fails(e)),
        }),
        _ => None,
    };
    match next {
        Some(operand) => blame(operand, context),
        None => expression,
    }
}

/// A variable read through field selections: `status.conditions`, or under `has()`
/// (`has(data.foo.bar)`: `data.foo`, testing `bar`).
struct Chain<'e> {
    root: &'e str,
    fields: Vec<&'e str>,
    tested: Option<&'e str>,
}

impl Chain<'_> {
    fn qualified(&self) -> String {
        let mut name = self.root.to_string();
        for field in self.fields.iter().chain(&self.tested) {
            name.push('.');
            name.push_str(field);
        }
        name
    }

    /// cel-go's words for this chain failing over the variables `variable` gives: an
    /// attribute it cannot resolve, or a key missing outside `has()`; `None` when the chain
    /// does not fail so (a field of something other than a map).
    fn failure<'v>(
        &self,
        variable: impl Fn(&str) -> Option<&'v serde_json::Value>,
    ) -> Option<String> {
        let missing_attribute = || Some(format!("no such attribute(s): {}", self.qualified()));
        let Some(mut value) = variable(self.root) else {
            return missing_attribute();
        };
        for field in &self.fields {
            match value.as_object()?.get(*field) {
                Some(next) => value = next,
                None if self.tested.is_some() => return missing_attribute(),
                None => return Some(format!("no such key: {field}")),
            }
        }
        None
    }
}

/// The chain an expression spells, if it is one: an identifier, then field selections, the
/// last of which may be `has()`'s test.
fn chain_of(expression: &IdedExpr) -> Option<Chain<'_>> {
    let mut fields = Vec::new();
    let mut tested = None;
    let mut node = expression;
    loop {
        match &node.expr {
            Expr::Ident(root) => {
                fields.reverse();
                return Some(Chain {
                    root,
                    fields,
                    tested,
                });
            }
            Expr::Select(select) => {
                if select.test {
                    if tested.is_some() || !fields.is_empty() {
                        return None;
                    }
                    tested = Some(select.field.as_str());
                } else {
                    fields.push(select.field.as_str());
                }
                node = &select.operand;
            }
            _ => return None,
        }
    }
}

/// cel-go's `ext.Sets()`: lists taken as sets, compared with CEL's equality (so `1`, `1u`
/// and `1.0` are one element).
fn sets(env: &mut Env) -> Result<(), DeclarationError> {
    let both_lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        both_lists(),
        |args| set_verdict(args, |a, b| is_subset(b, a)),
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        both_lists(),
        |args| set_verdict(args, |a, b| is_subset(a, b) && is_subset(b, a)),
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        both_lists(),
        |args| set_verdict(args, |a, b| a.iter().any(|item| contains(b, *item))),
    )?;
    Ok(())
}

/// The functions cel-go's optional library gained at version 2.
fn optional_v2(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("first", "list_first", LIST_TYPE, vec![], |args| {
        end_of_list(args, |items| items.first().copied())
    })?;
    env.add_member_overload("last", "list_last", LIST_TYPE, vec![], |args| {
        end_of_list(args, |items| items.last().copied())
    })?;
    env.add_overload(
        "optional.unwrap",
        "optional_unwrap",
        vec![LIST_TYPE],
        unwrap,
    )?;
    env.add_member_overload("unwrapOpt", "optional_unwrapOpt", LIST_TYPE, vec![], unwrap)?;
    Ok(())
}

/// What `s.indexOf(t, n)` and `s.lastIndexOf(t, n)` call: macros rewrite those calls at
/// compile time, so the names say where an error comes from.
const INDEX_OF_FROM: &str = "indexOf(offset)";
const LAST_INDEX_OF_FROM: &str = "lastIndexOf(offset)";

/// The name a call was written with: `indexOf` and `lastIndexOf` for the calls routed above.
pub fn written_name(function: &str) -> &str {
    match function {
        INDEX_OF_FROM => "indexOf",
        LAST_INDEX_OF_FROM => "lastIndexOf",
        other => other,
    }
}

fn offsets(env: &mut Env) -> Result<(), DeclarationError> {
    for (function, routed) in [
        ("indexOf", INDEX_OF_FROM),
        ("lastIndexOf", LAST_INDEX_OF_FROM),
    ] {
        env.add_macro(Macro::receiver(function, 2, move |helper, target, args| {
            let call = CallExpr {
                func_name: routed.to_owned(),
                target: target.take().map(Box::new),
                args: std::mem::take(args),
            };
            Ok(Some(helper.next_expr(Expr::Call(call))))
        }))?;
    }
    let string_int = || vec![STRING_TYPE, INT_TYPE];
    env.add_member_overload(
        INDEX_OF_FROM,
        "string_index_of_string_int",
        STRING_TYPE,
        string_int(),
        |args| search_from(args, INDEX_OF_FROM, false),
    )?;
    env.add_member_overload(
        LAST_INDEX_OF_FROM,
        "string_last_index_of_string_int",
        STRING_TYPE,
        string_int(),
        |args| search_from(args, LAST_INDEX_OF_FROM, true),
    )
}

/// cel-go v0.26's `indexOfOffset` and `lastIndexOfOffset`, in code points.
fn search_from<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    backwards: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [text, needle, offset]: [CowVal<'b, 'v>; 3] = args
        .try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(3, args.len()))?;
    let (Some(text), Some(needle), Some(offset)) = (
        text.downcast_ref::<CelString>(),
        needle.downcast_ref::<CelString>(),
        offset.downcast_ref::<CelInt>(),
    ) else {
        return Err(ExecutionError::function_error(function, "no such overload"));
    };
    let offset = **offset;
    let found = |index: i64| Ok(CowVal::owned(CelInt::from(index)));
    if needle.is_empty() {
        return found(offset);
    }
    if offset < 0 {
        let message = format!("index out of range: {offset}");
        return Err(ExecutionError::function_error(function, message));
    }
    let text: Vec<char> = text.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    let Ok(start) = usize::try_from(offset) else {
        return found(-1);
    };
    if start >= text.len() || needle.len() > text.len() {
        return found(-1);
    }
    let matches_at = |at: &usize| text[*at..].starts_with(&needle);
    let position = if backwards {
        (0..=start.min(text.len() - needle.len()))
            .rev()
            .find(matches_at)
    } else {
        (start..=text.len() - needle.len()).find(matches_at)
    };
    found(position.map_or(-1, |at| at as i64))
}

fn only_argument<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list]: [CowVal<'b, 'v>; 1] = args
        .try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(1, args.len()))?;
    Ok(list)
}

/// `optional.of` the element `pick` chooses, `optional.none()` without one.
fn end_of_list<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    pick: for<'e> fn(&Elements<'e, 'v>) -> Option<&'e (dyn Val + 'v)>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = only_argument(args)?;
    let items = elements(list.as_ref())?;
    let picked = pick(&items).map(|item| item.clone_as_boxed());
    Ok(CowVal::owned(CelOptional::from(picked)))
}

/// The values of a list of optionals, the empty ones left out.
fn unwrap<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = only_argument(args)?;
    let mut values = Vec::new();
    for item in elements(list.as_ref())? {
        let optional =
            item.downcast_ref::<CelOptional>()
                .ok_or_else(|| ExecutionError::UnexpectedType {
                    got: item.get_type().name().to_owned(),
                    want: "optional_type".to_owned(),
                })?;
        values.extend(optional.inner().map(|value| value.clone_as_boxed()));
    }
    Ok(CowVal::owned(CelList::from(values)))
}

type Elements<'b, 'v> = Vec<&'b (dyn Val + 'v)>;

fn set_verdict<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    verdict: impl Fn(&Elements<'_, 'v>, &Elements<'_, 'v>) -> bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [a, b]: [CowVal<'b, 'v>; 2] = args
        .try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(2, args.len()))?;
    let holds = verdict(&elements(a.as_ref())?, &elements(b.as_ref())?);
    Ok(CowVal::owned(CelBool::from(holds)))
}

fn elements<'b, 'v>(list: &'b (dyn Val + 'v)) -> Result<Elements<'b, 'v>, ExecutionError> {
    let iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: list.get_type().name().to_owned(),
            want: "list".to_owned(),
        })?;
    let mut items = iterable.iter();
    let mut found = Vec::new();
    while let Some(item) = items.next() {
        found.push(item);
    }
    Ok(found)
}

fn contains(items: &Elements<'_, '_>, wanted: &dyn Val) -> bool {
    items.iter().any(|item| item.equals(wanted))
}

fn is_subset(items: &Elements<'_, '_>, of: &Elements<'_, '_>) -> bool {
    items.iter().all(|item| contains(of, *item))
}

#[cfg(test)]
#[path = "cel_ext_tests.rs"]
mod tests;
