//! Expectations are what `kubectl kustomize` (Kustomize v5.8.1) printed for the same object
//! and patch.

use super::*;
use crate::json;

fn view() -> SchemaView<'static> {
    SchemaView::builtin()
}

fn deployment(pod_spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"template": {"spec": pod_spec}}})
}

fn two_containers() -> Value {
    deployment(json!({"tolerations": [{"key": "t1"}], "containers": [
        {"name": "a", "image": "a"}, {"name": "b", "image": "b"}]}))
}

/// The pod spec after patching [`two_containers`] with `pod_spec`.
fn patched(pod_spec: Value) -> Result<Value, SmpError> {
    let mut object = two_containers();
    apply(
        &mut object,
        &deployment(pod_spec),
        view(),
        &mut Untagged::default(),
    )?;
    Ok(object["spec"]["template"]["spec"].clone())
}

#[test]
fn merges_containers_by_name_and_deletes_with_null() {
    let mut deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"a": "1"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "side:1"}
        ]}}}
    });
    let patch = json!({
        "metadata": {"labels": {"a": null, "b": "2"}},
        "spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}]},
            {"name": "sidecar", "$patch": "delete"},
            {"name": "new", "image": "new:1"}
        ]}}}
    });
    assert_eq!(
        apply(&mut deployment, &patch, view(), &mut Untagged::default()),
        Ok(Outcome::Patched)
    );
    assert_eq!(deployment["metadata"]["labels"], json!({"b": "2"}));
    // Patch elements first, in patch order, then the original ones it did not mention.
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"],
        json!([
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]},
            {"name": "new", "image": "new:1"}
        ])
    );
}

#[test]
fn lists_without_merge_keys_are_replaced_and_replace_directive_works() {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {
        "tolerations": [{"key": "a"}], "nodeSelector": {"x": "1", "y": "2"}}});
    let patch = json!({"spec": {"tolerations": [{"key": "b"}], "nodeSelector": {"$patch": "replace", "z": "3"}}});
    apply(&mut pod, &patch, view(), &mut Untagged::default()).unwrap();
    assert_eq!(pod["spec"]["tolerations"], json!([{"key": "b"}]));
    assert_eq!(pod["spec"]["nodeSelector"], json!({"z": "3"}));
    assert_eq!(
        apply(
            &mut pod,
            &json!({"$patch": "delete"}),
            view(),
            &mut Untagged::default()
        ),
        Ok(Outcome::Deleted)
    );
}

