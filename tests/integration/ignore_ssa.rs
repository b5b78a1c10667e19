//! `spec.ignore` in the apply engine, after fluxcd/pkg `ssa` v0.76.1's
//! `manager_apply_ignore_test.go`, scenario by scenario: an ignored field another
//! server-side-apply manager took is left to it (we stop owning it), one an update wrote or
//! nobody else owns keeps its live value (we own it), a create sends everything, selectors and
//! paths scope the rules, and managers taken over (`kubectl`, `--override-manager`) count as
//! ours, so their values are kept rather than deleted.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kustomize_controller::api::{IgnoreRule, Selector};
use kustomize_controller::apply::{AppliedCache, Applier, ApplyOptions, IgnoreRules};
use kustomize_controller::objects::{Action, Owner};
use serde_json::{Value, json};

use crate::support::cluster::{TestCluster, unique};

const FLUX: &str = "kustomize-controller";
const IMAGE: &str = "ghcr.io/stefanprodan/podinfo:6.0.0";

/// ssa's `driftIgnoreTestDeployment`: two replicas, a scrape annotation on the template, one
/// container `podinfod`.
fn deployment(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name},
                    "annotations": {"prometheus.io/scrape": "true"}},
                "spec": {"containers": [{"name": "podinfod",
                    "image": "ghcr.io/stefanprodan/podinfo:6.0.0"}]}}}})
}

/// A minimal Deployment as another controller applies it: selector, template labels and the
/// container with its image, plus `spec`.
fn minimal(name: &str, namespace: &str, spec: Value, container: Value) -> Value {
    let mut container_fields = json!({"name": "podinfod"});
    if let (Some(fields), Some(extra)) = (container_fields.as_object_mut(), container.as_object()) {
        fields.extend(extra.clone());
    }
    let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [container_fields]}}}});
    if let (Some(fields), Some(extra)) = (object["spec"].as_object_mut(), spec.as_object()) {
        fields.extend(extra.clone());
    }
    object
}

fn rule(paths: &[&str], kind: Option<&str>, name: Option<&str>) -> IgnoreRule {
    IgnoreRule {
        paths: paths.iter().map(|p| p.to_string()).collect(),
        target: Some(Selector {
            kind: kind.map(str::to_string),
            name: name.map(str::to_string),
            ..Default::default()
        }),
    }
}

struct Scene {
    cluster: TestCluster,
    name: String,
    api: Api<DynamicObject>,
}

impl Scene {
    async fn start(prefix: &str) -> Scene {
        let cluster = TestCluster::start().await;
        let name = unique(prefix);
        let api = Api::namespaced_with(
            cluster.client.clone(),
            &cluster.namespace,
            &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
        );
        Scene { cluster, name, api }
    }

    fn deployment(&self) -> Value {
        deployment(&self.name, &self.cluster.namespace)
    }

    fn minimal(&self, spec: Value, container: Value) -> Value {
        minimal(&self.name, &self.cluster.namespace, spec, container)
    }

    /// Our apply of `object` with `rules` (and `--override-manager` names), as one
    /// reconciliation makes it; the action it reports.
    async fn apply(&self, object: &Value, rules: &[IgnoreRule], overrides: &[&str]) -> Action {
        let options = ApplyOptions {
            override_managers: overrides.iter().map(|m| m.to_string()).collect(),
            ..ApplyOptions::default()
        };
        let engine = Applier::new(
            self.cluster.client.clone(),
            options,
            Owner {
                name: "apps".into(),
                namespace: "flux-system".into(),
            },
            None,
            IgnoreRules::new(rules).unwrap(),
            AppliedCache::default(),
        );
        let changes = engine.apply_all(vec![object.clone()]).await.unwrap();
        changes.changes[0].action
    }

