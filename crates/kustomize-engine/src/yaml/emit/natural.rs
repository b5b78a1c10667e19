//! go-yaml v3's "natural" order of map keys, in which kustomize prints them.

use std::cmp::Ordering;

/// go-yaml v3's ordering of string map keys: runs of digits compare by value, a letter
/// sorts after a non-letter (before it when the common prefix ends in a digit), and
/// otherwise characters compare by code point; a prefix sorts first.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    if natural_less(a, b) {
        Ordering::Less
    } else if natural_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn natural_less(a: &str, b: &str) -> bool {
    // Keys are nearly always ASCII: compare bytes in place, no allocation.
    if a.is_ascii() && b.is_ascii() {
        return natural_less_in(
            a.as_bytes(),
            b.as_bytes(),
            |c: &u8| c.is_ascii_digit(),
            |c: &u8| c.is_ascii_alphabetic(),
            |c: &u8| i64::from(*c),
        );
    }
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    natural_less_in(
        &ar,
        &br,
        |c: &char| c.is_numeric(),
        |c: &char| c.is_alphabetic(),
        |c: &char| *c as i64,
    )
}

/// go-yaml v3's comparison over any sequence of characters.
fn natural_less_in<T: Copy + PartialOrd>(
    ar: &[T],
    br: &[T],
    is_digit: impl Fn(&T) -> bool,
    is_letter: impl Fn(&T) -> bool,
    code: impl Fn(&T) -> i64,
) -> bool {
    let zero = i64::from(b'0');
    let mut digits = false;
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            digits = is_digit(&ar[i]);
            continue;
        }
        let (al, bl) = (is_letter(&ar[i]), is_letter(&br[i]));
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return if digits { al } else { bl };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if code(&ar[i]) == zero || code(&br[i]) == zero {
            // Inside a number that already had a non-zero digit, zeros are significant.
            if ar[..i]
                .iter()
                .rev()
                .take_while(|c| is_digit(c))
                .any(|c| code(c) != zero)
            {
                an = 1;
                bn = 1;
            }
        }
        let mut ai = i;
        while ai < ar.len() && is_digit(&ar[ai]) {
            an = an.wrapping_mul(10).wrapping_add(code(&ar[ai]) - zero);
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && is_digit(&br[bi]) {
            bn = bn.wrapping_mul(10).wrapping_add(code(&br[bi]) - zero);
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}
