//! `ssa/manager_apply_test.go`'s MigrateAPIVersion scenarios: a custom resource created at
//! `v1beta1` keeps managed-fields entries at that version after its CRD moves to `v1`; once
//! `v1` defaults a field `v1beta1` does not declare, the server refuses an apply at `v1`
//! (`field not declared in schema`) until every entry is moved to `v1`, which the
//! MigrateAPIVersion gate does before the apply.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kustomize_controller::apply::{ApplyError, ApplyOptions};
use kustomize_controller::objects::Action;
use serde_json::{Value, json};

use super::{manager, prepared};
use crate::support::cluster::{TestCluster, unique, wait_for};

const OURS: &str = "kustomize-controller";
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn migrating() -> ApplyOptions {
    ApplyOptions {
        migrate_api_version: true,
        ..ApplyOptions::default()
    }
}

/// The Widget schema of a version; `v1` later gains `extract.nullBytePolicy`, defaulted.
fn schema(with_default: bool) -> Value {
    let mut extract = json!({"key": {"type": "string"}});
    if with_default {
        extract["nullBytePolicy"] = json!({"type": "string", "default": "Ignore"});
    }
    json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "refreshInterval": {"type": "string"},
            "dataFrom": {"type": "array", "items": {"type": "object", "properties": {
                "extract": {"type": "object", "properties": extract}}}}}},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}})
}

struct Scenario {
    /// Another controller writes the status at `v1beta1`, which stays served.
    stale_third_party_status: bool,
    /// Our own entry is moved to `v1` before `v1` gains the defaulted field.
    own_entry_at_v1: bool,
}

struct Widgets {
    group: String,
    namespace: String,
    status_subresource: bool,
}

impl Widgets {
    fn crd(&self, versions: Value) -> Value {
        let mut versions = versions;
        if self.status_subresource {
            for version in versions.as_array_mut().into_iter().flatten() {
                version["subresources"] = json!({"status": {}});
            }
        }
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{}", self.group)},
            "spec": {"group": self.group, "scope": "Namespaced",
                "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets",
                    "singular": "widget"},
                "versions": versions}})
    }

    fn api(&self, client: &kube::Client, version: &str) -> Api<DynamicObject> {
        let resource = ApiResource {
            group: self.group.clone(),
            version: version.into(),
            api_version: format!("{}/{version}", self.group),
            kind: "Widget".into(),
            plural: "widgets".into(),
        };
        Api::namespaced_with(client.clone(), &self.namespace, &resource)
    }

    async fn wait_until_served(&self, client: &kube::Client, version: &str) {
        let api = self.api(client, version);
        let served = wait_for(TIMEOUT, || async {
            api.list(&Default::default()).await.ok().map(|_| ())
        })
        .await;
        assert!(served.is_some(), "Widget {version} is never served");
    }

    fn widget(&self, version: &str) -> Value {
        json!({"apiVersion": format!("{}/{version}", self.group), "kind": "Widget",
            "metadata": {"name": "test-widget", "namespace": self.namespace},
            "spec": {"dataFrom": [{"extract": {"key": "bar"}}]}})
    }
}

async fn apply_one(client: &kube::Client, options: ApplyOptions, object: &Value) -> Action {
    let set = manager(client, options)
        .apply_all(vec![object.clone()])
        .await
        .unwrap_or_else(|e| panic!("applying {}: {e}", object["kind"]));
    set.changes[0].action
}