    /// Another manager's server-side apply.
    async fn apply_as(&self, manager: &str, force: bool, object: Value) -> Result<(), kube::Error> {
        let mut params = PatchParams::apply(manager);
        params.force = force;
        self.api
            .patch(&self.name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
    }

    /// Another manager's server-side apply of the replica count alone (an autoscaler's).
    async fn scale_as(&self, manager: &str, force: bool, replicas: i64) {
        let object = self.minimal(json!({"replicas": replicas}), json!({"image": IMAGE}));
        self.apply_as(manager, force, object).await.unwrap();
    }

    /// A client-side edit (an `Update` by the test's client), as `kubectl edit` makes one.
    async fn edit(&self, patch: Value) {
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
    }

    async fn live(&self) -> Value {
        serde_json::to_value(self.api.get(&self.name).await.unwrap()).unwrap()
    }
}

/// Whether `manager`'s Apply entry (none on a subresource) mentions `field` (a fieldsV1 key
/// such as `f:replicas`), as ssa's tests read ownership.
fn owns(live: &Value, manager: &str, field: &str) -> bool {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager && e["operation"] == "Apply")
        .any(|e| e["fieldsV1"].to_string().contains(&format!("\"{field}\"")))
}

fn has_apply_entry(live: &Value, manager: &str) -> bool {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["manager"] == manager && e["operation"] == "Apply")
}

/// Sets the field at `pointer` (its parent object exists).
fn set(object: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    object.pointer_mut(parent).unwrap()[key] = value;
}

/// `TestApply_DriftIgnoreRules_OptionalFields`: a create sends the ignored fields; fields two
/// other appliers took are left to them; a field its applier released keeps its live value.
#[tokio::test]
async fn ignored_optional_fields_follow_their_appliers() {
    let scene = Scene::start("optional").await;
    let rules = [
        rule(&["/spec/replicas"], Some("Deployment"), None),
        rule(
            &["/spec/template/metadata/annotations"],
            Some("Deployment"),
            None,
        ),
    ];
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Created);
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 2);
    assert!(owns(&live, FLUX, "f:replicas") && owns(&live, FLUX, "f:prometheus.io/scrape"));

    // Other controllers claim the fields.
    scene.scale_as("vpa-controller", true, 5).await;
    let mut annotated = scene.minimal(json!({}), json!({"image": IMAGE}));
    annotated["spec"]["template"]["metadata"]["annotations"] =
        json!({"prometheus.io/scrape": "false", "prometheus.io/port": "8080"});
    scene
        .apply_as("monitoring-controller", true, annotated)
        .await
        .unwrap();
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 5);
    assert!(owns(&live, "vpa-controller", "f:replicas"));
    assert!(owns(
        &live,
        "monitoring-controller",
        "f:prometheus.io/scrape"
    ));

    // Our next apply leaves them to their owners.
    set(&mut desired, "/spec/minReadySeconds", json!(10));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Configured);
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 5);
    for field in [
        "f:replicas",
        "f:prometheus.io/scrape",
        "f:prometheus.io/port",
    ] {
        assert!(!owns(&live, FLUX, field), "{field}");
    }

    // The autoscaler releases replicas (applies without it): the live value is adopted.
    scene
        .apply_as(
            "vpa-controller",
            false,
            scene.minimal(json!({}), json!({"image": IMAGE})),
        )
        .await
        .unwrap();
    let released = scene.live().await["spec"]["replicas"].clone();
    assert!(released.is_number(), "replicas defaulted: {released}");
    set(&mut desired, "/spec/minReadySeconds", json!(11));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Configured);
    assert_eq!(scene.live().await["spec"]["replicas"], released);
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Unchanged);
}

