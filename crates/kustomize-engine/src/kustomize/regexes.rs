//! Compiled regular expressions, shared across builds, read as Go's `regexp` reads them.
//!
//! Patch targets and image names compile to the same few patterns again and again (every
//! overlay of a tree repeats them), and compiling a regex costs far more than matching it.
//! The cache is bounded so a long-running controller cannot grow it without limit.
//!
//! kustomize's patterns are Go RE2 syntax, read as Go reads them ([`go_std::regexp`]): a `{`
//! that starts no repetition is a literal (`${VAR}` in a Flux kustomization, to be substituted
//! after the build, is no error), `\d` is ASCII, `a**` is refused.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use regex::Regex;

const CAPACITY: usize = 1024;

/// `pattern` compiled, from the cache when it was compiled before.
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(regex) = cache.lock().ok().and_then(|c| c.get(pattern).cloned()) {
        return Ok(regex);
    }
    let regex = go_std::regexp::compile(pattern)?;
    if let Ok(mut cache) = cache.lock() {
        if cache.len() >= CAPACITY {
            cache.clear();
        }
        cache.insert(pattern.to_string(), regex.clone());
    }
    Ok(regex)
}
