//! The type cel-go's checker gives an expression in Flux's environment, as far as it can be
//! told for sure. Flux compiles a dependency's `readyExpr` (fluxcd/pkg runtime/cel
//! `WithCompile`, `WithOutputType(bool)`, `self` and `dep` declared as
//! `google.protobuf.Struct`, which the checker reads as `map(string, dyn)`) and refuses one
//! whose output type is not exactly `bool`: `dep.status.ready` is `dyn`, so only
//! `dep.status.ready == true` passes. [`output_type`] answers `None` wherever cel-go's answer
//! is not certain from these rules, so nothing cel-go accepts is refused for its type; its
//! answers are cel-go's own (`tests/fixtures/go/cel-output-types.json`).

use std::fmt;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};

/// A CEL type, named as cel-go names it in its messages.
#[derive(Clone, Debug, PartialEq)]
pub enum CelType {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Dyn,
    Duration,
    Timestamp,
    List(Box<CelType>),
    Map(Box<CelType>, Box<CelType>),
    Optional(Box<CelType>),
}

impl CelType {
    /// A `google.protobuf.Struct` variable (Flux's `WithStructVariables`), as the checker
    /// reads it.
    pub fn structure() -> CelType {
        CelType::Map(Box::new(CelType::String), Box::new(CelType::Dyn))
    }
}

impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CelType::Bool => f.write_str("bool"),
            CelType::Int => f.write_str("int"),
            CelType::Uint => f.write_str("uint"),
            CelType::Double => f.write_str("double"),
            CelType::String => f.write_str("string"),
            CelType::Bytes => f.write_str("bytes"),
            CelType::Null => f.write_str("null_type"),
            CelType::Dyn => f.write_str("dyn"),
            CelType::Duration => f.write_str("google.protobuf.Duration"),
            CelType::Timestamp => f.write_str("google.protobuf.Timestamp"),
            CelType::List(element) => write!(f, "list({element})"),
            CelType::Map(key, value) => write!(f, "map({key}, {value})"),
            CelType::Optional(value) => write!(f, "optional_type({value})"),
        }
    }
}

impl CelType {
    /// The type as cel-go's overload errors name it (`FormatCELType`: `null`, `timestamp`,
    /// `duration` where the output type says `null_type` and the protobuf names).
    pub(crate) fn overload_name(&self) -> String {
        match self {
            CelType::Null => "null".into(),
            CelType::Duration => "duration".into(),
            CelType::Timestamp => "timestamp".into(),
            CelType::List(element) => format!("list({})", element.overload_name()),
            CelType::Map(key, value) => {
                format!("map({}, {})", key.overload_name(), value.overload_name())
            }
            CelType::Optional(value) => format!("optional_type({})", value.overload_name()),
            other => other.to_string(),
        }
    }
}

/// The variables in scope, innermost last; a macro's variable of unknown type is `None`.
type Scope = Vec<(String, Option<CelType>)>;

/// The output type cel-go's checker gives `expression` with `variables` declared, when it
/// is certain; `None` when it is not (or when cel-go would refuse the expression otherwise).
pub fn output_type(expression: &IdedExpr, variables: &[(&str, CelType)]) -> Option<CelType> {
    check(expression, variables).0
}

/// The output type (as [`output_type`]) and the checker's errors cel-go would report, each
/// with the node it is about: an operator no overload of which takes its operands' types, a
/// list or map literal whose elements differ in type.
pub fn check(
    expression: &IdedExpr,
    variables: &[(&str, CelType)],
) -> (Option<CelType>, Vec<(u64, String)>) {
    let mut cx = Checker {
        scope: variables
            .iter()
            .map(|(name, t)| (name.to_string(), Some(t.clone())))
            .collect(),
        errors: Vec::new(),
        types: std::collections::HashMap::new(),
    };
    let output = type_of(expression, &mut cx);
    (output, cx.errors)
}

/// What a walk knows: the variables in scope, the errors found so far, and the type of
/// each node walked (a `map`'s element, walked in its step, is not walked again for its type).
struct Checker {
    scope: Scope,
    errors: Vec<(u64, String)>,
    types: std::collections::HashMap<u64, Option<CelType>>,
}

fn type_of(expression: &IdedExpr, cx: &mut Checker) -> Option<CelType> {
    let walked = node_type(expression, cx);
    cx.types.insert(expression.id, walked.clone());
    walked
}