/// `TestApply_DriftIgnoreRules_RequiredMutableField` and `_ContainerResources`: fields of a
/// list item (the container, by its merge key) taken by another applier are left to it.
#[tokio::test]
async fn ignored_fields_of_a_list_item_are_left_to_their_applier() {
    let scene = Scene::start("item").await;
    let rules = [rule(
        &[
            "/spec/template/spec/containers/0/image",
            "/spec/template/spec/containers/0/resources",
        ],
        Some("Deployment"),
        None,
    )];
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Created);
    scene
        .apply_as(
            "image-policy-controller",
            true,
            scene.minimal(
                json!({}),
                json!({"image": "ghcr.io/stefanprodan/podinfo:6.2.0"}),
            ),
        )
        .await
        .unwrap();
    let resources = json!({"limits": {"cpu": "4", "memory": "1Gi"},
        "requests": {"cpu": "2", "memory": "256Mi"}});
    let mut sized = scene.minimal(json!({}), json!({"resources": resources}));
    // The autoscaler sends no image: the field stays the image policy's.
    sized["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    scene.apply_as("vpa-controller", true, sized).await.unwrap();

    set(&mut desired, "/spec/minReadySeconds", json!(12));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Configured);
    let live = scene.live().await;
    let container = &live["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "ghcr.io/stefanprodan/podinfo:6.2.0");
    assert_eq!(container["resources"], resources);
    assert!(!owns(&live, FLUX, "f:image") && !owns(&live, FLUX, "f:resources"));
    assert!(owns(&live, "image-policy-controller", "f:image"));
    assert!(owns(&live, "vpa-controller", "f:resources"));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Unchanged);
}

/// `TestApply_DriftIgnoreRules_CreateSkipsIgnore` and `_ClientSideEditConsequences`: a create
/// sends the ignored field; one a client-side edit changed keeps the edit, and is ours again.
#[tokio::test]
async fn an_ignored_field_edited_client_side_keeps_the_edit_and_stays_ours() {
    let scene = Scene::start("edited").await;
    let rules = [rule(
        &["/spec/replicas", "/spec/template/spec/containers/0/image"],
        Some("Deployment"),
        None,
    )];
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Created);
    assert_eq!(
        scene.live().await["spec"]["replicas"],
        2,
        "a create sends it"
    );
    scene
        .edit(
            json!({"spec": {"replicas": 10, "template": {"spec": {"containers": [
            {"name": "podinfod", "image": "ghcr.io/stefanprodan/podinfo:6.5.0"}]}}}}),
        )
        .await;
    set(&mut desired, "/spec/minReadySeconds", json!(60));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Configured);
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 10);
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/stefanprodan/podinfo:6.5.0"
    );
    assert!(owns(&live, FLUX, "f:replicas"), "adopted, not left out");
}

/// `TestApply_DriftIgnoreRules_TwoPhaseOwnershipLifecycle` and `_SharedMutableCoOwnership`: a
/// field co-owned at our value is left as it is (no write); once another applier takes it
/// with force, our next apply stops owning it, and the one after writes nothing.
#[tokio::test]
async fn a_co_owned_ignored_field_is_let_go_once_another_applier_takes_it() {
    let scene = Scene::start("shared").await;
    let rules = [rule(&["/spec/replicas"], Some("Deployment"), None)];
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &[], &[]).await, Action::Created);
    scene.scale_as("hpa-controller", false, 2).await;
    let live = scene.live().await;
    assert!(owns(&live, FLUX, "f:replicas") && owns(&live, "hpa-controller", "f:replicas"));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Unchanged);
    let live = scene.live().await;
    assert!(owns(&live, FLUX, "f:replicas") && owns(&live, "hpa-controller", "f:replicas"));

    scene.scale_as("hpa-controller", true, 10).await;
    set(&mut desired, "/spec/minReadySeconds", json!(55));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Configured);
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 10);
    assert!(!owns(&live, FLUX, "f:replicas"));
    assert!(owns(&live, "hpa-controller", "f:replicas"));
    assert_eq!(scene.apply(&desired, &rules, &[]).await, Action::Unchanged);
}

