//! The overloads of the functions in Flux's CEL environment (cel-go's standard library,
//! `ext.Strings`, `ext.Encoders`, `ext.Sets`, the optional library), for the checker to refuse
//! a call none of them takes, as cel-go's does: `size(1)`, `'a'.contains(1)`, `1.value()`,
//! `optional.of(1).orValue('a')`.

use super::cel_types::{CelType, unifies};

/// What an overload's parameter takes.
#[derive(Clone, Copy)]
enum Param {
    String,
    Int,
    Uint,
    Double,
    Bool,
    Bytes,
    Timestamp,
    Duration,
    /// Any list.
    List,
    /// A list of strings.
    Strings,
    /// Any map.
    Map,
    /// A list whose elements' type the other `SameList` parameters share (`sets.*`).
    SameList,
    /// An optional value whose value's type the other `SameOptional` and `OptionalValue`
    /// parameters share (`or`, `orValue`).
    SameOptional,
    /// A value of the type of the `SameOptional` parameter's value.
    OptionalValue,
    /// Anything.
    Any,
    /// A list of optional values.
    Optionals,
}

use Param::*;

/// One overload: the receiver of a member call (none for a global one) and the arguments.
type Overload = (Option<Param>, &'static [Param]);

const TIMESTAMP_GETTERS: [&str; 10] = [
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// The overloads of `name` (namespaced as `base64.encode`), if it is one listed here.
fn overloads(name: &str) -> Option<Vec<Overload>> {
    let conversions = |from: &'static [Param]| -> Vec<Overload> {
        from.iter()
            .map(|param| (None, std::slice::from_ref(param)))
            .collect()
    };
    Some(match name {
        "size" => vec![
            (None, &[String]),
            (None, &[Bytes]),
            (None, &[List]),
            (None, &[Map]),
            (Some(String), &[]),
            (Some(Bytes), &[]),
            (Some(List), &[]),
            (Some(Map), &[]),
        ],
        "int" => conversions(&[Int, Uint, Double, String, Timestamp, Duration]),
        "uint" | "double" => conversions(&[Int, Uint, Double, String]),
        "string" => conversions(&[Int, Uint, Double, Bool, Bytes, String, Timestamp, Duration]),
        "bytes" => conversions(&[Bytes, String]),
        "bool" => conversions(&[Bool, String]),
        "duration" => conversions(&[String, Duration, Int]),
        "timestamp" => conversions(&[String, Int, Timestamp]),
        "matches" => vec![(None, &[String, String]), (Some(String), &[String])],
        "contains" | "startsWith" | "endsWith" => vec![(Some(String), &[String])],
        "charAt" => vec![(Some(String), &[Int])],
        "indexOf" | "lastIndexOf" => {
            vec![(Some(String), &[String]), (Some(String), &[String, Int])]
        }
        "lowerAscii" | "upperAscii" | "trim" | "reverse" => vec![(Some(String), &[])],
        "replace" => vec![
            (Some(String), &[String, String]),
            (Some(String), &[String, String, Int]),
        ],
        "split" => vec![(Some(String), &[String]), (Some(String), &[String, Int])],
        "substring" => vec![(Some(String), &[Int]), (Some(String), &[Int, Int])],
        "format" => vec![(Some(String), &[List])],
        "join" => vec![(Some(Strings), &[]), (Some(Strings), &[String])],
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => vec![
            (Some(Timestamp), &[]),
            (Some(Timestamp), &[String]),
            (Some(Duration), &[]),
        ],
        getter if TIMESTAMP_GETTERS.contains(&getter) => {
            vec![(Some(Timestamp), &[]), (Some(Timestamp), &[String])]
        }
        "base64.encode" => vec![(None, &[Bytes])],
        "base64.decode" | "strings.quote" => vec![(None, &[String])],
        "sets.contains" | "sets.equivalent" | "sets.intersects" => {
            vec![(None, &[SameList, SameList])]
        }
        "optional.of" | "optional.ofNonZeroValue" => vec![(None, &[Any])],
        "optional.none" => vec![(None, &[])],
        "value" | "hasValue" => vec![(Some(SameOptional), &[])],
        "or" => vec![(Some(SameOptional), &[SameOptional])],
        "orValue" => vec![(Some(SameOptional), &[OptionalValue])],
        "first" | "last" => vec![(Some(List), &[])],
        "optional.unwrap" => vec![(None, &[Optionals])],
        "unwrapOpt" => vec![(Some(Optionals), &[])],
        _ => return None,
    })
}

/// Whether Flux's environment declares the function `name` (without its namespace): the
/// listed ones, `dyn`, `type` and the optional library's macros.
pub fn is_declared(name: &str) -> bool {
    overloads(name).is_some()
        || matches!(
            name,
            "dyn" | "type" | "all" | "exists" | "optMap" | "optFlatMap"
        )
}

/// Whether a parameter takes a value of type `t` (`dyn` goes anywhere).
fn takes(param: Param, t: &CelType) -> bool {
    match (param, t) {
        (_, CelType::Dyn) => true,
        (String, CelType::String)
        | (Int, CelType::Int)
        | (Uint, CelType::Uint)
        | (Double, CelType::Double)
        | (Bool, CelType::Bool)
        | (Bytes, CelType::Bytes)
        | (Timestamp, CelType::Timestamp)
        | (Duration, CelType::Duration)
        | (List | SameList, CelType::List(_))
        | (Map, CelType::Map(..)) => true,
        (Strings, CelType::List(element)) => unifies(element, &CelType::String),
        (SameOptional, CelType::Optional(_)) | (Any | OptionalValue, _) => true,
        (Optionals, CelType::List(element)) => {
            matches!(**element, CelType::Optional(_) | CelType::Dyn)
        }
        _ => false,
    }
}

/// Whether an overload of `name` takes this call, when `name` is a listed function; `None`
/// for the others, which are not checked.
pub fn call_is_taken(name: &str, receiver: Option<&CelType>, args: &[CelType]) -> Option<bool> {
    let overloads = overloads(name)?;
    Some(overloads.iter().any(|(wanted, params)| {
        let receiver_taken = match (wanted, receiver) {
            (None, None) => true,
            (Some(param), Some(receiver)) => takes(*param, receiver),
            _ => false,
        };
        let lists: Vec<&CelType> = params
            .iter()
            .zip(args)
            .filter(|(param, _)| matches!(param, SameList))
            .map(|(_, arg)| arg)
            .collect();
        let same_lists = lists.windows(2).all(|pair| unifies(pair[0], pair[1]));
        receiver_taken
            && params.len() == args.len()
            && params
                .iter()
                .zip(args)
                .all(|(param, arg)| takes(*param, arg))
            && same_lists
            && same_optionals(*wanted, receiver, params, args)
    }))
}

/// `or` and `orValue`: the receiver's value and the argument (its value, for `or`) unify.
fn same_optionals(
    wanted: Option<Param>,
    receiver: Option<&CelType>,
    params: &[Param],
    args: &[CelType],
) -> bool {
    let Some((SameOptional, CelType::Optional(value))) = wanted.zip(receiver) else {
        return true;
    };
    params
        .iter()
        .zip(args)
        .all(|(param, arg)| match (param, arg) {
            (SameOptional, CelType::Optional(other)) => unifies(value, other),
            (OptionalValue, arg) => unifies(value, arg),
            _ => true,
        })
}

#[cfg(test)]
mod tests {
    use super::call_is_taken;
    use crate::health::cel_types::CelType;

    #[test]
    fn calls_are_taken_by_an_overload_or_refused() {
        let list = |t: CelType| CelType::List(Box::new(t));
        /// A function, its receiver, its arguments, and whether an overload takes them.
        type Row = (&'static str, Option<CelType>, Vec<CelType>, Option<bool>);
        let rows: [Row; 9] = [
            ("size", None, vec![CelType::Bool], Some(false)),
            ("size", Some(CelType::String), vec![], Some(true)),
            (
                "contains",
                Some(CelType::Dyn),
                vec![CelType::Int],
                Some(false),
            ),
            (
                "contains",
                Some(CelType::Dyn),
                vec![CelType::Dyn],
                Some(true),
            ),
            (
                "join",
                Some(list(CelType::Int)),
                vec![CelType::String],
                Some(false),
            ),
            ("join", Some(list(CelType::Dyn)), vec![], Some(true)),
            (
                "sets.contains",
                None,
                vec![list(CelType::Int), list(CelType::String)],
                Some(false),
            ),
            ("value", Some(CelType::Dyn), vec![], Some(true)),
            ("optMap", Some(CelType::Dyn), vec![], None),
        ];
        for (name, receiver, args, taken) in rows {
            assert_eq!(
                call_is_taken(name, receiver.as_ref(), &args),
                taken,
                "{name}"
            );
        }
    }
}