fn node_type(expression: &IdedExpr, cx: &mut Checker) -> Option<CelType> {
    match &expression.expr {
        Expr::Literal(literal) => Some(literal_type(literal)),
        Expr::Ident(name) => lookup(&cx.scope, name),
        Expr::Select(select) if select.test => Some(CelType::Bool),
        Expr::Select(select) => {
            let operand = type_of(&select.operand, cx)?;
            member(operand, field_of)
        }
        Expr::Call(call) => call_type(call, expression.id, cx),
        Expr::List(list) => {
            let types: Vec<Option<CelType>> =
                list.elements.iter().map(|e| type_of(e, cx)).collect();
            let ids: Vec<u64> = list.elements.iter().map(|e| e.id).collect();
            let homogeneous = homogeneous(&types, &ids, cx);
            if !list.optional_indices.is_empty() || !homogeneous {
                return None;
            }
            let types: Option<Vec<CelType>> = types.into_iter().collect();
            Some(CelType::List(Box::new(common(types?)?)))
        }
        Expr::Map(map) => {
            let mut keys = Vec::new();
            let mut values = Vec::new();
            let mut optional = false;
            for entry in &map.entries {
                let EntryExpr::MapEntry(entry) = &entry.expr else {
                    return None;
                };
                optional |= entry.optional;
                keys.push((type_of(&entry.key, cx), entry.key.id));
                values.push((type_of(&entry.value, cx), entry.value.id));
            }
            let (key_types, key_ids): (Vec<_>, Vec<_>) = keys.into_iter().unzip();
            let (value_types, value_ids): (Vec<_>, Vec<_>) = values.into_iter().unzip();
            let homogeneous =
                homogeneous(&key_types, &key_ids, cx) & homogeneous(&value_types, &value_ids, cx);
            if optional || !homogeneous {
                return None;
            }
            let keys: Option<Vec<CelType>> = key_types.into_iter().collect();
            let values: Option<Vec<CelType>> = value_types.into_iter().collect();
            Some(CelType::Map(
                Box::new(common(keys?)?),
                Box::new(common(values?)?),
            ))
        }
        Expr::Comprehension(comprehension) => comprehension_type(comprehension, cx),
        Expr::Struct(_) | Expr::Unspecified => None,
    }
}

/// HomogeneousAggregateLiterals, as Flux's environment has it: a literal's elements (or keys,
/// or values) of one type — the first's, or `dyn` from the first `dyn` on — each other
/// reported at its node.
fn homogeneous(types: &[Option<CelType>], ids: &[u64], cx: &mut Checker) -> bool {
    let mut joined: Option<CelType> = None;
    let mut homogeneous = true;
    for (found, id) in types.iter().zip(ids) {
        let Some(found) = found else { continue };
        match &joined {
            None => joined = Some(found.clone()),
            // Once an element is `dyn`, any other joins it.
            Some(CelType::Dyn) => {}
            Some(_) if *found == CelType::Dyn => joined = Some(CelType::Dyn),
            Some(expected) if !unifies(expected, found) => {
                cx.errors.push((
                    *id,
                    format!(
                        "expected type '{}' but found '{}'",
                        expected.overload_name(),
                        found.overload_name()
                    ),
                ));
                homogeneous = false;
            }
            Some(_) => {}
        }
    }
    homogeneous
}

fn lookup(scope: &Scope, name: &str) -> Option<CelType> {
    scope
        .iter()
        .rev()
        .find(|(bound, _)| bound == name)
        .and_then(|(_, t)| t.clone())
}

fn literal_type(literal: &LiteralValue) -> CelType {
    match literal {
        LiteralValue::Boolean(_) => CelType::Bool,
        LiteralValue::Bytes(_) => CelType::Bytes,
        LiteralValue::Double(_) => CelType::Double,
        LiteralValue::Int(_) => CelType::Int,
        LiteralValue::Null => CelType::Null,
        LiteralValue::String(_) => CelType::String,
        LiteralValue::UInt(_) => CelType::Uint,
    }
}

/// The one type of a literal's elements (`dyn` for none, or where one is `dyn`).
fn common(types: Vec<CelType>) -> Option<CelType> {
    if types.contains(&CelType::Dyn) {
        return Some(CelType::Dyn);
    }
    let mut types = types.into_iter();
    let Some(first) = types.next() else {
        return Some(CelType::Dyn);
    };
    types.all(|t| t == first).then_some(first)
}

/// A field of a value of type `container`.
fn field_of(container: CelType) -> Option<CelType> {
    match container {
        CelType::Map(_, value) => Some(*value),
        CelType::Dyn => Some(CelType::Dyn),
        _ => None,
    }
}

