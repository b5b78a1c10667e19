//! One stage of an apply in two passes: validation (read, policies, server-side dry-run,
//! drift) decides every object's change and the write it needs, writing nothing; the writes
//! (managed-fields takeover, apply, or recreation: `write`) are made only once the whole
//! stage validated.

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch};
use serde_json::{Value, json};

use super::decide;
use super::drift::{self, comparable, drifted, takeover_patch};
use super::undeclared;
use super::write::Write;
use super::{Applier, ApplyError, Drift, Mode, Planned, api_error_parts, digest, is_immutable};
use crate::objects::{Action, ObjectRef, Seen, SsaPolicy, reconcile_disabled, ssa_policy};

/// What validating one object decided: the change it makes and, when applying, the write
/// that makes it (made only once its whole stage validated).
pub(super) struct Decided {
    planned: Planned,
    write: Option<Write>,
}

impl Decided {
    fn no_write(object: ObjectRef, action: Action) -> Decided {
        Decided {
            planned: Planned::new(object, action),
            write: None,
        }
    }

    /// A new object, validated by its dry-run: created when applying.
    fn created(
        mode: Mode,
        api: Api<DynamicObject>,
        reference: ObjectRef,
        object: Value,
    ) -> Decided {
        let digest = digest(&object);
        Decided::write(mode, api, reference, object, digest, Action::Created)
    }

    /// A change that needs a write when applying (and none when planning).
    fn write(
        mode: Mode,
        api: Api<DynamicObject>,
        reference: ObjectRef,
        object: Value,
        digest: String,
        action: Action,
    ) -> Decided {
        let planned = Planned::new(reference.clone(), action);
        let write = (mode == Mode::Apply).then_some(Write {
            api,
            reference,
            object,
            digest,
            takeover: None,
            recreate: false,
        });
        Decided { planned, write }
    }
}

/// What is known of an object before its validation.
pub(super) enum Prefetched {
    /// The owned-object watch shows it, under this key, as our last apply left it: nothing
    /// to read or dry-run.
    Unmoved(ObjectRef),
    /// Read with its kind's list.
    Live(Value),
    /// Not read yet.
    Unread,
}

/// What reading an object found.
enum Read {
    /// It does not exist (its dry-run validated the create).
    Absent,
    /// It exists; a dry-run made before the read, when one was.
    Live {
        live: Value,
        early_dry_run: Option<Value>,
    },
}

/// What [`Applier::conclude`] decides on.
struct Concluding<'a> {
    mode: Mode,
    api: Api<DynamicObject>,
    reference: ObjectRef,
    object: Value,
    applied_digest: String,
    live: Value,
    dry_run: Result<Value, ApplyError>,
    ignored: &'a [String],
    takeover: Option<Value>,
    migrated: bool,
}

/// An object's `metadata.resourceVersion`.
fn resource_version(object: &Value) -> Option<String> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Whether a server-side dry-run's answer is an object that exists: a dry-run create is
/// never stored, so it has no resourceVersion.
fn exists(dry_run: &Value) -> bool {
    resource_version(dry_run).is_some_and(|v| !v.is_empty())
}

/// A refused dry-run, in the words the apply step reports.
fn dry_run_error(reference: &ObjectRef, error: &kube::Error) -> ApplyError {
    let (reason, message, _) = api_error_parts(error);
    let subject = reference.to_string();
    if is_immutable(error) {
        ApplyError::Immutable {
            subject,
            reason,
            message,
        }
    } else if reason == "NotFound" && reference.namespace.is_empty() {
        ApplyError::NamespaceNotSpecified { subject, message }
    } else if reason == "NotFound" {
        ApplyError::DryRunNotFound { subject, message }
    } else {
        ApplyError::DryRun {
            subject,
            reason,
            message,
        }
    }
}

impl Applier {
    /// Validates a stage: every object is read, judged by its policies and dry-run, concurrently.
    pub(super) async fn validate_stage(
        &self,
        work: Vec<(usize, Value, Prefetched)>,
        mode: Mode,
    ) -> (Vec<Decided>, Vec<ApplyError>) {
        let mut results: Vec<(usize, Result<Decided, ApplyError>)> = futures::stream::iter(work)
            .map(|(index, object, live)| async move {
                (index, self.validate_one(object, live, mode).await)
            })
            .buffer_unordered(self.options.concurrency.max(1))
            .collect()
            .await;
        results.sort_by_key(|(index, _)| *index);
        let (mut decided, mut errors) = (Vec::new(), Vec::new());
        for (_, result) in results {
            match result {
                Ok(one) => decided.push(one),
                Err(error) => errors.push(error),
            }
        }
        (decided, errors)
    }

