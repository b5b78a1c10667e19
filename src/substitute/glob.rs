//! The patterns of `${v#p}`, `${v##p}`, `${v%p}` and `${v%%p}` as Flux's envsubst matches them
//! (its fork of Go's `path.Match`, fluxcd/pkg `envsubst/path`): `*` any run of characters
//! (`/` included), `?` any one, `[…]` a class (`^` negates it, `!` is a character), `\` an
//! escape; a malformed pattern matches nothing. Prefixes are tried on the value's bytes, and a
//! suffix is a prefix of the reversed value matched by the reversed pattern, as Flux tries
//! them — so a class or escape in a suffix pattern reads backwards (`[!.]` becomes `].![`,
//! which is malformed, and removes nothing), as it does in Flux.

use super::expr::{ExprError, text_between};

/// The matching one text may do, in steps (a byte compared, a chunk tried). Flux's matcher
/// tries every prefix of a value, each at every offset a star allows: a hostile pattern over
/// a long value would keep a reconciliation busy for hours, where this ends it with an error.
pub(super) const STEPS: u64 = 100_000_000;

/// What is left of one text's matching steps.
pub(super) struct Budget(std::cell::Cell<u64>);

impl Budget {
    pub(super) fn new() -> Budget {
        Budget(std::cell::Cell::new(STEPS))
    }

    fn spend(&self, steps: usize) -> Result<(), Stop> {
        let left = self.0.get();
        let steps = steps as u64;
        if steps > left {
            self.0.set(0);
            return Err(Stop::Exhausted);
        }
        self.0.set(left - steps);
        Ok(())
    }
}

/// A malformed pattern.
struct BadPattern;

/// Why matching stopped short of an answer.
enum Stop {
    /// A malformed pattern: it matches nothing.
    BadPattern,
    Exhausted,
}

/// The length in bytes of the shortest (or longest) non-empty prefix of `value` that
/// `pattern` matches; none when none does or the pattern is malformed.
fn matching_prefix(
    value: &str,
    pattern: &str,
    longest: bool,
    budget: &Budget,
) -> Result<Option<usize>, ExprError> {
    let bytes = value.as_bytes();
    // From the longest prefix down, never the empty one.
    let mut found = None;
    for length in (1..=bytes.len()).rev() {
        match matches(pattern.as_bytes(), &bytes[..length], budget) {
            Err(Stop::BadPattern) => return Ok(None),
            Err(Stop::Exhausted) => return Err(ExprError::TooMuchMatching(String::new())),
            Ok(true) => {
                found = Some(length);
                if longest {
                    break;
                }
            }
            Ok(false) => {}
        }
    }
    Ok(found)
}

/// Removes the shortest (or longest) non-empty prefix of `value` that `pattern` matches; a
/// prefix that ends inside a character fails (Flux's leaves invalid UTF-8 behind).
pub(super) fn trim_prefix(
    value: &str,
    pattern: &str,
    longest: bool,
    budget: &Budget,
) -> Result<String, ExprError> {
    match matching_prefix(value, pattern, longest, budget)? {
        Some(length) => text_between(value, length, value.len()),
        None => Ok(value.to_string()),
    }
}

/// Removes the shortest (or longest) non-empty suffix: the prefix of the reversed value that
/// the reversed pattern matches. Flux reverses the result by characters, which turns the
/// bytes of a character cut in two into U+FFFD: so does this.
pub(super) fn trim_suffix(
    value: &str,
    pattern: &str,
    longest: bool,
    budget: &Budget,
) -> Result<String, ExprError> {
    let reversed: String = value.chars().rev().collect();
    let pattern: String = pattern.chars().rev().collect();
    let kept = match matching_prefix(&reversed, &pattern, longest, budget)? {
        Some(length) => String::from_utf8_lossy(&reversed.as_bytes()[length..]).into_owned(),
        None => reversed,
    };
    Ok(kept.chars().rev().collect())
}

