use super::*;

use serde_json::json;

fn spec(path: &str) -> KustomizationSpec {
    serde_json::from_value(json!({
        "interval": "10m", "prune": true, "path": path,
        "sourceRef": {"kind": "GitRepository", "name": "repo"},
    }))
    .unwrap()
}

fn facts<'a>(
    spec: &'a KustomizationSpec,
    variables: &'a BTreeMap<String, String>,
    limits: &'a crate::kustomize::Limits,
) -> BuildFacts<'a> {
    BuildFacts {
        artifact_digest: "sha256:aaaa",
        artifact_url: "http://source-controller/gitrepository/apps/repo/aaaa.tar.gz",
        spec,
        variables,
        strict_substitution: true,
        limits,
        remote_allowed: true,
    }
}

/// Every input a build reads changes the digest; nothing else is needed to tell two builds
/// apart.
#[test]
fn each_input_a_build_reads_changes_its_digest() {
    let base_spec = spec("./apps");
    let variables = BTreeMap::from([("cluster".to_string(), "prod".to_string())]);
    let limits = crate::kustomize::Limits::default();
    let base = facts(&base_spec, &variables, &limits).cacheable().unwrap();
    assert_eq!(
        facts(&base_spec, &variables, &limits).cacheable(),
        Some(base),
        "the same inputs, the same digest"
    );
    let other_path = spec("./infra");
    let mut patched = spec("./apps");
    patched.patches =
        serde_json::from_value(json!([{"patch": "- op: remove\n  path: /x"}])).unwrap();
    let mut prefixed = spec("./apps");
    prefixed.name_prefix = Some("p-".into());
    let other_variables = BTreeMap::from([("cluster".to_string(), "staging".to_string())]);
    let tighter = crate::kustomize::Limits {
        max_depth: 3,
        ..limits
    };
    let changed: Vec<(&str, Option<BuildInputs>)> = vec![
        (
            "artifact",
            BuildFacts {
                artifact_digest: "sha256:bbbb",
                ..facts(&base_spec, &variables, &limits)
            }
            .cacheable(),
        ),
        (
            "artifact URL",
            BuildFacts {
                artifact_url: "http://source-controller/gitrepository/apps/repo/moved.tar.gz",
                ..facts(&base_spec, &variables, &limits)
            }
            .cacheable(),
        ),
        ("path", facts(&other_path, &variables, &limits).cacheable()),
        ("patches", facts(&patched, &variables, &limits).cacheable()),
        (
            "namePrefix",
            facts(&prefixed, &variables, &limits).cacheable(),
        ),
        (
            "variables",
            facts(&base_spec, &other_variables, &limits).cacheable(),
        ),
        (
            "strict substitution",
            BuildFacts {
                strict_substitution: false,
                ..facts(&base_spec, &variables, &limits)
            }
            .cacheable(),
        ),
        (
            "limits",
            facts(&base_spec, &variables, &tighter).cacheable(),
        ),
        (
            "remote bases",
            BuildFacts {
                remote_allowed: false,
                ..facts(&base_spec, &variables, &limits)
            }
            .cacheable(),
        ),
    ];
    for (input, digest) in changed {
        let digest = digest.unwrap_or_else(|| panic!("{input}: still cacheable"));
        assert_ne!(digest, base, "{input} changes the digest");
    }
}

#[test]
fn builds_that_decrypt_or_have_no_artifact_digest_are_never_kept() {
    let mut decrypting = spec("./apps");
    decrypting.decryption =
        serde_json::from_value(json!({"provider": "sops", "secretRef": {"name": "keys"}})).unwrap();
    let variables = BTreeMap::new();
    let limits = crate::kustomize::Limits::default();
    assert_eq!(facts(&decrypting, &variables, &limits).cacheable(), None);
    let plain = spec("./apps");
    let undigested = BuildFacts {
        artifact_digest: "",
        ..facts(&plain, &variables, &limits)
    };
    assert_eq!(undigested.cacheable(), None);
}

fn key(name: &str) -> KustomizationKey {
    KustomizationKey::new("apps", name)
}

fn inputs(byte: u8) -> BuildInputs {
    BuildInputs([byte; 32])
}

fn objects(name: &str) -> Vec<Value> {
    vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})]
}

#[test]
fn a_build_is_served_only_for_the_inputs_it_was_made_from() {
    let metrics = BuildCacheMetrics::default();
    let cache = BuildCache::new(DEFAULT_CAPACITY, metrics.clone());
    assert_eq!(cache.get(&key("a"), inputs(1)), None, "nothing built yet");
    cache.put(&key("a"), inputs(1), &objects("a"), "sha256:1");
    assert_eq!(
        cache.get(&key("a"), inputs(1)),
        Some((objects("a"), "sha256:1".to_string()))
    );
    assert_eq!(cache.get(&key("a"), inputs(2)), None, "other inputs");
    assert_eq!(
        cache.get(&key("b"), inputs(1)),
        None,
        "another Kustomization"
    );
    cache.put(&key("a"), inputs(2), &objects("a2"), "sha256:2");
    assert_eq!(cache.get(&key("a"), inputs(1)), None, "replaced");
    assert_eq!(
        cache.get(&key("a"), inputs(2)).map(|(_, digest)| digest),
        Some("sha256:2".to_string())
    );
    cache.forget(&key("a"));
    assert_eq!(cache.get(&key("a"), inputs(2)), None, "forgotten");
    assert_eq!((metrics.hits.get(), metrics.misses.get()), (2, 5));
    assert_eq!(metrics.bytes.get(), 0);
}

#[test]
fn the_least_recently_used_builds_go_first_when_over_capacity() {
    let size = serde_json::to_vec(&objects("a")).unwrap().len();
    let cache = BuildCache::new(size * 2, BuildCacheMetrics::default());
    cache.put(&key("a"), inputs(1), &objects("a"), "sha256:a");
    cache.put(&key("b"), inputs(1), &objects("b"), "sha256:b");
    // `a` is used again, so `b` is the least recently used when `c` comes.
    assert!(cache.get(&key("a"), inputs(1)).is_some());
    cache.put(&key("c"), inputs(1), &objects("c"), "sha256:c");
    assert!(cache.get(&key("a"), inputs(1)).is_some());
    assert!(cache.get(&key("b"), inputs(1)).is_none(), "evicted");
    assert!(cache.get(&key("c"), inputs(1)).is_some());
    // A build larger than the whole cache is not kept, and leaves the rest alone.
    let large: Vec<Value> = (0..10)
        .map(|i| objects(&format!("big-{i}"))[0].clone())
        .collect();
    cache.put(&key("d"), inputs(1), &large, "sha256:d");
    assert!(cache.get(&key("d"), inputs(1)).is_none());
    assert!(cache.get(&key("a"), inputs(1)).is_some());
    assert!(cache.lock().bytes <= size * 2);
}