#[test]
fn a_directive_only_element_directs_the_whole_list() {
    // `- $patch: delete` removes the list (the map holding it stays).
    assert_eq!(
        patched(json!({"containers": ["whatever", {"$patch": "delete"}]})).unwrap(),
        json!({"tolerations": [{"key": "t1"}]})
    );
    // `- $patch: replace` leaves the patch's elements only.
    assert_eq!(
        patched(json!({"containers": [{"name": "c", "image": "x"}, {"$patch": "replace"}]}))
            .unwrap()["containers"],
        json!([{"name": "c", "image": "x"}])
    );
    // `- $patch: merge` is the default, and goes.
    assert_eq!(
        patched(json!({"containers": [{"name": "c", "image": "x"}, {"$patch": "merge"}]})).unwrap()
            ["containers"],
        json!([{"name": "c", "image": "x"}, {"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    );
}

#[test]
fn an_unknown_directive_fails_the_patch() {
    assert_eq!(
        patched(json!({"containers": [{"$patch": "foo"}]})),
        Err(SmpError::UnknownStrategy("foo".into()))
    );
    assert_eq!(
        patched(json!({"affinity": {"$patch": "foo"}, "tolerations": null})).map(|_| ()),
        Ok(()),
        "adding a map, kustomize does not read its directive"
    );
}

#[test]
fn kyaml_quirks_are_kept() {
    // An element's own `$patch: replace` keeps the object's element as it was.
    assert_eq!(
        patched(json!({"containers": [{"name": "a", "$patch": "replace", "command": ["z"]}]}))
            .unwrap()["containers"],
        json!([{"name": "a", "image": "a"}, {"name": "b", "image": "b"}])
    );
    // The first `$patch` element has other keys, so the list merges; the directive-only
    // element then has no name, and an empty name matches every named element.
    assert_eq!(
        patched(json!({"containers": [{"name": "a", "$patch": "delete"}, {"$patch": "replace"}, {"name": "c"}]}))
            .unwrap()["containers"],
        json!([{"name": "c"}])
    );
    // A list without a merge strategy is the patch's, directive and all.
    assert_eq!(
        patched(json!({"tolerations": [{"key": "t2"}, {"$patch": "delete"}]})).unwrap()["tolerations"],
        json!([{"key": "t2"}, {"$patch": "delete"}])
    );
    // A keyed list the object lacks is added through the same walk.
    assert_eq!(
        patched(json!({"initContainers": [{"name": "i"}, {"$patch": "delete"}]})).unwrap()["initContainers"],
        json!([{"$patch": "delete"}])
    );
}

#[test]
fn a_patch_of_another_node_kind_is_refused() {
    assert_eq!(
        patched(json!({"containers": {"a": "b"}})),
        Err(SmpError::WrongKind {
            expected: "SequenceNode",
            found: "MappingNode",
            path: "spec.template.spec.containers".into()
        })
    );
    let mut object = two_containers();
    let patch = json!({"spec": {"replicas": {"a": "b"}}});
    let mut with_replicas = object.clone();
    with_replicas["spec"]["replicas"] = json!(1);
    assert!(matches!(
        apply(&mut with_replicas, &patch, view(), &mut Untagged::default()),
        Err(SmpError::WrongKind {
            expected: "ScalarNode",
            ..
        })
    ));
    assert!(
        apply(&mut object, &patch, view(), &mut Untagged::default()).is_ok(),
        "nothing to clash with"
    );
}

#[test]
fn ports_merge_on_port_and_protocol_as_kyaml_sets_them() {
    let mut object = deployment(json!({"containers": [{"name": "a", "ports": [
        {"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]}]}));
    let patch = deployment(json!({"containers": [{"name": "a", "ports": [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 53, "protocol": "TCP"}]}]}));
    apply(&mut object, &patch, view(), &mut Untagged::default()).unwrap();
    assert_eq!(
        object["spec"]["template"]["spec"]["containers"][0]["ports"],
        // The object's port 80 without a protocol is laid over the patch's merged one.
        json!([{"containerPort": 53, "protocol": "TCP"},
               {"containerPort": 80},
               {"containerPort": 53, "protocol": "UDP"}])
    );
}

#[test]
fn untagged_numbers_the_walk_sets_become_strings_and_the_others_stay_untagged() {
    let key = |k: &str| Step::Key(k.into());
    let mut object = deployment(json!({
        "containers": [{"name": "a", "ports": [{"containerPort": 8080}], "args": ["--p", 30]}],
        "priority": 5, "hostname": "web"}));
    let spec = |rest: &[Step]| {
        let mut path = vec![key("spec"), key("template"), key("spec")];
        path.extend_from_slice(rest);
        path
    };
    let container = |rest: &[Step]| {
        let mut path = spec(&[key("containers"), Step::Index(0)]);
        path.extend_from_slice(rest);
        path
    };
    let mut untagged = Untagged::default();
    // A field of a map, a key of an element of a list merged by key, an element of a list of
    // scalars (which the walk does not set anew), and a string (which it leaves untagged).
    untagged.wrote(spec(&[key("priority")]), &json!(5));
    untagged.wrote(spec(&[key("hostname")]), &json!("web"));
    untagged.wrote(
        container(&[key("ports"), Step::Index(0), key("containerPort")]),
        &json!(8080),
    );
    let in_args = container(&[key("args"), Step::Index(1)]);
    untagged.wrote(in_args.clone(), &json!(30));
    let patch = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
        "name": "d", "labels": {"patched": "yes"}}});
    apply(&mut object, &patch, view(), &mut untagged).unwrap();
    let pod = &object["spec"]["template"]["spec"];
    assert_eq!(pod["priority"], json!("5"));
    assert_eq!(
        pod["containers"][0]["ports"][0]["containerPort"],
        json!("8080")
    );
    assert_eq!(pod["containers"][0]["args"], json!(["--p", 30]));
    assert_eq!(pod["hostname"], json!("web"));
    assert_eq!(untagged.paths().len(), 2);
    assert!(untagged.contains(&in_args) && untagged.contains(&spec(&[key("hostname")])));
}