/// Whether `pattern` matches all of `name`.
fn matches(mut pattern: &[u8], mut name: &[u8], budget: &Budget) -> Result<bool, Stop> {
    let chunk_at = |chunk: &[u8], text: &'_ [u8]| -> Result<Option<usize>, Stop> {
        budget.spend(chunk.len() + 1)?;
        match match_chunk(chunk, text) {
            Ok(Some(left)) => Ok(Some(text.len() - left.len())),
            Ok(None) => Ok(None),
            Err(BadPattern) => Err(Stop::BadPattern),
        }
    };
    'chunks: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing star matches the rest.
            return Ok(true);
        }
        if let Some(used) = chunk_at(chunk, name)?
            && (used == name.len() || !pattern.is_empty())
        {
            name = &name[used..];
            continue;
        }
        if star {
            // Skip what the star covers, one byte at a time.
            for skipped in 0..name.len() {
                let text = &name[skipped + 1..];
                match chunk_at(chunk, text)? {
                    Some(used) if pattern.is_empty() && used < text.len() => continue,
                    Some(used) => {
                        name = &text[used..];
                        continue 'chunks;
                    }
                    None => {}
                }
            }
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// The next piece of `pattern`: whether stars lead it, the chunk up to the next star outside
/// a class, and the rest.
fn scan_chunk(mut pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut star = false;
    while let [b'*', rest @ ..] = pattern {
        pattern = rest;
        star = true;
    }
    let mut in_class = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_class = true,
            b']' => in_class = false,
            b'*' if !in_class => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// Matches `chunk` (no star) against the start of `text`: what is left of `text`, or `None`
/// when it does not match.
fn match_chunk<'t>(mut chunk: &[u8], mut text: &'t [u8]) -> Result<Option<&'t [u8]>, BadPattern> {
    while let Some(&first) = chunk.first() {
        if text.is_empty() {
            return Ok(None);
        }
        match first {
            b'[' => {
                let (c, width) = decode(text);
                text = &text[width..];
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&b'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&b']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (low, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut high = low;
                    if chunk.first() == Some(&b'-') {
                        let (upper, rest) = class_char(&chunk[1..])?;
                        high = upper;
                        chunk = rest;
                    }
                    matched |= low <= c && c <= high;
                    ranges += 1;
                }
                if matched == negated {
                    return Ok(None);
                }
            }
            b'?' => {
                let (_, width) = decode(text);
                text = &text[width..];
                chunk = &chunk[1..];
            }
            _ => {
                let literal = if first == b'\\' {
                    chunk = &chunk[1..];
                    *chunk.first().ok_or(BadPattern)?
                } else {
                    first
                };
                if literal != text[0] {
                    return Ok(None);
                }
                text = &text[1..];
                chunk = &chunk[1..];
            }
        }
    }
    Ok(Some(text))
}