    /// Makes the writes a validated stage needs, concurrently; what was written (or needed no
    /// write) comes back in order, with the errors of what failed.
    pub(super) async fn write_stage(
        &self,
        decided: Vec<Decided>,
    ) -> (Vec<Planned>, Vec<ApplyError>) {
        let mut results: Vec<(usize, Result<Planned, ApplyError>)> =
            futures::stream::iter(decided.into_iter().enumerate())
                .map(|(index, one)| async move {
                    let result = match one.write {
                        Some(write) => self.execute(write).await.map(|()| one.planned),
                        None => Ok(one.planned),
                    };
                    (index, result)
                })
                .buffer_unordered(self.options.concurrency.max(1))
                .collect()
                .await;
        results.sort_by_key(|(index, _)| *index);
        let (mut written, mut errors) = (Vec::new(), Vec::new());
        for (_, result) in results {
            match result {
                Ok(planned) => written.push(planned),
                Err(error) => errors.push(error),
            }
        }
        (written, errors)
    }

    /// Decides what one object needs, writing nothing: its policies (on the built object and
    /// on the live one, as Flux reads them), ignore rules, the applied-digest cache, and a
    /// server-side dry-run whose result is compared with the live object.
    async fn validate_one(
        &self,
        mut object: Value,
        prefetched: Prefetched,
        mode: Mode,
    ) -> Result<Decided, ApplyError> {
        // Found by the key `api_for` gives it, so neither its kind nor its scope need asking.
        if let Prefetched::Unmoved(reference) = prefetched {
            let action = if decide::skipped_as_built(&object) {
                Action::Skipped
            } else {
                Action::Unchanged
            };
            return Ok(Decided::no_write(reference, action));
        }
        // As ssa: what the build opted out of is skipped before anything asks whether its
        // kind is served (a disabled custom resource whose CRD is not installed is skipped).
        if decide::skipped_as_built(&object) {
            let reference = self.skipped_reference(&object);
            return Ok(Decided::no_write(reference, Action::Skipped));
        }
        let (api, reference) = match self.api_for(&mut object).await {
            Ok(found) => found,
            Err(ApplyError::UnknownKind { .. }) if mode == Mode::Plan => {
                return Ok(Decided::no_write(ObjectRef::of(&object), Action::Created));
            }
            Err(error) => return Err(error),
        };
        let policy = ssa_policy(&object);
        let prefetched = match prefetched {
            Prefetched::Live(live) => Some(live),
            Prefetched::Unmoved(_) | Prefetched::Unread => None,
        };
        let (live, early_dry_run) = match self
            .read_live(&api, &reference, &mut object, prefetched, policy)
            .await?
        {
            Read::Absent => return Ok(Decided::created(mode, api, reference, object)),
            Read::Live {
                live,
                early_dry_run,
            } => (live, early_dry_run),
        };
        if decide::skipped_as_live(policy, &live) {
            return Ok(Decided::no_write(reference, Action::Skipped));
        }
        let taking_over = decide::takes_over(mode == Mode::Apply, policy, &live);
        let ignored = self.settle_ignored_fields(&mut object, &live, taking_over);
        // MigrateAPIVersion: written before the dry-run, which the old entries could fail, as
        // Flux does; the migration is itself a change.
        let mut live = live;
        let mut migrated = false;
        if mode == Mode::Apply
            && self.options.migrate_api_version
            && let Some(patch) = drift::migration_patch(&live, &reference.api_version)
        {
            live = self
                .patch_json(&api, &reference, patch, "failed to migrate API version")
                .await?;
            migrated = true;
        }
        let applied_digest = digest(&object);
        let cached = self.cache.get(&reference);
        if decide::unchanged_since_applied(
            cached.as_ref().map(|(d, v)| (d.as_str(), v.as_str())),
            &applied_digest,
            resource_version(&live).as_deref(),
            migrated,
        ) {
            return Ok(Decided::no_write(reference, Action::Unchanged));
        }
        // Taking fields back from other managers is itself a change.
        let takeover = taking_over
            .then(|| {
                takeover_patch(
                    &live,
                    &self.options.field_manager,
                    &self.options.override_managers,
                )
            })
            .flatten();
        let dry_run = match early_dry_run.filter(|_| !migrated) {
            Some(result) => Ok(result),
            None => self.dry_run(&api, &reference, &mut object).await,
        };
        let (live, dry_run) = self
            .at_one_version(&api, &reference, &mut object, live, dry_run)
            .await;
        self.conclude(Concluding {
            mode,
            api,
            reference,
            object,
            applied_digest,
            live,
            dry_run,
            ignored: &ignored,
            takeover,
            migrated,
        })
    }

