//! The engine stays a pure library: nothing in its dependency tree (as the workspace's
//! Cargo.lock resolves it) reaches a Kubernetes client, an async runtime or the network.

use std::collections::{BTreeMap, BTreeSet};

#[test]
fn no_kube_runtime_or_network_crate_is_in_the_engines_tree() {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock"))
        .expect("the workspace's Cargo.lock");
    // name → dependency names, for every package of the lock file.
    let mut packages: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|line| line.strip_prefix("name = "))
            .map(|name| name.trim_matches('"').to_string())
            .expect("a package name");
        let dependencies: Vec<String> = block
            .split("dependencies = [")
            .nth(1)
            .map(|list| {
                list.split(']')
                    .next()
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|line| line.trim().trim_end_matches(',').strip_prefix('"'))
                    .filter_map(|entry| entry.split([' ', '"']).next())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        packages.entry(name).or_default().extend(dependencies);
    }
    let tree_of = |root: &str| {
        let mut tree = BTreeSet::new();
        let mut pending = vec![root.to_string()];
        while let Some(name) = pending.pop() {
            if tree.insert(name.clone()) {
                pending.extend(packages.get(&name).cloned().unwrap_or_default());
            }
        }
        tree
    };
    // The walk reaches transitive dependencies: the controller's tree has the runtime.
    assert!(tree_of("kustomize-controller").contains("tokio"));
    let tree = tree_of("kustomize-engine");
    assert!(
        tree.contains("granit-parser"),
        "the tree was read: {tree:?}"
    );
    let forbidden: Vec<&String> = tree
        .iter()
        .filter(|name| {
            [
                "kube",
                "k8s-openapi",
                "tokio",
                "hyper",
                "reqwest",
                "rustls",
                "gix",
                "mio",
            ]
            .iter()
            .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    assert!(forbidden.is_empty(), "{forbidden:?} in the engine's tree");
}