/// One character of a class (`\` escapes it), and what follows; a class cut short, or one
/// that starts with `-` or `]` where a character belongs, is malformed.
fn class_char(chunk: &[u8]) -> Result<(u32, &[u8]), BadPattern> {
    let chunk = match chunk.first() {
        None | Some(b'-' | b']') => return Err(BadPattern),
        Some(b'\\') => &chunk[1..],
        Some(_) => chunk,
    };
    if chunk.is_empty() {
        return Err(BadPattern);
    }
    let (c, width) = decode(chunk);
    if c == REPLACEMENT && width == 1 {
        return Err(BadPattern);
    }
    let rest = &chunk[width..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((c, rest))
}

const REPLACEMENT: u32 = 0xFFFD;

/// The first character of `bytes` and its width, as Go decodes it: an invalid byte is
/// U+FFFD, one byte wide.
fn decode(bytes: &[u8]) -> (u32, usize) {
    for width in 1..=bytes.len().min(4) {
        if let Ok(text) = std::str::from_utf8(&bytes[..width])
            && let Some(c) = text.chars().next()
        {
            return (c as u32, width);
        }
    }
    (REPLACEMENT, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `path.Match` expectations, as Flux's fork keeps them (a star crosses `/`; `!`
    /// does not negate), and its malformed patterns.
    #[test]
    fn patterns_match_as_fluxs_fork_of_path_match() {
        let rows: &[(&str, &str, Result<bool, ()>)] = &[
            ("abc", "abc", Ok(true)),
            ("*", "abc", Ok(true)),
            ("*c", "abc", Ok(true)),
            ("a*", "a", Ok(true)),
            ("a*/b", "abc/b", Ok(true)),
            ("a*/b", "a/c/b", Ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", Ok(true)),
            ("ab[c]", "abc", Ok(true)),
            ("ab[b-d]", "abc", Ok(true)),
            ("ab[e-g]", "abc", Ok(false)),
            ("ab[^c]", "abc", Ok(false)),
            ("ab[^b-d]", "abc", Ok(false)),
            ("ab[^e-g]", "abc", Ok(true)),
            ("a\\*b", "a*b", Ok(true)),
            ("a\\*b", "ab", Ok(false)),
            ("a?b", "a☺b", Ok(true)),
            ("[!.]*", "!x", Ok(true)),
            ("[!.]*", "ax", Ok(false)),
            ("[a-ζ]*", "α", Ok(true)),
            ("[\\]a]", "]", Ok(true)),
            ("[\\-]", "-", Ok(true)),
            ("[x\\-]", "z", Ok(false)),
            ("[]a]", "]", Err(())),
            ("[-]", "-", Err(())),
            ("[x-]", "x", Err(())),
            ("[a-b-c]", "a", Err(())),
            ("[", "a", Err(())),
            ("[^", "a", Err(())),
            ("a[", "a", Ok(false)),
            ("a[", "ab", Err(())),
            ("*x", "xxx", Ok(true)),
        ];
        for (pattern, name, want) in rows {
            let got = matches(pattern.as_bytes(), name.as_bytes(), &Budget::new()).map_err(|_| ());
            assert_eq!(got, *want, "{pattern:?} {name:?}");
        }
    }

    #[test]
    fn prefixes_and_suffixes_are_trimmed_as_flux_trims_them() {
        let budget = Budget::new();
        let prefix = |value: &str, pattern: &str, longest| {
            trim_prefix(value, pattern, longest, &budget).unwrap()
        };
        let suffix = |value: &str, pattern: &str, longest| {
            trim_suffix(value, pattern, longest, &budget).unwrap()
        };
        assert_eq!(
            prefix("/usr/local/bin/tool", "*/", false),
            "usr/local/bin/tool"
        );
        assert_eq!(prefix("/usr/local/bin/tool", "*/", true), "tool");
        assert_eq!(suffix("archive.tar.gz", ".*", false), "archive.tar");
        assert_eq!(suffix("archive.tar.gz", ".*", true), "archive");
        // Read backwards, the class is malformed: nothing is removed.
        assert_eq!(suffix("archive.tar.gz", "[!.]*", false), "archive.tar.gz");
        assert_eq!(prefix("abc", "[", false), "abc");
        // Long values are trimmed as Flux trims them, while the work stays within budget.
        let long = format!("{}/tool", "d/".repeat(50_000));
        assert_eq!(prefix(&long, "*/", true), "tool");
    }

    /// A pattern that would have Flux's matcher try every offset of every prefix of a long
    /// value stops at its budget with an error, instead of holding a reconciliation for hours.
    #[test]
    fn hostile_patterns_stop_at_their_budget() {
        let value = "a".repeat(64 * 1024);
        let pattern = format!("*{}b", "a".repeat(1_000));
        let budget = Budget::new();
        assert!(trim_prefix(&value, &pattern, false, &budget).is_err());
        assert!(
            trim_suffix("abc", "c", false, &budget).is_err(),
            "the budget is spent"
        );
    }
}