    /// `spec.ignore` on an object that exists: each ignored field the rules select is left out
    /// of what is applied or sent with its live value ([`decide::ignored_field`]). The
    /// pointers come back, to be left out of the drift comparison too.
    fn settle_ignored_fields(
        &self,
        object: &mut Value,
        live: &Value,
        taking_over: bool,
    ) -> Vec<String> {
        let ignored: Vec<String> = self
            .ignore
            .paths_for(&decide::selection_view(object, live))
            .into_iter()
            .map(str::to_string)
            .collect();
        let others = decide::OtherAppliers {
            own: &self.options.field_manager,
            overrides: &self.options.override_managers,
            taking_over,
        };
        for pointer in &ignored {
            match decide::ignored_field(live, pointer, &others) {
                decide::IgnoredField::LeaveOut => drift::remove_pointer(object, pointer),
                decide::IgnoredField::KeepLive(value) => drift::set_pointer(object, pointer, value),
            }
        }
        ignored
    }

    /// The reference a skipped object is recorded under: as built, without the namespace
    /// kustomize gives custom resources of a cluster-scoped kind when discovery already knows
    /// the kind (an applied one is recorded without it, so a skip recorded with it made one
    /// object two inventory entries). Discovery is not asked for it: a kind not yet known
    /// (or not served) is recorded as built, as ssa records it, and prune takes either key
    /// for the same object.
    fn skipped_reference(&self, object: &Value) -> ObjectRef {
        let mut reference = ObjectRef::of(object);
        if !reference.namespace.is_empty()
            && self
                .served
                .known(&reference)
                .is_some_and(|served| !served.namespaced)
        {
            reference.namespace.clear();
        }
        reference
    }

    /// Reads the live object, unless the prefetch read it; a dry-run first tells a new
    /// object without a read (an existing one's dry-run is kept for the comparison).
    async fn read_live(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &mut Value,
        prefetched: Option<Value>,
        policy: SsaPolicy,
    ) -> Result<Read, ApplyError> {
        let mut early_dry_run = None;
        let mut early_failure = None;
        let live = match prefetched {
            Some(live) => Some(live),
            None => {
                if self.may_dry_run_first(reference, object, policy) {
                    match self.dry_run(api, reference, object).await {
                        Ok(result) if !exists(&result) => return Ok(Read::Absent),
                        Ok(result) => early_dry_run = Some(result),
                        // Judged again after the read: the live object's policies may skip it.
                        Err(error) => early_failure = Some(error),
                    }
                }
                match api.get_opt(&reference.name).await {
                    Ok(found) => found.map(|o| serde_json::to_value(o).unwrap_or_default()),
                    Err(read_error) => {
                        return self
                            .unreadable(
                                api,
                                reference,
                                object,
                                early_dry_run,
                                early_failure,
                                read_error,
                            )
                            .await;
                    }
                }
            }
        };
        match live {
            Some(live) => Ok(Read::Live {
                live,
                early_dry_run,
            }),
            None => {
                // A new object is validated by its dry-run before anything of the stage is
                // written.
                self.dry_run(api, reference, object).await?;
                Ok(Read::Absent)
            }
        }
    }

