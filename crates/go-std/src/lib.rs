//! What Go's standard library answers, where Flux and kustomize inherit it and Rust's own
//! answer differs: `unicode.IsLetter`, `IsDigit`, `ToUpper`, `ToLower` and `strconv.IsPrint`,
//! exactly as the Go release that builds Flux v1.9.4 and kubectl v1.37 answers them (Go 1.26,
//! Unicode 15.0.0); `strconv.Quote` (`%q`) on them; `strings.EqualFold` for ASCII names (how
//! `encoding/json` matches fields); and `strconv.FormatFloat(f, 'g', -1, 64)`; and `regexp`'s syntax ([`regexp`]). Rust's
//! `is_alphabetic`, `is_numeric` and `escape_debug` answer other questions (letter numbers,
//! combining marks, `²`) under another Unicode release, and go-yaml's key order, Flux's
//! variable names and the errors Flux prints depend on Go's answer. The tables are generated
//! by `tools/go-oracles/unicode-classes`.
#![forbid(unsafe_code)]

mod float;
pub mod regexp;
mod tables;

pub use float::{format_float_g, format_float_g32};

/// Go's `unicode.IsLetter`.
pub fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    within(&tables::LETTERS, c)
}

/// Go's `unicode.IsDigit`.
pub fn is_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    within(&tables::DIGITS, c)
}

/// Go's `unicode.ToUpper`: one character for one, by the simple case mapping (`ß` and `ŉ`
/// stay, where Rust's full mapping makes two characters).
pub fn to_upper(c: char) -> char {
    to_case(c, 0)
}

/// Go's `unicode.ToLower` (`İ` is `i`, where Rust makes `i̇`).
pub fn to_lower(c: char) -> char {
    to_case(c, 1)
}

/// Go's `unicode.To` over `CaseRanges`: a delta per case, or, for a range marked
/// `UpperLower`, upper case at even offsets from its start and lower case at odd ones.
fn to_case(c: char, case: usize) -> char {
    /// Go's `UpperLower` (`MaxRune + 1`).
    const UPPER_LOWER: i32 = 0x11_0000;
    let code = u32::from(c);
    let after = tables::CASE_RANGES.partition_point(|&(_, last, _)| last < code);
    let Some(&(first, _, deltas)) = tables::CASE_RANGES.get(after).filter(|r| r.0 <= code) else {
        return c;
    };
    let mapped = match deltas[case] {
        UPPER_LOWER => first + (((code - first) & !1) | (case as u32 & 1)),
        delta => code.checked_add_signed(delta).unwrap_or(code),
    };
    char::from_u32(mapped).unwrap_or(c)
}

/// Go's `strings.EqualFold(text, name)` for an ASCII `name` (a struct field, as Go's
/// `encoding/json` matches keys to fields): letters in any case, and also the long `ſ` for
/// `s` and the Kelvin sign `K` for `k`, which fold with them.
pub fn equal_fold_ascii(text: &str, name: &str) -> bool {
    let fold = |c: char| match c {
        '\u{17f}' => 'S',
        '\u{212a}' => 'K',
        c => c.to_ascii_uppercase(),
    };
    text.chars().count() == name.len()
        && text
            .chars()
            .zip(name.chars())
            .all(|(t, n)| fold(t) == fold(n))
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
pub fn is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    within(&tables::PRINTS, c)
}

/// Go's `strconv.Quote` (what `%q` prints for a string): double quotes, `\"` and `\\`, the
/// C escapes, `\xHH` below a space and for DEL, `\uHHHH` or `\UHHHHHHHH` for the rest Go does
/// not print.
pub fn quote(text: &str) -> String {
    quote_bytes(text.as_bytes())
}

/// [`quote`] of a Go string that may hold bytes that are not UTF-8: each such byte `\xHH`.
pub fn quote_bytes(text: &[u8]) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_quoted(&mut quoted, c);
        }
        for byte in chunk.invalid() {
            quoted.push_str(&format!("\\x{byte:02x}"));
        }
    }
    quoted.push('"');
    quoted
}

fn push_quoted(quoted: &mut String, c: char) {
    match c {
        '"' => quoted.push_str("\\\""),
        '\\' => quoted.push_str("\\\\"),
        c if is_print(c) => quoted.push(c),
        '\u{7}' => quoted.push_str("\\a"),
        '\u{8}' => quoted.push_str("\\b"),
        '\u{c}' => quoted.push_str("\\f"),
        '\n' => quoted.push_str("\\n"),
        '\r' => quoted.push_str("\\r"),
        '\t' => quoted.push_str("\\t"),
        '\u{b}' => quoted.push_str("\\v"),
        c if c < ' ' || c == '\u{7f}' => quoted.push_str(&format!("\\x{:02x}", u32::from(c))),
        c if u32::from(c) < 0x10000 => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
        c => quoted.push_str(&format!("\\U{:08x}", u32::from(c))),
    }
}