/// `TestApply_DriftIgnoreRules_FieldManagerCleanupInteraction`, and the same with Flux's own
/// cleanup of `kubectl apply --server-side --force-conflicts`: a manager whose fields the
/// apply takes over is not another applier, so an ignored field it set keeps its value, now
/// ours (leaving it out after taking it over would delete it).
#[tokio::test]
async fn an_ignored_field_of_a_manager_taken_over_keeps_its_value() {
    for (manager, overrides) in [
        ("vpa-controller", &["vpa-controller"][..]),
        ("kubectl", &[][..]),
    ] {
        let scene = Scene::start("cleanup").await;
        let rules = [rule(&["/spec/replicas"], Some("Deployment"), None)];
        let mut desired = scene.deployment();
        assert_eq!(
            scene.apply(&desired, &rules, overrides).await,
            Action::Created
        );
        scene.scale_as(manager, true, 5).await;
        assert_eq!(scene.live().await["spec"]["replicas"], 5);
        set(&mut desired, "/spec/minReadySeconds", json!(80));
        assert_eq!(
            scene.apply(&desired, &rules, overrides).await,
            Action::Configured,
            "{manager}"
        );
        let live = scene.live().await;
        assert_eq!(live["spec"]["replicas"], 5, "{manager}");
        assert!(!has_apply_entry(&live, manager), "{manager}");
        assert!(owns(&live, FLUX, "f:replicas"), "{manager}");
    }
}

/// `TestApply_DriftIgnoreRules_SelectorAndPaths`: a rule for another kind or another name
/// leaves the field ours to change; a path that does not exist, or runs through a number,
/// changes nothing; of one rule's paths only those another applier took are left out.
#[tokio::test]
async fn ignore_rules_apply_only_where_their_selector_and_paths_reach() {
    let scene = Scene::start("scoped").await;
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &[], &[]).await, Action::Created);
    let scoped_elsewhere = [
        rule(&["/spec/minReadySeconds"], Some("Service"), None),
        rule(
            &["/spec/minReadySeconds"],
            Some("Deployment"),
            Some("nonexistent"),
        ),
        rule(&["/spec/nonExistentField"], Some("Deployment"), None),
        rule(&["/spec/replicas/invalid"], Some("Deployment"), None),
    ];
    for (seconds, rule) in (20..).zip(scoped_elsewhere) {
        set(&mut desired, "/spec/minReadySeconds", json!(seconds));
        assert_eq!(
            scene
                .apply(&desired, std::slice::from_ref(&rule), &[])
                .await,
            Action::Configured,
            "{rule:?}"
        );
        assert_eq!(scene.live().await["spec"]["minReadySeconds"], seconds);
    }

    // Two paths in one rule: replicas taken by the autoscaler, minReadySeconds still ours.
    scene.scale_as("vpa-controller", true, 8).await;
    let both = [rule(
        &["/spec/replicas", "/spec/minReadySeconds"],
        Some("Deployment"),
        None,
    )];
    desired["metadata"]["annotations"] = json!({"example.com/trigger": "true"});
    assert_eq!(scene.apply(&desired, &both, &[]).await, Action::Configured);
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 8);
    assert!(!owns(&live, FLUX, "f:replicas"));
    assert!(owns(&live, FLUX, "f:minReadySeconds"));
    assert_eq!(
        live["metadata"]["annotations"]["example.com/trigger"],
        "true"
    );
}

/// ssa matches a rule's selector on the dry-run's answer, which carries the live object's
/// labels: a label another manager put on the object selects it as one in the manifest does.
#[tokio::test]
async fn a_label_another_manager_set_selects_the_object_for_a_rule() {
    let scene = Scene::start("labelled").await;
    let mut desired = scene.deployment();
    assert_eq!(scene.apply(&desired, &[], &[]).await, Action::Created);
    scene
        .edit(json!({"metadata": {"labels": {"autoscaled": "true"}}}))
        .await;
    scene.scale_as("vpa-controller", true, 6).await;
    let selected = IgnoreRule {
        paths: vec!["/spec/replicas".into()],
        target: Some(Selector {
            label_selector: Some("autoscaled=true".into()),
            ..Default::default()
        }),
    };
    set(&mut desired, "/spec/minReadySeconds", json!(9));
    assert_eq!(
        scene.apply(&desired, &[selected], &[]).await,
        Action::Configured
    );
    let live = scene.live().await;
    assert_eq!(live["spec"]["replicas"], 6, "left to the autoscaler");
    assert!(!owns(&live, FLUX, "f:replicas"));
    assert_eq!(live["metadata"]["labels"]["autoscaled"], "true");
}
