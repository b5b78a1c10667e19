//! `make bench-server-cost`: what each kind of request the controller (and the controller
//! benchmark) sends costs a real kube-apiserver in CPU, measured by sending a batch of one kind
//! at a time and reading the server's own `process_cpu_seconds_total` before and after. The
//! idle cost (controller-manager, leases) is measured first and taken off each batch, so a
//! figure is what the requests themselves cost. Needs a real API server (`TEST_KUBECONFIG`);
//! in process it says so and returns. `BENCH_N` requests per kind (default 1,000), 4 at a time
//! as the controller's `--concurrent` default sends them. Two ways of one request are compared
//! in alternating batches (`Meter::alternate`), each with its mean and standard error: the
//! server's load drifts between batches by more than most differences between ways.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::controller_bench::{api_server_cpu as server_cpu, until_no_namespace_terminates};
use crate::support::cluster::TestCluster;

const IN_FLIGHT: usize = 4;

struct Meter {
    client: kube::Client,
    /// The server's idle CPU, seconds per second.
    idle: f64,
}

impl Meter {
    /// Runs `count` requests made by `request(i)`, `IN_FLIGHT` at a time, and prints the
    /// server's CPU per request beyond its idle cost.
    async fn measure<F, Fut>(&self, kind: &str, count: usize, request: F) -> f64
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
        let per_request = own * 1000.0 / count as f64;
        println!(
            "server-cost: {kind:<58} {per_request:>6.2} ms per request ({used:>5.1} s CPU, {took:>5.1} s)"
        );
        per_request
    }
}

impl Meter {
    /// Measures two ways of a request (`request(i, round, second)`) in `rounds` alternating
    /// batches each, and prints each way's mean per request and its standard error.
    async fn alternate<F, Fut>(&self, ways: [&str; 2], rounds: usize, count: usize, request: F)
    where
        F: Fn(usize, usize, bool) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut costs: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..rounds {
            for (way, second) in [(ways[0], false), (ways[1], true)] {
                let cost = self
                    .measure(way, count, |i| request(i, round, second))
                    .await;
                costs[usize::from(second)].push(cost);
            }
        }
        for (way, costs) in ways.iter().zip(&costs) {
            let n = costs.len() as f64;
            let mean = costs.iter().sum::<f64>() / n;
            let variance = costs.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (n - 1.0);
            println!(
                "server-cost: {way:<58} {mean:>6.2} ms mean of {rounds}, standard error {:.2} ms",
                (variance / n).sqrt()
            );
        }
    }
}

/// A request body by the request's number.
type Body<'a> = Box<dyn Fn(usize) -> Value + 'a>;

impl Meter {
    /// Measures `count` patches of the objects `name(i)`, of their status subresource when
    /// `status`.
    #[allow(clippy::too_many_arguments)]
    async fn patch_each(
        &self,
        kind: &str,
        count: usize,
        api: &Api<DynamicObject>,
        params: &PatchParams,
        status: bool,
        name: fn(usize) -> String,
        body: impl Fn(usize) -> Patch<Value>,
    ) {
        self.measure(kind, count, |i| {
            let patch = body(i);
            async move {
                if status {
                    api.patch_status(&name(i), params, &patch).await.unwrap();
                } else {
                    api.patch(&name(i), params, &patch).await.unwrap();
                }
            }
        })
        .await;
    }
}

/// A watch of every Kustomization, read and dropped until the task is aborted: what the
/// controller's own watch costs the server for each write.
async fn watching(kustomizations: &Api<DynamicObject>) -> tokio::task::JoinHandle<()> {
    let mut watch = kustomizations
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    tokio::spawn(async move { while let Ok(Some(_)) = watch.try_next().await {} })
}

fn kustomization_name(i: usize) -> String {
    format!("cost-{i}")
}

