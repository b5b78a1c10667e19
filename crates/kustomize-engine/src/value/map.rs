//! A map from strings to values that iterates in key order, as `serde_json::Map` does, and
//! costs little when small.
//!
//! Kubernetes objects are mostly maps of a handful of keys. A B-tree spends a ~630-byte node on
//! each, however few its keys, so a tiny ConfigMap's three maps cost 1.9 kB; here a map of up
//! to [`SMALL_MAX`] keys is a sorted vector sized to its keys (56 bytes each), and only a larger
//! one becomes a B-tree, so that inserting into a map of a million keys stays logarithmic.

use std::borrow::Borrow;
use std::collections::{BTreeMap, btree_map};

use super::Value;

/// The most keys a map holds as a sorted vector.
const SMALL_MAX: usize = 16;

#[derive(Clone, Default)]
pub struct Map {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    Small(Vec<(String, Value)>),
    // Boxed so that a map, and so every value, stays three words (a test pins the size).
    #[allow(clippy::box_collection)]
    Large(Box<BTreeMap<String, Value>>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Small(Vec::new())
    }
}

/// Equal entries make equal maps, whichever representation holds them.
impl PartialEq for Map {
    fn eq(&self, other: &Map) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Map {}

impl std::hash::Hash for Map {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        self.iter().for_each(|entry| entry.hash(state));
    }
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

fn search<Q>(entries: &[(String, Value)], key: &Q) -> Result<usize, usize>
where
    String: Borrow<Q>,
    Q: Ord + ?Sized,
{
    entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
}

impl Map {
    pub fn new() -> Map {
        Map::default()
    }

    pub fn with_capacity(capacity: usize) -> Map {
        Map {
            repr: Repr::Small(Vec::with_capacity(capacity.min(SMALL_MAX))),
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Small(entries) => entries.len(),
            Repr::Large(tree) => tree.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&mut self) {
        self.repr = Repr::default();
    }

    /// Gives back spare capacity, for maps that are done growing.
    pub fn shrink_to_fit(&mut self) {
        if let Repr::Small(entries) = &mut self.repr {
            entries.shrink_to_fit();
        }
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&Value>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.get_key_value(key).map(|(_, v)| v)
    }

    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&String, &Value)>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match &self.repr {
            Repr::Small(entries) => search(entries, key)
                .ok()
                .map(|i| (&entries[i].0, &entries[i].1)),
            Repr::Large(tree) => tree.get_key_value(key),
        }
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut Value>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match &mut self.repr {
            Repr::Small(entries) => match search(entries, key) {
                Ok(i) => Some(&mut entries[i].1),
                Err(_) => None,
            },
            Repr::Large(tree) => tree.get_mut(key),
        }
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, giving back the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match &mut self.repr {
            Repr::Small(entries) => match search(entries, key.as_str()) {
                Ok(i) => Some(std::mem::replace(&mut entries[i].1, value)),
                Err(i) if entries.len() < SMALL_MAX => {
                    entries.insert(i, (key, value));
                    None
                }
                Err(_) => {
                    let mut tree: BTreeMap<String, Value> =
                        std::mem::take(entries).into_iter().collect();
                    tree.insert(key, value);
                    self.repr = Repr::Large(Box::new(tree));
                    None
                }
            },
            Repr::Large(tree) => tree.insert(key, value),
        }
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<Value>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.remove_entry(key).map(|(_, v)| v)
    }