/// An element of a value of type `container`.
fn element_of(container: CelType) -> Option<CelType> {
    match container {
        CelType::List(element) => Some(*element),
        CelType::Map(_, value) => Some(*value),
        CelType::Dyn => Some(CelType::Dyn),
        _ => None,
    }
}

/// A member of `operand` (a field or an element); through an optional value, an optional
/// member.
fn member(operand: CelType, of: impl Fn(CelType) -> Option<CelType>) -> Option<CelType> {
    match operand {
        CelType::Optional(inner) => Some(CelType::Optional(Box::new(of(*inner)?))),
        operand => of(operand),
    }
}

/// The namespaces whose calls are functions, not members of a variable.
const NAMESPACED: [(&str, CelType); 6] = [
    ("sets.contains", CelType::Bool),
    ("sets.equivalent", CelType::Bool),
    ("sets.intersects", CelType::Bool),
    ("strings.quote", CelType::String),
    ("base64.encode", CelType::String),
    ("base64.decode", CelType::Bytes),
];

/// Functions every overload of which, in Flux's environment, returns the same type.
fn result_of_function(name: &str) -> Option<CelType> {
    Some(match name {
        "startsWith" | "endsWith" | "contains" | "matches" | "hasValue" | "bool" => CelType::Bool,
        "size" | "indexOf" | "lastIndexOf" | "int" | "getFullYear" | "getMonth"
        | "getDayOfYear" | "getDayOfMonth" | "getDate" | "getDayOfWeek" | "getHours"
        | "getMinutes" | "getSeconds" | "getMilliseconds" => CelType::Int,
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "format"
        | "join" | "reverse" | "string" => CelType::String,
        "split" => CelType::List(Box::new(CelType::String)),
        "uint" => CelType::Uint,
        "double" => CelType::Double,
        "bytes" => CelType::Bytes,
        "dyn" => CelType::Dyn,
        "duration" => CelType::Duration,
        "timestamp" => CelType::Timestamp,
        _ => return None,
    })
}

/// The operators the checker knows the overloads of.
const OPERATORS: [&str; 17] = [
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::IN,
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::CONDITIONAL,
    operators::ADD,
    operators::SUBSTRACT,
    operators::MULTIPLY,
    operators::DIVIDE,
    operators::MODULO,
    operators::NEGATE,
];

/// A call's type; a call no overload takes is reported and typed `None`.
fn call_type(call: &cel::common::ast::CallExpr, id: u64, cx: &mut Checker) -> Option<CelType> {
    let name = super::cel_ext::written_name(&call.func_name);
    // `optional.of(x)`: a function of a namespace, not a member of a variable.
    let namespace = match call.target.as_deref() {
        Some(IdedExpr {
            expr: Expr::Ident(namespace),
            ..
        }) if lookup(&cx.scope, namespace).is_none() => Some(namespace.as_str()),
        _ => None,
    };
    // Every operand is checked, whatever the call makes of it: errors hide anywhere.
    let receiver = match (call.target.as_deref(), namespace) {
        (Some(target), None) => Some(type_of(target, cx)),
        _ => None,
    };
    let args: Vec<Option<CelType>> = call.args.iter().map(|a| type_of(a, cx)).collect();
    let refused = if OPERATORS.contains(&name) {
        operator_refused(name, &args)
    } else {
        function_refused(name, namespace, &receiver, &args)
    };
    if let Some(error) = refused {
        cx.errors.push((id, error));
        return None;
    }
    match namespace {
        Some(namespace) => namespaced_type(&format!("{namespace}.{name}"), &args),
        None => operator_type(name, &args).or_else(|| member_type(name, receiver, &args)),
    }
}

/// cel-go's error for an operator no overload of which takes its operands' types.
fn operator_refused(name: &str, args: &[Option<CelType>]) -> Option<String> {
    let known: Vec<CelType> = args.iter().cloned().collect::<Option<_>>()?;
    if overload_exists(name, &known) {
        return None;
    }
    let signature: Vec<String> = known.iter().map(CelType::overload_name).collect();
    Some(format!(
        "found no matching overload for '{name}' applied to '({})'",
        signature.join(", ")
    ))
}