    /// An object the account could not read (a tenant may patch but not `get`): as ssa, the
    /// read is passed over and the dry-run decides. Its refusal is the error, as it says what
    /// the account may not do. Once it passes, an existing object is judged against the
    /// labels and annotations of the dry-run's answer alone (so the live object's
    /// `ssa: Ignore` or `reconcile: disabled` still skips it, and it is written, as ssa writes
    /// it), unless `spec.ignore` selects it: its ignored fields cannot be kept without their
    /// live values, so the read's refusal is the error (ssa would overwrite them as built).
    async fn unreadable(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &mut Value,
        early_dry_run: Option<Value>,
        early_failure: Option<ApplyError>,
        read_error: kube::Error,
    ) -> Result<Read, ApplyError> {
        if let Some(failure) = early_failure {
            return Err(failure);
        }
        let result = match early_dry_run {
            Some(result) => result,
            None => self.dry_run(api, reference, object).await?,
        };
        if !exists(&result) {
            return Ok(Read::Absent);
        }
        let live = json!({"metadata": {
            "labels": result["metadata"]["labels"],
            "annotations": result["metadata"]["annotations"],
        }});
        if !self
            .ignore
            .paths_for(&decide::selection_view(object, &live))
            .is_empty()
        {
            return Err(ApplyError::Apply {
                subject: reference.to_string(),
                message: api_error_parts(&read_error).1,
            });
        }
        Ok(Read::Live {
            live,
            early_dry_run: Some(result),
        })
    }

    /// Performs the verdict on an object that exists, once the dry-run answered: the
    /// comparison (ignored fields aside), a recreate with `force`, the applied-digest cache.
    fn conclude(&self, concluding: Concluding<'_>) -> Result<Decided, ApplyError> {
        let Concluding {
            mode,
            api,
            reference,
            object,
            applied_digest,
            live,
            dry_run,
            ignored,
            takeover,
            migrated,
        } = concluding;
        let live_version = resource_version(&live);
        let forced = decide::forced(self.options.force, &object, &live);
        let (answered, mut dry_view) = match dry_run {
            Ok(result) => (None, result),
            Err(refusal @ ApplyError::Immutable { .. }) => (Some(refusal), Value::Null),
            Err(error) => return Err(error),
        };
        let mut live_view = live;
        drift::fix_dry_run(&mut dry_view);
        for pointer in ignored {
            drift::remove_pointer(&mut live_view, pointer);
            drift::remove_pointer(&mut dry_view, pointer);
        }
        let answered = match answered {
            Some(refusal) => decide::DryRun::Immutable(refusal),
            None => decide::DryRun::Applies {
                drifted: drifted(&live_view, &dry_view),
            },
        };
        match decide::verdict(answered, forced, takeover.is_some(), migrated) {
            decide::Verdict::Refuse(refusal) => return Err(refusal),
            decide::Verdict::Recreate => {
                let mut decided = Decided::write(
                    mode,
                    api,
                    reference,
                    object,
                    applied_digest,
                    Action::Created,
                );
                if let Some(write) = &mut decided.write {
                    write.recreate = true;
                }
                return Ok(decided);
            }
            decide::Verdict::Unchanged => {
                // An apply of it would change nothing, so a plan may remember it as an apply
                // would: drift warn mode plans every interval.
                let managed = live_view
                    .pointer("/metadata/managedFields")
                    .unwrap_or(&Value::Null);
                self.cache.put(
                    reference.clone(),
                    applied_digest,
                    live_version,
                    managed,
                    &self.options.field_manager,
                );
                return Ok(Decided::no_write(reference, Action::Unchanged));
            }
            decide::Verdict::Configure => {}
        }
        let mut decided = Decided::write(
            mode,
            api,
            reference,
            object,
            applied_digest,
            Action::Configured,
        );
        if let Some(write) = &mut decided.write {
            write.takeover = takeover;
        }
        if mode == Mode::Plan {
            decided.planned.drift = Some(Drift {
                live: comparable(&live_view),
                applied: comparable(&dry_view),
            });
        }
        Ok(decided)
    }

    /// The live object and the dry-run's result at one resourceVersion. Another client's
    /// write between the read and the dry-run (a controller's status or annotation, as the
    /// deployment controller's revision) would otherwise show as drift, and be applied; the
    /// pair is taken again, at most twice. An object gone meanwhile keeps the pair it had.
    async fn at_one_version(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &mut Value,
        mut live: Value,
        mut dry_run: Result<Value, ApplyError>,
    ) -> (Value, Result<Value, ApplyError>) {
        for _ in 0..2 {
            match &dry_run {
                Ok(result) if resource_version(result) != resource_version(&live) => {}
                _ => break,
            }
            match api.get_opt(&reference.name).await {
                Ok(Some(fresh)) => live = serde_json::to_value(fresh).unwrap_or_default(),
                _ => break,
            }
            dry_run = self.dry_run(api, reference, object).await;
        }
        (live, dry_run)
    }