    pub fn remove_entry<Q>(&mut self, key: &Q) -> Option<(String, Value)>
    where
        String: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match &mut self.repr {
            Repr::Small(entries) => search(entries, key).ok().map(|i| entries.remove(i)),
            Repr::Large(tree) => tree.remove_entry(key),
        }
    }

    pub fn entry<S: Into<String>>(&mut self, key: S) -> Entry<'_> {
        Entry {
            map: self,
            key: key.into(),
        }
    }

    pub fn retain<F: FnMut(&String, &mut Value) -> bool>(&mut self, mut keep: F) {
        match &mut self.repr {
            Repr::Small(entries) => entries.retain_mut(|(k, v)| keep(k, v)),
            Repr::Large(tree) => tree.retain(|k, v| keep(k, v)),
        }
    }

    /// Moves every entry of `other` into this map, replacing values of keys both hold.
    pub fn append(&mut self, other: &mut Map) {
        let taken = std::mem::take(other);
        self.extend(taken);
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Small(entries) => Iter::Small(entries.iter()),
            Repr::Large(tree) => Iter::Large(tree.iter()),
        }
    }

    pub fn iter_mut(&mut self) -> IterMut<'_> {
        match &mut self.repr {
            Repr::Small(entries) => IterMut::Small(entries.iter_mut()),
            Repr::Large(tree) => IterMut::Large(tree.iter_mut()),
        }
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.iter().map(|(_, v)| v)
    }

    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.iter_mut().map(|(_, v)| v)
    }

    pub fn into_values(self) -> impl DoubleEndedIterator<Item = Value> + ExactSizeIterator {
        self.into_iter().map(|(_, v)| v)
    }

    pub fn first_key_value(&self) -> Option<(&String, &Value)> {
        self.iter().next()
    }
}

/// One key of a [`Map`], present or not.
pub struct Entry<'a> {
    map: &'a mut Map,
    key: String,
}

impl<'a> Entry<'a> {
    pub fn key(&self) -> &String {
        &self.key
    }

    pub fn or_insert(self, default: Value) -> &'a mut Value {
        self.or_insert_with(|| default)
    }

    pub fn or_insert_with<F: FnOnce() -> Value>(self, default: F) -> &'a mut Value {
        let Entry { map, key } = self;
        if !map.contains_key(key.as_str()) {
            map.insert(key.clone(), default());
        }
        map.get_mut(key.as_str())
            .expect("the key was present or has just been inserted")
    }

    pub fn or_default(self) -> &'a mut Value {
        self.or_insert_with(Value::default)
    }

    pub fn and_modify<F: FnOnce(&mut Value)>(self, modify: F) -> Entry<'a> {
        if let Some(value) = self.map.get_mut(self.key.as_str()) {
            modify(value);
        }
        self
    }
}

/// Entries of a [`Map`] by reference, in key order.
pub enum Iter<'a> {
    Small(std::slice::Iter<'a, (String, Value)>),
    Large(btree_map::Iter<'a, String, Value>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Small(it) => it.size_hint(),
            Iter::Large(it) => it.size_hint(),
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(it) => it.next_back().map(|(k, v)| (k, v)),
            Iter::Large(it) => it.next_back(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Entries of a [`Map`] with mutable values, in key order.
pub enum IterMut<'a> {
    Small(std::slice::IterMut<'a, (String, Value)>),
    Large(btree_map::IterMut<'a, String, Value>),
}

impl<'a> Iterator for IterMut<'a> {
    type Item = (&'a String, &'a mut Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            IterMut::Small(it) => it.next().map(|(k, v)| (&*k, v)),
            IterMut::Large(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            IterMut::Small(it) => it.size_hint(),
            IterMut::Large(it) => it.size_hint(),
        }
    }
}

impl DoubleEndedIterator for IterMut<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            IterMut::Small(it) => it.next_back().map(|(k, v)| (&*k, v)),
            IterMut::Large(it) => it.next_back(),
        }
    }
}

impl ExactSizeIterator for IterMut<'_> {}

/// Entries of a [`Map`] by value, in key order.
pub enum IntoIter {
    Small(std::vec::IntoIter<(String, Value)>),
    Large(btree_map::IntoIter<String, Value>),
}

impl Iterator for IntoIter {
    type Item = (String, Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            IntoIter::Small(it) => it.next(),
            IntoIter::Large(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            IntoIter::Small(it) => it.size_hint(),
            IntoIter::Large(it) => it.size_hint(),
        }
    }
}

impl DoubleEndedIterator for IntoIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            IntoIter::Small(it) => it.next_back(),
            IntoIter::Large(it) => it.next_back(),
        }
    }
}

