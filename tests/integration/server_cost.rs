//! `make bench-server-cost`: what each kind of request the controller (and the controller
//! benchmark) sends costs a real kube-apiserver in CPU, measured by sending a batch of one kind
//! at a time and reading the server's own `process_cpu_seconds_total` before and after. The
//! idle cost (controller-manager, leases) is measured first and taken off each batch, so a
//! figure is what the requests themselves cost. Needs a real API server (`TEST_KUBECONFIG`);
//! in process it says so and returns. `BENCH_N` requests per kind (default 1,000), 4 at a time
//! as the controller's `--concurrent` default sends them.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::support::cluster::TestCluster;

const IN_FLIGHT: usize = 4;

/// The API server's `process_cpu_seconds_total`, if it serves one.
async fn server_cpu(client: &kube::Client) -> Option<f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let page = client.request_text(request).await.ok()?;
    page.lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))
        .and_then(|v| v.trim().parse().ok())
}

struct Meter {
    client: kube::Client,
    /// The server's idle CPU, seconds per second.
    idle: f64,
}

impl Meter {
    /// Runs `count` requests made by `request(i)`, `IN_FLIGHT` at a time, and prints the
    /// server's CPU per request beyond its idle cost.
    async fn measure<F, Fut>(&self, kind: &str, count: usize, request: F)
    where
        F: Fn(usize) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let before = server_cpu(&self.client).await.unwrap();
        let started = Instant::now();
        futures::stream::iter(0..count)
            .map(&request)
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<()>>()
            .await;
        let took = started.elapsed().as_secs_f64();
        let used = server_cpu(&self.client).await.unwrap() - before;
        let own = used - self.idle * took;
        println!(
            "server-cost: {kind:<58} {:>6.2} ms per request ({:>5.1} s CPU, {took:>5.1} s)",
            own * 1000.0 / count as f64,
            used
        );
    }
}

fn kustomization(ns: &str, i: usize) -> Value {
    json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": format!("cost-{i}"), "namespace": ns},
        "spec": {"interval": "1h", "prune": true, "targetNamespace": ns,
            "namePrefix": format!("cost-{i}-"),
            "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    })
}

/// A Ready status as the controller writes it after a first apply of four objects.
fn ready_status(ns: &str, i: usize, handled: &str) -> Value {
    let entry = |group_kind: &str, version: &str| json!({"id": format!("{ns}_cost-{i}-app_{group_kind}"), "v": version});
    json!({"status": {
        "observedGeneration": 1,
        "lastAppliedRevision": "main@sha1:1111",
        "lastAttemptedRevision": "main@sha1:1111",
        "lastHandledReconcileAt": handled,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
            "message": "Applied revision: main@sha1:1111", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-27T00:00:00Z"}],
        "inventory": {"entries": [entry("_ServiceAccount", "v1"), entry("_ConfigMap", "v1"),
            entry("_Secret", "v1"), entry("_Service", "v1")]},
        "history": [{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "firstReconciled": "2026-11-27T00:00:00Z", "lastReconciled": "2026-11-27T00:00:00Z",
            "lastReconciledDuration": "12.3ms", "lastReconciledStatus": "ReconciliationSucceeded",
            "totalReconciliations": 1, "metadata": {"revision": "main@sha1:1111"}}],
    }})
}

fn config_map(ns: &str, i: usize, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cost-{i}-app"), "namespace": ns,
            "labels": {"kustomize.toolkit.fluxcd.io/name": format!("cost-{i}"),
                "kustomize.toolkit.fluxcd.io/namespace": ns}},
        "data": {"key": value}})
}

fn event(ns: &str, i: usize, n: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("cost-{i}.{n:x}"), "namespace": ns},
        "involvedObject": {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "name": format!("cost-{i}"), "namespace": ns},
        "reason": "ReconciliationSucceeded",
        "message": "Reconciliation finished in 12ms, next run in 1h0m0s",
        "type": "Normal", "source": {"component": "kustomize-controller"},
        "reportingComponent": "kustomize-controller",
        "firstTimestamp": "2026-11-27T00:00:00Z", "lastTimestamp": "2026-11-27T00:00:00Z",
        "count": 1})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark; run by make bench-server-cost"]
