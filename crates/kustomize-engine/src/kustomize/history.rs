//! A resource's history (earlier identities, prefixes and suffixes added): a list that only
//! grows at its end and whose clones share what they hold in common.
//!
//! A base included under many prefixes is copied once per inclusion, and each copy then adds
//! one entry of its own. With vectors, every copy repeats the whole history, so a diamond of
//! bases `d` levels deep holds `d` entries per object; here each copy adds one shared node.

use std::sync::Arc;

/// See the module docs. Clones are cheap; entries are read newest first (every reader asks
/// whether any entry matches, or compares the latest ones).
pub struct History<T> {
    newest: Option<Arc<Node<T>>>,
}

struct Node<T> {
    item: T,
    /// Entries up to and including this one.
    len: usize,
    before: Option<Arc<Node<T>>>,
}

impl<T> History<T> {
    pub fn new() -> History<T> {
        History { newest: None }
    }

    pub fn len(&self) -> usize {
        self.newest.as_ref().map_or(0, |node| node.len)
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_none()
    }

    pub fn push(&mut self, item: T) {
        let len = self.len() + 1;
        let before = self.newest.take();
        self.newest = Some(Arc::new(Node { item, len, before }));
    }

    /// The entry added last.
    pub fn last(&self) -> Option<&T> {
        self.newest.as_deref().map(|node| &node.item)
    }

    /// The entry added first.
    pub fn first(&self) -> Option<&T> {
        self.iter().last()
    }

    /// Entries from the last added to the first.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            next: self.newest.as_deref(),
        }
    }

    /// Entries from the first added to the last.
    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        let mut entries: Vec<T> = self.iter().cloned().collect();
        entries.reverse();
        entries
    }
}

/// See [`History::iter`].
pub struct Iter<'a, T> {
    next: Option<&'a Node<T>>,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        let node = self.next?;
        self.next = node.before.as_deref();
        Some(&node.item)
    }
}

impl<T> Default for History<T> {
    fn default() -> Self {
        History::new()
    }
}

impl<T> Clone for History<T> {
    fn clone(&self) -> Self {
        History {
            newest: self.newest.clone(),
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for History<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut entries: Vec<&T> = self.iter().collect();
        entries.reverse();
        f.debug_list().entries(entries).finish()
    }
}

impl<'a, T> IntoIterator for &'a History<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Frees a long unshared chain node by node: recursive drops could exhaust the stack.
impl<T> Drop for History<T> {
    fn drop(&mut self) {
        let mut next = self.newest.take();
        while let Some(node) = next {
            match Arc::try_unwrap(node) {
                Ok(mut node) => next = node.before.take(),
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_oldest_first_and_clones_share_their_common_entries() {
        let mut base = History::new();
        base.push("a");
        base.push("b");
        let mut left = base.clone();
        let mut right = base.clone();
        left.push("l");
        right.push("r");
        assert_eq!(left.to_vec(), ["a", "b", "l"]);
        assert_eq!(right.to_vec(), ["a", "b", "r"]);
        assert_eq!(base.to_vec(), ["a", "b"]);
        assert_eq!(
            (left.first(), left.last(), left.len()),
            (Some(&"a"), Some(&"l"), 3)
        );
        assert_eq!(right.iter().copied().collect::<Vec<_>>(), ["r", "b", "a"]);
        assert!(History::<u8>::new().first().is_none());
    }

    #[test]
    fn a_long_history_drops_without_recursion() {
        let mut history = History::new();
        for i in 0..1_000_000u32 {
            history.push(i);
        }
        let shared = history.clone();
        drop(history);
        assert_eq!(shared.len(), 1_000_000);
        drop(shared);
    }
}