impl ExactSizeIterator for IntoIter {}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = IntoIter;

    fn into_iter(self) -> IntoIter {
        match self.repr {
            Repr::Small(entries) => IntoIter::Small(entries.into_iter()),
            Repr::Large(tree) => IntoIter::Large(tree.into_iter()),
        }
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Value);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Map {
    type Item = (&'a String, &'a mut Value);
    type IntoIter = IterMut<'a>;

    fn into_iter(self) -> IterMut<'a> {
        self.iter_mut()
    }
}

impl Extend<(String, Value)> for Map {
    fn extend<T: IntoIterator<Item = (String, Value)>>(&mut self, entries: T) {
        for (k, v) in entries {
            self.insert(k, v);
        }
    }
}

impl FromIterator<(String, Value)> for Map {
    /// The last value of a key repeated in `entries` wins, as with `insert`.
    fn from_iter<T: IntoIterator<Item = (String, Value)>>(entries: T) -> Map {
        let mut entries: Vec<(String, Value)> = entries.into_iter().collect();
        if entries.len() > SMALL_MAX {
            return Map {
                repr: Repr::Large(Box::new(entries.into_iter().collect())),
            };
        }
        // A stable sort keeps repeated keys in input order; the last of each run is kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<(String, Value)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match unique.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => unique.push(entry),
            }
        }
        unique.shrink_to_fit();
        Map {
            repr: Repr::Small(unique),
        }
    }
}

impl<Q> std::ops::Index<&Q> for Map
where
    String: Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = Value;

    fn index(&self, key: &Q) -> &Value {
        self.get(key).expect("no entry found for key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(map: &Map) -> Vec<&str> {
        map.keys().map(String::as_str).collect()
    }

    #[test]
    fn iterates_in_key_order_whatever_the_insertion_order_and_size() {
        for size in [0, 3, SMALL_MAX, SMALL_MAX + 1, 200] {
            let mut map = Map::new();
            for i in (0..size).rev() {
                map.insert(format!("k{i:04}"), Value::from(i as u64));
            }
            let mut expected: Vec<String> = (0..size).map(|i| format!("k{i:04}")).collect();
            expected.sort();
            assert_eq!(keys(&map), expected, "size {size}");
            assert_eq!(map.len(), size);
            assert_eq!(map.iter().rev().count(), size);
        }
    }

    #[test]
    fn insert_replaces_and_returns_the_old_value_in_both_representations() {
        for size in [2, 40] {
            let mut map: Map = (0..size)
                .map(|i| (format!("k{i}"), Value::from(i as u64)))
                .collect();
            assert_eq!(
                map.insert("k1".into(), Value::Null),
                Some(Value::from(1u64))
            );
            assert_eq!(map.get("k1"), Some(&Value::Null));
            assert_eq!(map.remove("k1"), Some(Value::Null));
            assert!(!map.contains_key("k1"));
            assert_eq!(map.len(), size - 1);
        }
    }

    #[test]
    fn collecting_repeated_keys_keeps_the_last_value() {
        let map: Map = [("b", 1u64), ("a", 2), ("b", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect();
        assert_eq!(keys(&map), ["a", "b"]);
        assert_eq!(map["b"], Value::from(3u64));
    }

    #[test]
    fn entry_inserts_once_and_modifies_in_place() {
        let mut map = Map::new();
        *map.entry("n").or_insert(Value::from(1u64)) = Value::from(2u64);
        map.entry("n").or_insert(Value::from(9u64));
        map.entry("n").and_modify(|v| *v = Value::from(3u64));
        assert_eq!(map["n"], Value::from(3u64));
    }

    #[test]
    fn retain_and_append_work_across_the_size_boundary() {
        let mut big: Map = (0..30)
            .map(|i| (format!("k{i:02}"), Value::from(i as u64)))
            .collect();
        big.retain(|_, v| v.as_u64().is_some_and(|n| n % 2 == 0));
        assert_eq!(big.len(), 15);
        let mut small = Map::new();
        small.insert("a".into(), Value::Null);
        small.append(&mut big);
        assert!(big.is_empty());
        assert_eq!(small.len(), 16);
        assert_eq!(small.keys().next().map(String::as_str), Some("a"));
    }
}
