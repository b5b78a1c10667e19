//! go-yaml v3's "natural" order of map keys, in which kustomize prints them.

/// Sorts `items` by `key` as go-yaml v3 sorts a mapping's keys: Go's `sort.Sort` with its
/// "natural" comparison (runs of digits compare by value, a letter sorts after a non-letter,
/// before it when the common prefix ends in a digit, other characters by code point, a
/// prefix first), which is an insertion sort up to 12 keys. go-yaml's comparison
/// is not a total order for every input (digit runs past `int64` wrap around, as in Go), which
/// Rust's own sorts may answer with a panic; this sort never does, is Go's own up to 12 keys,
/// and beyond (a merge sort) agrees with Go wherever the comparison is a total order.
pub fn sort_naturally<T>(items: &mut Vec<T>, key: impl Fn(&T) -> &str) {
    let less = |a: &T, b: &T| natural_less(key(a), key(b));
    if items.len() <= 12 {
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 && less(&items[j], &items[j - 1]) {
                items.swap(j, j - 1);
                j -= 1;
            }
        }
        return;
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    let mut scratch = order.clone();
    merge_sort(&mut order, &mut scratch, &|a, b| less(&items[a], &items[b]));
    let mut taken: Vec<Option<T>> = items.drain(..).map(Some).collect();
    items.extend(order.into_iter().filter_map(|i| taken[i].take()));
}

/// A top-down merge sort of indices: every comparison picks a side, so no comparison, however
/// inconsistent, can stop it.
fn merge_sort(order: &mut [usize], scratch: &mut [usize], less: &dyn Fn(usize, usize) -> bool) {
    let n = order.len();
    if n < 2 {
        return;
    }
    let middle = n / 2;
    merge_sort(&mut order[..middle], &mut scratch[..middle], less);
    merge_sort(&mut order[middle..], &mut scratch[middle..], less);
    let (mut left, mut right) = (0, middle);
    for slot in scratch.iter_mut().take(n) {
        let take_right = right < n && (left >= middle || less(order[right], order[left]));
        if take_right {
            *slot = order[right];
            right += 1;
        } else {
            *slot = order[left];
            left += 1;
        }
    }
    order.copy_from_slice(&scratch[..n]);
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
        |c: &char| go_std::is_digit(*c),
        |c: &char| go_std::is_letter(*c),
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