    /// A server-side dry-run of our apply: what the server would store, or why it refuses.
    async fn dry_run(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &mut Value,
    ) -> Result<Value, ApplyError> {
        // Each refusal naming undeclared fields drops them and asks again; a few rounds cover
        // errors the server tells in turn.
        let mut rounds = 0;
        loop {
            let error = match api
                .patch(
                    &reference.name,
                    &self.params().dry_run(),
                    &Patch::Apply(&*object),
                )
                .await
            {
                Ok(result) => return Ok(serde_json::to_value(&result).unwrap_or_default()),
                Err(error) => error,
            };
            if rounds == 3 || !self.dropped_undeclared(reference, object, &error) {
                return Err(dry_run_error(reference, &error));
            }
            rounds += 1;
        }
    }

    /// As Flux's normalization of built-in kinds: the fields the server says the kind does not
    /// declare are removed from `object`, and noted. Whether any was.
    fn dropped_undeclared(
        &self,
        reference: &ObjectRef,
        object: &mut Value,
        error: &kube::Error,
    ) -> bool {
        if !undeclared::normalized_by_flux(object) {
            return false;
        }
        let (_, message, _) = api_error_parts(error);
        let removed: Vec<String> = undeclared::undeclared_paths(&message)
            .into_iter()
            .filter(|path| undeclared::remove_path(object, path))
            .map(|path| undeclared::readable(path).to_string())
            .collect();
        if removed.is_empty() {
            return false;
        }
        self.dropped
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{reference}: {}", removed.join(", ")));
        true
    }
}

impl Applier {
    /// Whether an unread object may be dry-run before it is read: only when it is probably
    /// new (we have no record of applying it; else the read may show it unchanged, with no
    /// dry-run at all), the dry-run does not depend on the live object (no ignored fields
    /// copied from it, no managed-fields migration first) and an existing object is not
    /// skipped unread (`IfNotPresent`).
    fn may_dry_run_first(&self, reference: &ObjectRef, object: &Value, policy: SsaPolicy) -> bool {
        self.cache.get(reference).is_none()
            && !self.options.migrate_api_version
            && policy != SsaPolicy::IfNotPresent
            && self.ignore.paths_for(object).is_empty()
    }

    /// What the owned-object watches show of `object`: exactly as our last apply left it
    /// (same resourceVersion, the same body to apply, no policy on the live object), so it
    /// needs neither a read nor a dry-run; absent from them (probably new); or anything less
    /// certain (no watch yet, ignore rules, an API version migration to check).
    pub(super) async fn watched(&self, object: &Value) -> Watched {
        let Some(owned) = &self.owned else {
            return Watched::Unsure;
        };
        let mut reference = ObjectRef::of(object);
        let Ok(served) = self.served(&reference).await else {
            return Watched::Unsure;
        };
        // Keyed as `api_for` keys it: cluster-scoped objects without a namespace.
        if !served.namespaced {
            reference.namespace.clear();
        }
        // Watched from the first apply of a kind on, so it has listed by the next reconcile.
        owned.watch(&served);
        // An object this reconciliation reads (or creates) itself needs no follow-up for an
        // earlier requested one: its own write coming through the watch would only run it again.
        let unsure = || {
            owned.release(&reference, &served);
            Watched::Unsure
        };
        let live = match owned.seen(&reference, &served) {
            Seen::Present(live) => live,
            Seen::Absent => return Watched::Absent,
            Seen::Unknown => return unsure(),
        };
        let Some((cached_digest, cached_version)) = self.cache.get(&reference) else {
            return unsure();
        };
        if self.options.migrate_api_version
            || !self.ignore.paths_for(object).is_empty()
            || ssa_policy(object) == SsaPolicy::IfNotPresent
        {
            return unsure();
        }
        let unmoved = live
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            == Some(cached_version.as_str())
            && ssa_policy(&live) != SsaPolicy::Ignore
            && !reconcile_disabled(&live)
            && cached_digest == digest(object);
        if unmoved {
            if self.requested {
                let owner = (self.owner.namespace.clone(), self.owner.name.clone());
                owned.vouch(&reference, &served, &cached_version, owner);
            }
            Watched::Unmoved(reference)
        } else {
            unsure()
        }
    }
}

/// What the owned-object watches tell of an object about to be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Watched {
    /// As our last apply left it, under this key.
    Unmoved(ObjectRef),
    Absent,
    Unsure,
}