/// An operator's result (`None` for a call that is not one, or whose type is not certain).
fn operator_type(name: &str, args: &[Option<CelType>]) -> Option<CelType> {
    use operators::*;
    let arg = |i: usize| args.get(i).cloned().flatten();
    match name {
        EQUALS | NOT_EQUALS | LESS | LESS_EQUALS | GREATER | GREATER_EQUALS | IN | LOGICAL_AND
        | LOGICAL_OR | LOGICAL_NOT | NOT_STRICTLY_FALSE => Some(CelType::Bool),
        CONDITIONAL => match (arg(1)?, arg(2)?) {
            (yes, no) if yes == no => Some(yes),
            (CelType::Dyn, _) | (_, CelType::Dyn) => Some(CelType::Dyn),
            _ => None,
        },
        INDEX => element_of(arg(0)?),
        OPT_SELECT => Some(CelType::Optional(Box::new(match arg(0)? {
            CelType::Optional(inner) => field_of(*inner)?,
            operand => field_of(operand)?,
        }))),
        OPT_INDEX => Some(CelType::Optional(Box::new(match arg(0)? {
            CelType::Optional(inner) => element_of(*inner)?,
            operand => element_of(operand)?,
        }))),
        ADD | SUBSTRACT | MULTIPLY | DIVIDE | MODULO => arithmetic(name, arg(0)?, arg(1)?),
        NEGATE => match arg(0)? {
            t @ (CelType::Int | CelType::Double | CelType::Dyn) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// A namespaced function's result (`optional.of`, `sets.contains`, …).
fn namespaced_type(qualified: &str, args: &[Option<CelType>]) -> Option<CelType> {
    match qualified {
        "optional.of" | "optional.ofNonZeroValue" => Some(CelType::Optional(Box::new(
            args.first().cloned().flatten()?,
        ))),
        "optional.none" => Some(CelType::Optional(Box::new(CelType::Dyn))),
        qualified => NAMESPACED
            .iter()
            .find(|(function, _)| *function == qualified)
            .map(|(_, t)| t.clone()),
    }
}

/// A global or member function's result: an optional value's members by the value's type,
/// the others by [`result_of_function`].
fn member_type(
    name: &str,
    receiver: Option<Option<CelType>>,
    args: &[Option<CelType>],
) -> Option<CelType> {
    let arg = |i: usize| args.get(i).cloned().flatten();
    match (name, receiver) {
        ("value", Some(Some(CelType::Optional(inner)))) => Some(*inner),
        ("orValue", Some(Some(CelType::Optional(inner)))) => {
            let fallback = arg(0)?;
            match *inner {
                CelType::Dyn => Some(CelType::Dyn),
                inner if inner == fallback => Some(inner),
                _ => None,
            }
        }
        ("or", Some(Some(CelType::Optional(inner)))) => match (*inner, arg(0)?) {
            (CelType::Dyn, _) => Some(CelType::Optional(Box::new(CelType::Dyn))),
            (inner, CelType::Optional(other)) if inner == *other => {
                Some(CelType::Optional(Box::new(inner)))
            }
            _ => None,
        },
        ("first" | "last", Some(Some(CelType::List(element)))) => Some(CelType::Optional(element)),
        ("unwrapOpt", Some(Some(CelType::List(element)))) => match *element {
            CelType::Optional(value) => Some(CelType::List(value)),
            _ => None,
        },
        ("value" | "orValue" | "or" | "first" | "last" | "unwrapOpt", _) => None,
        _ => result_of_function(name),
    }
}

/// cel-go's error for a call of a function none of whose overloads takes it, when the
/// function is listed and every operand's type known.
fn function_refused(
    name: &str,
    namespace: Option<&str>,
    receiver: &Option<Option<CelType>>,
    args: &[Option<CelType>],
) -> Option<String> {
    let function = match namespace {
        Some(namespace) => format!("{namespace}.{name}"),
        None => name.to_string(),
    };
    let receiver = match receiver {
        Some(Some(receiver)) => Some(receiver),
        Some(None) => return None,
        None => None,
    };
    let args: Vec<CelType> = args.iter().cloned().collect::<Option<_>>()?;
    if super::cel_functions::call_is_taken(&function, receiver, &args)? {
        return None;
    }
    let listed: Vec<String> = args.iter().map(CelType::overload_name).collect();
    let signature = match receiver {
        Some(receiver) => format!("{}.({})", receiver.overload_name(), listed.join(", ")),
        None => format!("({})", listed.join(", ")),
    };
    Some(format!(
        "found no matching overload for '{function}' applied to '{signature}'"
    ))
}

/// Whether one of cel-go's overloads of the operator `name` takes operands of these types
/// (`dyn` takes any; numbers of different kinds compare but are not equal, as
/// CrossTypeNumericComparisons has it).
fn overload_exists(name: &str, operands: &[CelType]) -> bool {
    use operators::*;
    let boolean = |t: &CelType| matches!(t, CelType::Bool | CelType::Dyn);
    match (name, operands) {
        (EQUALS | NOT_EQUALS, [left, right]) => unifies(left, right),
        (LESS | LESS_EQUALS | GREATER | GREATER_EQUALS, [left, right]) => orderable(left, right),
        (LOGICAL_AND | LOGICAL_OR, [left, right]) => boolean(left) && boolean(right),
        (LOGICAL_NOT, [operand]) => boolean(operand),
        (IN, [element, container]) => match container {
            CelType::List(item) => unifies(element, item),
            CelType::Map(key, _) => unifies(element, key),
            CelType::Dyn => true,
            _ => false,
        },
        (CONDITIONAL, [condition, yes, no]) => boolean(condition) && unifies(yes, no),
        (ADD | SUBSTRACT | MULTIPLY | DIVIDE | MODULO, [left, right]) => match (left, right) {
            (CelType::Dyn, _) | (_, CelType::Dyn) => true,
            (CelType::List(a), CelType::List(b)) => name == ADD && unifies(a, b),
            (left, right) => arithmetic(name, left.clone(), right.clone()).is_some(),
        },
        (NEGATE, [operand]) => matches!(operand, CelType::Int | CelType::Double | CelType::Dyn),
        _ => true,
    }
}

/// Whether values of the two types may be compared for equality: the same type, `dyn`
/// standing for any, type parameters unified.
pub(crate) fn unifies(left: &CelType, right: &CelType) -> bool {
    match (left, right) {
        (CelType::Dyn, _) | (_, CelType::Dyn) => true,
        (CelType::List(a), CelType::List(b)) | (CelType::Optional(a), CelType::Optional(b)) => {
            unifies(a, b)
        }
        (CelType::Map(k1, v1), CelType::Map(k2, v2)) => unifies(k1, k2) && unifies(v1, v2),
        (left, right) => left == right,
    }
}

/// Whether `<` takes the two types: numbers of any kinds, or two of one ordered type.
fn orderable(left: &CelType, right: &CelType) -> bool {
    let number = |t: &CelType| matches!(t, CelType::Int | CelType::Uint | CelType::Double);
    match (left, right) {
        (CelType::Dyn, _) | (_, CelType::Dyn) => true,
        (l, r) if number(l) && number(r) => true,
        (l, r) => {
            l == r
                && matches!(
                    l,
                    CelType::String
                        | CelType::Bytes
                        | CelType::Bool
                        | CelType::Timestamp
                        | CelType::Duration
                )
        }
    }
}

/// `+`, `-`, `*`, `/` and `%` on numbers, `+` on strings, bytes and lists, `+` and `-` on
/// timestamps and durations: a `dyn` operand takes the other's type (the one overload
/// left), two `dyn`s stay `dyn`.
fn arithmetic(operator: &str, left: CelType, right: CelType) -> Option<CelType> {
    use CelType::{Duration, Timestamp};
    // Time: a timestamp moves by a duration, two timestamps are a duration apart.
    match (operator, &left, &right) {
        (operators::ADD, Timestamp, Duration) | (operators::ADD, Duration, Timestamp) => {
            return Some(Timestamp);
        }
        (operators::SUBSTRACT, Timestamp, Duration) => return Some(Timestamp),
        (operators::SUBSTRACT, Timestamp, Timestamp) => return Some(Duration),
        (operators::ADD | operators::SUBSTRACT, Duration, Duration) => return Some(Duration),
        _ => {}
    }
    let operand = match (left, right) {
        (left, right) if left == right => left,
        (CelType::Dyn, other) | (other, CelType::Dyn) => other,
        _ => return None,
    };
    let supported = match &operand {
        CelType::Dyn | CelType::Int | CelType::Uint => true,
        CelType::Double => operator != operators::MODULO,
        CelType::String | CelType::Bytes | CelType::List(_) => operator == operators::ADD,
        _ => false,
    };
    supported.then_some(operand)
}

/// A macro's comprehension: `all`, `exists` and `exists_one` are `bool`; `map` and `filter`
/// a list of what they append.
fn comprehension_type(
    comprehension: &cel::common::ast::ComprehensionExpr,
    cx: &mut Checker,
) -> Option<CelType> {
    let range = type_of(&comprehension.iter_range, cx);
    let iterated = match range {
        Some(CelType::List(element)) if comprehension.iter_var2.is_none() => Some(*element),
        Some(CelType::Map(key, _)) if comprehension.iter_var2.is_none() => Some(*key),
        Some(CelType::Dyn) => Some(CelType::Dyn),
        _ => None,
    };
    let mapping =
        matches!(&comprehension.accu_init.expr, Expr::List(list) if list.elements.is_empty());
    let accumulated = type_of(&comprehension.accu_init, cx).filter(|_| !mapping);
    let bound = cx.scope.len();
    cx.scope.push((comprehension.iter_var.clone(), iterated));
    if let Some(second) = &comprehension.iter_var2 {
        cx.scope.push((second.clone(), None));
    }
    cx.scope.push((comprehension.accu_var.clone(), accumulated));
    // The condition and the step are checked for their errors (each reported once).
    type_of(&comprehension.loop_cond, cx);
    type_of(&comprehension.loop_step, cx);
    let result = if mapping {
        // `map` and `filter` start from an empty list and append one element a step.
        match (
            &comprehension.result.expr,
            appended(&comprehension.loop_step),
        ) {
            (Expr::Ident(result), Some(element))
                if *result == comprehension.accu_var && comprehension.iter_var2.is_none() =>
            {
                // Typed when the step was walked.
                let element = cx.types.get(&element.id).cloned().flatten();
                element.map(|t| CelType::List(Box::new(t)))
            }
            _ => None,
        }
    } else {
        type_of(&comprehension.result, cx)
    };
    cx.scope.truncate(bound);
    result
}

/// The element a `map` or `filter` step appends (`accu + [element]`, possibly under a
/// condition).
fn appended(step: &IdedExpr) -> Option<&IdedExpr> {
    let Expr::Call(call) = &step.expr else {
        return None;
    };
    match call.func_name.as_str() {
        // `accu + [element]`.
        operators::ADD => match &call.args.get(1)?.expr {
            Expr::List(list) if list.elements.len() == 1 => list.elements.first(),
            _ => None,
        },
        // `condition ? accu + [element] : accu` (`filter`, `map` with a filter).
        operators::CONDITIONAL => appended(call.args.get(1)?),
        _ => None,
    }
}

/// `tests/fixtures/go/cel-output-types.json`'s rows: an expression, the output type cel-go's
/// checker gave it, or its compile error (`tools/go-oracles/cel-output-types`).
#[cfg(test)]
pub(crate) fn cel_go_rows() -> Vec<(String, String, String)> {
    #[derive(serde::Deserialize)]
    struct Fixture {
        rows: Vec<(String, String, String)>,
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/go/cel-output-types.json"
    );
    let text = std::fs::read_to_string(path).expect("the cel-go fixture");
    serde_json::from_str::<Fixture>(&text)
        .expect("the cel-go fixture parses")
        .rows
}

#[cfg(test)]
mod tests {
    use super::{CelType, cel_go_rows, output_type};

    /// `tests/fixtures/go/cel-output-types.json`: what cel-go's checker gave expressions in
    /// Flux's environment (`tools/go-oracles/cel-output-types`). Where this module is sure,
    /// it is cel-go's type; it is unsure only where expected, and never for one cel-go
    /// refuses as undeclared.
    #[test]
    fn output_types_are_cel_gos() {
        let rows = cel_go_rows();
        let variables = [
            ("self", CelType::structure()),
            ("dep", CelType::structure()),
        ];
        // Types cel-go v0.16.1 (the oracle) names otherwise than Flux's v0.26.1 does
        // (`types.NewOptionalType`: "optional_type"), and types this module leaves open.
        let named = |go: &str| go.replace("optional(", "optional_type(");
        let open = ["type(1)"];
        let mut differ = Vec::new();
        let mut compared = 0;
        for (expression, go_type, go_error) in &rows {
            let Ok(program) = crate::health::cel_ext::compile(expression) else {
                continue;
            };
            let ours = output_type(program.expression(), &variables).map(|t| t.to_string());
            compared += usize::from(ours.is_some() && go_error.is_empty());
            match ours {
                Some(ours) if go_error.is_empty() && ours != named(go_type) => {
                    differ.push(format!("{expression}: cel-go {go_type}, ours {ours}"))
                }
                None if go_error.is_empty() && !open.contains(&expression.as_str()) => {
                    differ.push(format!("{expression}: cel-go {go_type}, ours unsure"))
                }
                _ => {}
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ:\n{}",
            differ.len(),
            differ.join("\n")
        );
        assert!(compared >= 140, "{compared} compared");
    }
}