async fn server_cost_by_request_kind() {
    let cluster = TestCluster::start().await;
    let client = cluster.client.clone();
    if server_cpu(&client).await.is_none() {
        println!(
            "server-cost: the API server serves no process_cpu_seconds_total; nothing to measure"
        );
        return;
    }
    let count = std::env::var("BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000usize);
    let ns = cluster.namespace.clone();
    let idle_before = server_cpu(&client).await.unwrap();
    let idle_for = Duration::from_secs(10);
    let started = Instant::now();
    tokio::time::sleep(idle_for).await;
    let idle = (server_cpu(&client).await.unwrap() - idle_before) / started.elapsed().as_secs_f64();
    println!(
        "server-cost: idle {:.1} ms of CPU per second",
        idle * 1000.0
    );
    let meter = Meter {
        client: client.clone(),
        idle,
    };

    let kustomizations: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::discovery::ApiResource {
            group: "kustomize.toolkit.fluxcd.io".into(),
            version: "v1".into(),
            api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
            kind: "Kustomization".into(),
            plural: "kustomizations".into(),
        },
    );
    let config_maps: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Event>(&()),
    );
    let object = |value: Value| serde_json::from_value::<DynamicObject>(value).unwrap();
    let apply = PatchParams::apply("kustomize-controller").force();
    let dry_apply = PatchParams::apply("kustomize-controller").force().dry_run();
    let status_manager = PatchParams {
        field_manager: Some("gotk-kustomize-controller".into()),
        ..Default::default()
    };

    meter
        .measure("create Kustomization (the benchmark's)", count, |i| {
            let (api, ns) = (&kustomizations, &ns);
            async move {
                api.create(&PostParams::default(), &object(kustomization(ns, i)))
                    .await
                    .unwrap();
            }
        })
        .await;
    meter
        .measure(
            "merge-patch status, first (Ready, inventory, history)",
            count,
            |i| {
                let (api, ns, pp) = (&kustomizations, &ns, &status_manager);
                async move {
                    api.patch_status(
                        &format!("cost-{i}"),
                        pp,
                        &Patch::Merge(ready_status(ns, i, "a")),
                    )
                    .await
                    .unwrap();
                }
            },
        )
        .await;
    meter
        .measure("merge-patch annotation requestedAt (the benchmark's)", count, |i| {
            let api = &kustomizations;
            async move {
                let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "b"}}});
                api.patch(&format!("cost-{i}"), &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .unwrap();
            }
        })
        .await;
    meter
        .measure("merge-patch status, lastHandledReconcileAt and history", count, |i| {
            let (api, pp) = (&kustomizations, &status_manager);
            async move {
                let patch = json!({"status": {"lastHandledReconcileAt": "b",
                    "history": [{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                        "firstReconciled": "2026-11-27T00:00:00Z", "lastReconciled": "2026-11-27T00:10:00Z",
                        "lastReconciledDuration": "1.2ms", "lastReconciledStatus": "ReconciliationSucceeded",
                        "totalReconciliations": 2, "metadata": {"revision": "main@sha1:1111"}}]}});
                api.patch_status(&format!("cost-{i}"), pp, &Patch::Merge(patch))
                    .await
                    .unwrap();
            }
        })
        .await;
    let mut watch = kustomizations
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = watch.try_next().await {} });
    meter
        .measure(
            "merge-patch status again, a Kustomization watch open",
            count,
            |i| {
                let (api, pp) = (&kustomizations, &status_manager);
                async move {
                    let patch = json!({"status": {"lastHandledReconcileAt": "c"}});
                    api.patch_status(&format!("cost-{i}"), pp, &Patch::Merge(patch))
                        .await
                        .unwrap();
                }
            },
        )
        .await;
    drain.abort();
    meter
        .measure("merge-patch status again, no watch of ours", count, |i| {
            let (api, pp) = (&kustomizations, &status_manager);
            async move {
                let patch = json!({"status": {"lastHandledReconcileAt": "d"}});
                api.patch_status(&format!("cost-{i}"), pp, &Patch::Merge(patch))
                    .await
                    .unwrap();
            }
        })
        .await;
    meter
        .measure(
            "server-side apply status (forced, whole status)",
            count,
            |i| {
                let (api, ns, pp) = (&kustomizations, &ns, &apply);
                async move {
                    let mut status = ready_status(ns, i, "e");
                    status["apiVersion"] = json!("kustomize.toolkit.fluxcd.io/v1");
                    status["kind"] = json!("Kustomization");
                    api.patch_status(&format!("cost-{i}"), pp, &Patch::Apply(status))
                        .await
                        .unwrap();
                }
            },
        )
        .await;
    meter
        .measure("create Event", count, |i| {
            let (api, ns) = (&events, &ns);
            async move {
                api.create(&PostParams::default(), &object(event(ns, i, 1)))
                    .await
                    .unwrap();
            }
        })
        .await;
    meter
        .measure("server-side dry-run of an absent ConfigMap", count, |i| {
            let (api, ns, pp) = (&config_maps, &ns, &dry_apply);
            async move {
                api.patch(
                    &format!("cost-{i}-app"),
                    pp,
                    &Patch::Apply(config_map(ns, i, "one")),
                )
                .await
                .unwrap();
            }
        })
        .await;
    meter
        .measure("server-side apply creating a ConfigMap", count, |i| {
            let (api, ns, pp) = (&config_maps, &ns, &apply);
            async move {
                api.patch(
                    &format!("cost-{i}-app"),
                    pp,
                    &Patch::Apply(config_map(ns, i, "one")),
                )
                .await
                .unwrap();
            }
        })
        .await;
    meter
        .measure(
            "server-side dry-run of an unchanged ConfigMap",
            count,
            |i| {
                let (api, ns, pp) = (&config_maps, &ns, &dry_apply);
                async move {
                    api.patch(
                        &format!("cost-{i}-app"),
                        pp,
                        &Patch::Apply(config_map(ns, i, "one")),
                    )
                    .await
                    .unwrap();
                }
            },
        )
        .await;
    meter
        .measure("server-side apply of an unchanged ConfigMap", count, |i| {
            let (api, ns, pp) = (&config_maps, &ns, &apply);
            async move {
                api.patch(
                    &format!("cost-{i}-app"),
                    pp,
                    &Patch::Apply(config_map(ns, i, "one")),
                )
                .await
                .unwrap();
            }
        })
        .await;
    meter
        .measure("server-side apply changing a ConfigMap", count, |i| {
            let (api, ns, pp) = (&config_maps, &ns, &apply);
            async move {
                api.patch(
                    &format!("cost-{i}-app"),
                    pp,
                    &Patch::Apply(config_map(ns, i, "two")),
                )
                .await
                .unwrap();
            }
        })
        .await;
    meter
        .measure("get a ConfigMap", count, |i| {
            let api = &config_maps;
            async move {
                api.get(&format!("cost-{i}-app")).await.unwrap();
            }
        })
        .await;
    meter
        .measure(
            "list all Kustomizations (per request: one list)",
            20,
            |_| {
                let api = &kustomizations;
                async move {
                    api.list(&ListParams::default()).await.unwrap();
                }
            },
        )
        .await;
    meter
        .measure("delete a ConfigMap", count, |i| {
            let api = &config_maps;
            async move {
                api.delete(&format!("cost-{i}-app"), &DeleteParams::default())
                    .await
                    .unwrap();
            }
        })
        .await;
    meter
        .measure("delete a Kustomization (no finalizer)", count, |i| {
            let api = &kustomizations;
            async move {
                api.delete(&format!("cost-{i}"), &DeleteParams::default())
                    .await
                    .unwrap();
            }
        })
        .await;
}