/// Whether `c` falls in one of `ranges` (sorted, inclusive, disjoint).
fn within(ranges: &[(u32, u32)], c: char) -> bool {
    let code = u32::from(c);
    let after = ranges.partition_point(|&(_, last)| last < code);
    ranges.get(after).is_some_and(|&(first, _)| first <= code)
}

#[cfg(test)]
mod tests {
    use super::{is_digit, is_letter, is_print, quote, quote_bytes, to_lower, to_upper};

    /// Every code point is a letter and a digit exactly where Go's own answers say
    /// (`tests/fixtures/go/unicode-classes.json`, printed by Go 1.26 itself).
    #[test]
    fn every_code_point_is_classed_as_go_classes_it() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            letters: Vec<(u32, u32)>,
            digits: Vec<(u32, u32)>,
            prints: Vec<(u32, u32)>,
            upper: Vec<(u32, u32)>,
            lower: Vec<(u32, u32)>,
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/go/unicode-classes.json"
        );
        let fixture: Fixture =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let marked = |ranges: &[(u32, u32)]| {
            let mut marks = vec![false; 0x110000];
            for &(first, last) in ranges {
                marks[first as usize..=last as usize].fill(true);
            }
            marks
        };
        let (letters, digits, prints) = (
            marked(&fixture.letters),
            marked(&fixture.digits),
            marked(&fixture.prints),
        );
        let mut differ = Vec::new();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let code = u32::from(c);
            let code = code as usize;
            if is_letter(c) != letters[code]
                || is_digit(c) != digits[code]
                || is_print(c) != prints[code]
            {
                differ.push(format!("U+{code:04X}"));
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ: {:?}",
            differ.len(),
            &differ[..differ.len().min(20)]
        );
        // Case: every code point Go changes, to what; every other one unchanged.
        for (mapping, changed) in [
            (to_upper as fn(char) -> char, &fixture.upper),
            (to_lower, &fixture.lower),
        ] {
            let mut expected: Vec<u32> = (0..=0x10FFFF).collect();
            for &(from, to) in changed {
                expected[from as usize] = to;
            }
            let differ: Vec<String> = (0..=0x10FFFF)
                .filter_map(char::from_u32)
                .filter(|&c| u32::from(mapping(c)) != expected[u32::from(c) as usize])
                .map(|c| format!("U+{:04X}", u32::from(c)))
                .collect();
            assert!(
                differ.is_empty(),
                "{} differ: {:?}",
                differ.len(),
                &differ[..differ.len().min(20)]
            );
        }
    }

    /// Where Rust's own classes differ from Go's.
    #[test]
    fn rusts_letter_numbers_marks_and_superscripts_are_not_gos() {
        for (c, letter, digit) in [
            ('a', true, false),
            ('ä', true, false),
            ('Ⅻ', false, false),
            ('\u{093F}', false, false),
            ('²', false, false),
            ('١', false, true),
            ('\u{0967}', false, true),
            ('_', false, false),
        ] {
            assert_eq!((is_letter(c), is_digit(c)), (letter, digit), "{c:?}");
        }
    }

    #[test]
    fn names_fold_as_go_folds_them() {
        for (text, name, equal) in [
            ("RESOURCES", "resources", true),
            ("re\u{17f}ources", "resources", true),
            ("\u{212a}ind", "kind", true),
            ("kind", "kin", false),
            ("r\u{e9}sources", "resources", false),
            ("\u{130}mages", "images", false),
        ] {
            assert_eq!(super::equal_fold_ascii(text, name), equal, "{text}");
        }
    }

    /// What Go's `strconv.Quote` printed for these (Go 1.26).
    #[test]
    fn quotes_as_go_quotes() {
        for (text, go) in [
            ("plain", "\"plain\""),
            (" http://x", "\" http://x\""),
            ("a\"b\\c", "\"a\\\"b\\\\c\""),
            ("\t\n\r\u{7}\u{8}\u{b}\u{c}", "\"\\t\\n\\r\\a\\b\\v\\f\""),
            ("\u{1}\u{7f}", "\"\\x01\\x7f\""),
            ("é\u{301}", "\"é\u{301}\""),
            ("\u{a0}\u{200b}\u{feff}", "\"\\u00a0\\u200b\\ufeff\""),
            ("\u{e0001}\u{10ffff}", "\"\\U000e0001\\U0010ffff\""),
        ] {
            assert_eq!(quote(text), go, "{text:?}");
        }
        assert_eq!(quote_bytes(b"%z\xc3"), "\"%z\\xc3\"");
    }
}