/// ssa's `setupMigrateAPIVersionEnv`: the Widget created at `v1beta1`, its CRD moved to `v1`
/// (our entry left at `v1beta1`), the object re-stored at `v1` by another writer, and `v1`
/// given the defaulted field, live once the object read at `v1` has it. Returns the Widget
/// at `v1`.
async fn set_up(cluster: &TestCluster, widgets: &Widgets, scenario: &Scenario) -> Value {
    let client = &cluster.client;
    let version = |name: &str, served: bool, storage: bool, default: bool| json!({"name": name, "served": served, "storage": storage, "schema": schema(default)});
    let crd = widgets.crd(json!([version("v1beta1", true, true, false)]));
    assert_eq!(apply_one(client, migrating(), &crd).await, Action::Created);
    widgets.wait_until_served(client, "v1beta1").await;
    let widget = widgets.widget("v1beta1");
    assert_eq!(
        apply_one(client, migrating(), &widget).await,
        Action::Created
    );

    if scenario.stale_third_party_status {
        let params = PatchParams {
            field_manager: Some("other-controller".into()),
            ..PatchParams::default()
        };
        widgets
            .api(client, "v1beta1")
            .patch_status(
                "test-widget",
                &params,
                &Patch::Merge(json!({"status": {"phase": "Ready"}})),
            )
            .await
            .unwrap();
    }

    let old_served = scenario.stale_third_party_status;
    let crd = widgets.crd(json!([
        version("v1beta1", old_served, false, false),
        version("v1", true, true, false)
    ]));
    apply_one(client, migrating(), &crd).await;
    widgets.wait_until_served(client, "v1").await;

    // Without migration, applying at v1 changes nothing and our entry stays at v1beta1.
    let at_v1 = widgets.widget("v1");
    assert_eq!(
        apply_one(client, ApplyOptions::default(), &at_v1).await,
        Action::Unchanged
    );
    let api = widgets.api(client, "v1");
    let live = serde_json::to_value(api.get("test-widget").await.unwrap()).unwrap();
    assert_eq!(live["apiVersion"], format!("{}/v1", widgets.group));
    for entry in live["metadata"]["managedFields"].as_array().unwrap() {
        if entry["manager"] == OURS {
            assert_eq!(entry["apiVersion"], format!("{}/v1beta1", widgets.group));
        }
    }

    // Another writer stores the object at v1 (the storage-version migrator's work).
    let params = PatchParams {
        field_manager: Some("storage-migrator".into()),
        ..PatchParams::default()
    };
    api.patch(
        "test-widget",
        &params,
        &Patch::Merge(json!({"metadata": {"annotations": {"test/rewritten": "true"}}})),
    )
    .await
    .unwrap();

    if scenario.own_entry_at_v1 {
        let mut promoted = prepared(&at_v1);
        promoted["metadata"]["labels"]["test/promoted"] = json!("true");
        api.patch(
            "test-widget",
            &PatchParams::apply(OURS).force(),
            &Patch::Apply(promoted),
        )
        .await
        .unwrap();
    }

    let crd = widgets.crd(json!([
        version("v1beta1", old_served, false, false),
        version("v1", true, true, true)
    ]));
    apply_one(client, migrating(), &crd).await;
    let defaulted = wait_for(TIMEOUT, || async {
        let live = api.get("test-widget").await.ok()?;
        let live = serde_json::to_value(live).ok()?;
        live.pointer("/spec/dataFrom/0/extract/nullBytePolicy")
            .map(|_| ())
    })
    .await;
    assert!(defaulted.is_some(), "v1's default never shows");
    at_v1
}

fn widgets(cluster: &TestCluster, prefix: &str, status_subresource: bool) -> Widgets {
    Widgets {
        group: format!("{}.example.com", unique(prefix)),
        namespace: cluster.namespace.clone(),
        status_subresource,
    }
}

/// `TestApply_MigrateAPIVersion` and `TestApplyAll_MigrateAPIVersion` (ssa's `Apply` and
/// `ApplyAll` are one call here): refused with `field not declared in schema` without the
/// gate, configured with it.
#[tokio::test]
async fn flux_ssa_apply_migrate_api_version() {
    let cluster = TestCluster::start().await;
    let widgets = widgets(&cluster, "migrate-api-version", false);
    let scenario = Scenario {
        stale_third_party_status: false,
        own_entry_at_v1: false,
    };
    let at_v1 = set_up(&cluster, &widgets, &scenario).await;

    let error = manager(&cluster.client, ApplyOptions::default())
        .apply_all(vec![at_v1.clone()])
        .await
        .unwrap_err();
    assert!(matches!(error, ApplyError::DryRun { .. }), "{error:?}");
    assert!(
        error.to_string().contains("field not declared in schema"),
        "{error}"
    );

    assert_eq!(
        apply_one(&cluster.client, migrating(), &at_v1).await,
        Action::Configured
    );
}

/// `TestApply_MigrateAPIVersion_RealWorldExternalSecrets`: our entry is already at `v1`, but
/// another controller's status entry is still at `v1beta1`, which is enough for the server
/// to refuse the apply; the migration moves every entry, the other controller's too.
#[tokio::test]
async fn flux_ssa_apply_migrate_api_version_real_world_external_secrets() {
    let cluster = TestCluster::start().await;
    let widgets = widgets(&cluster, "migrate-api-version-real-world-eso", true);
    let scenario = Scenario {
        stale_third_party_status: true,
        own_entry_at_v1: true,
    };
    let at_v1 = set_up(&cluster, &widgets, &scenario).await;

    let bare = widgets
        .api(&cluster.client, "v1")
        .patch(
            "test-widget",
            &PatchParams::apply(OURS).force().dry_run(),
            &Patch::Apply(prepared(&at_v1)),
        )
        .await
        .unwrap_err();
    assert!(
        bare.to_string()
            .contains(".spec.dataFrom[0].extract.nullBytePolicy: field not declared in schema"),
        "{bare}"
    );

    manager(&cluster.client, migrating())
        .apply_all(vec![at_v1])
        .await
        .unwrap();
}