fn config_map_name(i: usize) -> String {
    format!("cost-{i}-app")
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
    until_no_namespace_terminates(&client).await;
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
    // As the controller applies: no strict second reading of the body (apply-engine's
    // `apply_params`); Flux's requests leave `fieldValidation` at its default, Warn.
    let apply = PatchParams::apply("kustomize-controller")
        .force()
        .validation_ignore();
    let dry_apply = apply.clone().dry_run();
    let status_manager = PatchParams {
        field_manager: Some("gotk-kustomize-controller".into()),
        ..Default::default()
    };
    let merge = PatchParams::default();
    let later_history = json!([{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "firstReconciled": "2026-11-27T00:00:00Z", "lastReconciled": "2026-11-27T00:10:00Z",
        "lastReconciledDuration": "1.2ms", "lastReconciledStatus": "ReconciliationSucceeded",
        "totalReconciliations": 2, "metadata": {"revision": "main@sha1:1111"}}]);

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
    let kustomization_patches: [(&str, &PatchParams, bool, Body); 4] = [
        (
            "merge-patch status, first (Ready, inventory, history)",
            &status_manager,
            true,
            Box::new(|i| ready_status(&ns, i, "a")),
        ),
        (
            "merge-patch annotation requestedAt (the benchmark's)",
            &merge,
            false,
            Box::new(
                |_| json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "b"}}}),
            ),
        ),
        (
            "merge-patch status, lastHandledReconcileAt and history",
            &status_manager,
            true,
            Box::new(
                |_| json!({"status": {"lastHandledReconcileAt": "b", "history": later_history}}),
            ),
        ),
        (
            "merge-patch status again, no watch of ours",
            &status_manager,
            true,
            Box::new(|_| json!({"status": {"lastHandledReconcileAt": "c"}})),
        ),
    ];
    for (kind, params, status, body) in &kustomization_patches {
        meter
            .patch_each(
                kind,
                count,
                &kustomizations,
                params,
                *status,
                kustomization_name,
                |i| Patch::Merge(body(i)),
            )
            .await;
    }
    let drain = watching(&kustomizations).await;
    meter
        .patch_each(
            "merge-patch status again, a Kustomization watch open",
            count,
            &kustomizations,
            &status_manager,
            true,
            kustomization_name,
            |_| Patch::Merge(json!({"status": {"lastHandledReconcileAt": "d"}})),
        )
        .await;
    drain.abort();
    meter
        .patch_each(
            "server-side apply status (forced, whole status)",
            count,
            &kustomizations,
            &apply,
            true,
            kustomization_name,
            |i| {
                let mut status = ready_status(&ns, i, "e");
                status["apiVersion"] = json!("kustomize.toolkit.fluxcd.io/v1");
                status["kind"] = json!("Kustomization");
                Patch::Apply(status)
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
    // A repeat, as client-go's correlator writes it: a strategic merge patch of the count.
    meter
        .measure("patch an Event's count", count, |i| {
            let api = &events;
            async move {
                let patch = json!({"count": 2, "lastTimestamp": "2026-11-27T00:01:30Z",
                    "message": "(combined from similar events): Reconciliation finished in 13ms, next run in 1h0m0s"});
                api.patch(
                    &format!("cost-{i}.{:x}", 1),
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await
                .unwrap();
            }
        })
        .await;
    for (kind, params, value) in [
        (
            "server-side dry-run of an absent ConfigMap",
            &dry_apply,
            "one",
        ),
        ("server-side apply creating a ConfigMap", &apply, "one"),
        (
            "server-side dry-run of an unchanged ConfigMap",
            &dry_apply,
            "one",
        ),
        ("server-side apply of an unchanged ConfigMap", &apply, "one"),
        ("server-side apply changing a ConfigMap", &apply, "two"),
    ] {
        meter
            .patch_each(
                kind,
                count,
                &config_maps,
                params,
                false,
                config_map_name,
                |i| Patch::Apply(config_map(&ns, i, value)),
            )
            .await;
    }
    let compared = Compared {
        meter: &meter,
        count,
        ns: &ns,
        client: &client,
        kustomizations: &kustomizations,
        config_maps: &config_maps,
        apply: &apply,
        status_manager: &status_manager,
        later_history: &later_history,
    };
    compared.field_validation().await;
    compared.status_put().await;
    compared.metadata_answers().await;
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
    for (kind, api, name) in [
        (
            "delete a ConfigMap",
            &config_maps,
            config_map_name as fn(usize) -> String,
        ),
        (
            "delete a Kustomization (no finalizer)",
            &kustomizations,
            kustomization_name,
        ),
    ] {
        meter
            .measure(kind, count, |i| async move {
                api.delete(&name(i), &DeleteParams::default())
                    .await
                    .unwrap();
            })
            .await;
    }
}

/// What the comparisons of two ways of one request share: the batch size, the test's
/// namespace and APIs, the controller's apply and status-write parameters, a later history.
struct Compared<'a> {
    meter: &'a Meter,
    count: usize,
    ns: &'a str,
    client: &'a kube::Client,
    kustomizations: &'a Api<DynamicObject>,
    config_maps: &'a Api<DynamicObject>,
    /// As the controller applies (apply-engine's `apply_params`).
    apply: &'a PatchParams,
    status_manager: &'a PatchParams,
    later_history: &'a Value,
}

impl Compared<'_> {
    /// What the strict second reading of an apply body that Warn (Flux's default) asks for
    /// costs the server (it only looks for duplicate keys): dry-runs and creates of fresh
    /// ConfigMaps, and a status merge patch, as Flux sends them and with Ignore.
    async fn field_validation(&self) {
        let flux_apply = PatchParams::apply("kustomize-controller").force();
        let ways = |row: &str| {
            [
                format!("{row}, fieldValidation=Warn (default)"),
                format!("{row}, fieldValidation=Ignore"),
            ]
        };
        for (row, dry_run) in [
            ("server-side dry-run of an absent ConfigMap", true),
            ("server-side apply creating a ConfigMap", false),
        ] {
            let [warn, ignore] = ways(row);
            self.meter
                .alternate([&warn, &ignore], 2, self.count, |i, round, ignoring| {
                    let params = if ignoring { self.apply } else { &flux_apply };
                    let params = if dry_run {
                        params.clone().dry_run()
                    } else {
                        params.clone()
                    };
                    let name = format!("cost-{i}-{round}{}", if ignoring { "i" } else { "w" });
                    let mut body = config_map(self.ns, i, "one");
                    body["metadata"]["name"] = json!(name);
                    async move {
                        self.config_maps
                            .patch(&name, &params, &Patch::Apply(body))
                            .await
                            .unwrap();
                    }
                })
                .await;
        }
        let [warn, ignore] = ways("merge-patch status, history");
        let status_ignoring = PatchParams {
            field_validation: self.apply.field_validation.clone(),
            ..self.status_manager.clone()
        };
        self.meter
            .alternate([&warn, &ignore], 2, self.count, |i, round, ignoring| {
                let params = if ignoring {
                    &status_ignoring
                } else {
                    self.status_manager
                };
                let patch = json!({"status": {"lastHandledReconcileAt": format!("f{round}{ignoring}"),
                    "history": self.later_history}});
                async move {
                    self.kustomizations
                        .patch_status(&kustomization_name(i), params, &Patch::Merge(patch))
                        .await
                        .unwrap();
                }
            })
            .await;
    }

    /// A status write as a merge patch (what Flux's patcher sends) against a replacement of
    /// the whole object at the resourceVersion last seen (what a controller holding the
    /// watched object could send instead; each write's answer is the next one's object),
    /// with a Kustomization watch open as the controller's is.
    async fn status_put(&self) {
        let drain = watching(self.kustomizations).await;
        let seen: std::sync::Mutex<std::collections::HashMap<String, DynamicObject>> =
            std::sync::Mutex::new(
                self.kustomizations
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .map(|o| (o.metadata.name.clone().unwrap_or_default(), o))
                    .collect(),
            );
        let replace = PostParams {
            field_manager: self.status_manager.field_manager.clone(),
            ..Default::default()
        };
        self.meter
            .alternate(
                [
                    "merge-patch status, history",
                    "update status (PUT at the seen resourceVersion), history",
                ],
                6,
                self.count,
                |i, round, put| {
                    let (api, seen, replace) = (self.kustomizations, &seen, &replace);
                    let handled = json!(format!("g{round}{put}"));
                    let history = self.later_history.clone();
                    let name = kustomization_name(i);
                    async move {
                        let written = if put {
                            let mut object = seen.lock().unwrap().remove(&name).unwrap();
                            object.metadata.managed_fields = None;
                            object.data["status"]["lastHandledReconcileAt"] = handled;
                            object.data["status"]["history"] = history;
                            api.replace_status(&name, replace, &object).await.unwrap()
                        } else {
                            let patch = json!({"status": {"lastHandledReconcileAt": handled, "history": history}});
                            api.patch_status(&name, self.status_manager, &Patch::Merge(patch))
                                .await
                                .unwrap()
                        };
                        seen.lock().unwrap().insert(name, written);
                    }
                },
            )
            .await;
        drain.abort();
    }

    /// What an answer costs when only its metadata is read, answered whole or as
    /// `PartialObjectMetadata`: the apply of a large object (a 64 KiB ConfigMap of 512 keys,
    /// as dashboards are; a quarter of the batch size, as each change keeps its 64 KiB in
    /// etcd's history until compaction) and the status write.
    async fn metadata_answers(&self) {
        let large_count = self.count.div_ceil(4);
        let large = |i: usize, round: usize| {
            let data: serde_json::Map<String, Value> = (0..512)
                .map(|key| {
                    (
                        format!("key-{key}"),
                        json!(format!("{round}{}", "x".repeat(127))),
                    )
                })
                .collect();
            let mut body = config_map(self.ns, i, "");
            body["metadata"]["name"] = json!(format!("cost-{i}-large"));
            body["data"] = Value::Object(data);
            Patch::Apply(body)
        };
        self.meter
            .measure(
                "server-side apply creating a 64 KiB ConfigMap",
                large_count,
                |i| {
                    let patch = large(i, 99);
                    async move {
                        self.config_maps
                            .patch(&format!("cost-{i}-large"), self.apply, &patch)
                            .await
                            .unwrap();
                    }
                },
            )
            .await;
        self.meter
            .alternate(
                [
                    "server-side apply changing a 64 KiB ConfigMap, whole answer",
                    "server-side apply changing a 64 KiB ConfigMap, metadata answer",
                ],
                4,
                large_count,
                |i, round, metadata_only| {
                    let (api, params) = (self.config_maps, self.apply);
                    let patch = large(i, 2 * round + usize::from(metadata_only));
                    let name = format!("cost-{i}-large");
                    async move {
                        if metadata_only {
                            api.patch_metadata(&name, params, &patch).await.unwrap();
                        } else {
                            api.patch(&name, params, &patch).await.unwrap();
                        }
                    }
                },
            )
            .await;
        // The status write as the controller asks for it (JSON as fallback).
        self.meter
            .alternate(
                [
                    "merge-patch status, history, whole answer",
                    "merge-patch status, history, metadata answer",
                ],
                6,
                self.count,
                |i, round, metadata_only| {
                    let url = self.kustomizations.resource_url().to_string();
                    let patch = json!({"status": {"lastHandledReconcileAt": format!("m{round}{metadata_only}"),
                        "history": self.later_history}});
                    async move {
                        let mut request = kube::core::Request::new(url)
                            .patch_subresource(
                                "status",
                                &kustomization_name(i),
                                self.status_manager,
                                &Patch::Merge(patch),
                            )
                            .unwrap();
                        if metadata_only {
                            request.headers_mut().insert(
                                http::header::ACCEPT,
                                http::HeaderValue::from_static(
                                    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
                                ),
                            );
                        }
                        self.client.request::<Value>(request).await.unwrap();
                    }
                },
            )
            .await;
    }
}
