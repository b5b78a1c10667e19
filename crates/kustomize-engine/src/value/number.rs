//! A JSON number that remembers how a YAML plain scalar spelled it.
//!
//! kustomize keeps resources as YAML nodes, and a node keeps its text: `1.10`, `0755`, `0x1F`
//! and `1e3` are numbers whose text is not the number's own. Everything kustomize prints goes
//! through JSON, so the output shows the number (`1.1`, `493`); but what kustomize reads as
//! node text sees the spelling: a replacement copying the field into a string (`nginx:1.10`,
//! not `nginx:1.1`), a list element selected by `[key=value]`, a name prefix on a number, a
//! generated ConfigMap's hash. A JSON patch rebuilds the object from JSON, and so forgets it
//! ([`Value::forget_spellings`](super::Value::forget_spellings)).
//!
//! Equality and hashing see only the number. A spelling costs nothing unless it differs from
//! the number's own text, and then one allocation: a [`Value`](super::Value) stays 32 bytes.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number and, where a YAML plain scalar wrote it differently, its spelling; see the
/// module docs.
#[derive(Clone)]
pub struct Number(Repr);

#[derive(Clone)]
enum Repr {
    Plain(serde_json::Number),
    Spelled(Box<Spelled>),
}

#[derive(Clone)]
struct Spelled {
    number: serde_json::Number,
    text: Box<str>,
}

impl Number {
    /// A finite float; `None` for NaN and the infinities, which JSON cannot hold.
    pub fn from_f64(f: f64) -> Option<Number> {
        serde_json::Number::from_f64(f).map(Number::from)
    }

    /// `number` as `text` spelled it; the spelling is kept only where it differs from the
    /// number's printed form (`1.10`, not `1.5`).
    pub fn spelled(number: Number, text: &str) -> Number {
        let number = number.into_json();
        if !number.is_f64() && is_plain_decimal_integer(text)
            || text == crate::yaml::format_number(&Number::from(number.clone()))
        {
            return Number(Repr::Plain(number));
        }
        Number(Repr::Spelled(Box::new(Spelled {
            number,
            text: text.into(),
        })))
    }

    /// How the YAML text spelled the number, where that differs from its printed form.
    pub fn spelling(&self) -> Option<&str> {
        match &self.0 {
            Repr::Plain(_) => None,
            Repr::Spelled(spelled) => Some(&spelled.text),
        }
    }

    /// The text a YAML node of this number holds: its spelling, or its printed form.
    pub fn text(&self) -> String {
        match self.spelling() {
            Some(text) => text.to_string(),
            None => crate::yaml::format_number(self),
        }
    }

    /// The same number, spelled as it prints.
    pub fn forget_spelling(&mut self) {
        if let Repr::Spelled(spelled) = &self.0 {
            self.0 = Repr::Plain(spelled.number.clone());
        }
    }

    /// The number alone, as serde_json holds it.
    pub fn into_json(self) -> serde_json::Number {
        match self.0 {
            Repr::Plain(number) => number,
            Repr::Spelled(spelled) => spelled.number,
        }
    }
}

/// Whether `text` is an integer as it prints (`12`, `-3`, `0`): most numbers in manifests,
/// told apart without formatting the number.
fn is_plain_decimal_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text).as_bytes();
    match digits {
        [] => false,
        [b'0'] => text == "0",
        [b'0', ..] => false,
        _ => digits.iter().all(u8::is_ascii_digit),
    }
}

impl Deref for Number {
    type Target = serde_json::Number;

    fn deref(&self) -> &serde_json::Number {
        match &self.0 {
            Repr::Plain(number) => number,
            Repr::Spelled(spelled) => &spelled.number,
        }
    }
}

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        **self == **other
    }
}

impl Eq for Number {}

impl Hash for Number {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spelling() {
            Some(text) => write!(f, "{} (spelled {text:?})", **self),
            None => fmt::Display::fmt(&**self, f),
        }
    }
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Number, D::Error> {
        serde_json::Number::deserialize(deserializer).map(Number::from)
    }
}

impl From<serde_json::Number> for Number {
    fn from(number: serde_json::Number) -> Number {
        Number(Repr::Plain(number))
    }
}

macro_rules! from_integer {
    ($($ty:ty)*) => {
        $(impl From<$ty> for Number {
            fn from(n: $ty) -> Number {
                Number(Repr::Plain(n.into()))
            }
        })*
    };
}
from_integer!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spelled_number_costs_no_more_room_than_serde_jsons() {
        assert_eq!(
            std::mem::size_of::<Number>(),
            std::mem::size_of::<serde_json::Number>()
        );
    }

    #[test]
    fn spellings_are_kept_only_where_they_differ_from_the_printed_number() {
        let cases = [
            ("1.10", Number::from_f64(1.1), Some("1.10")),
            ("1.5", Number::from_f64(1.5), None),
            ("1.0", Number::from_f64(1.0), Some("1.0")),
            ("1e3", Number::from_f64(1000.0), Some("1e3")),
            ("0755", Some(Number::from(493)), Some("0755")),
            ("0x1F", Some(Number::from(31)), Some("0x1F")),
            ("+12", Some(Number::from(12)), Some("+12")),
            ("12", Some(Number::from(12)), None),
            ("-3", Some(Number::from(-3)), None),
            ("0", Some(Number::from(0)), None),
            ("-0", Some(Number::from(0)), Some("-0")),
            ("007", Some(Number::from(7)), Some("007")),
            (
                "1234567890123456789012",
                Number::from_f64(1.2345678901234568e21),
                Some("1234567890123456789012"),
            ),
        ];
        for (text, number, spelling) in cases {
            let number = Number::spelled(number.unwrap(), text);
            assert_eq!(number.spelling(), spelling, "{text}");
            assert_eq!(number.text(), text, "{text}");
        }
    }

    #[test]
    fn equality_hashing_and_printing_see_only_the_number() {
        use std::collections::hash_map::DefaultHasher;
        let hash = |n: &Number| {
            let mut hasher = DefaultHasher::new();
            n.hash(&mut hasher);
            hasher.finish()
        };
        let spelled = Number::spelled(Number::from(493), "0755");
        let plain = Number::from(493);
        assert_eq!(spelled, plain);
        assert_eq!(hash(&spelled), hash(&plain));
        assert_eq!(spelled.to_string(), "493");
        assert_eq!(serde_json::to_string(&spelled).unwrap(), "493");
        let mut forgotten = spelled.clone();
        forgotten.forget_spelling();
        assert_eq!(forgotten.spelling(), None);
        assert_eq!(forgotten.text(), "493");
    }
}
