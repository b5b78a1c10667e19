//! The writes a validated stage asked for: managed fields taken over first, then the
//! server-side apply (its answer recorded in the applied-object memory), or, where immutable
//! fields changed under force, a delete, a wait until the object is gone, and the apply anew.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::{Applier, ApplyError, api_error_parts, digest};
use crate::objects::ObjectRef;

/// A write a stage's validation asked for.
pub(super) struct Write {
    pub(super) api: Api<DynamicObject>,
    pub(super) reference: ObjectRef,
    pub(super) object: Value,
    /// The digest of the applied body, for [`super::AppliedCache`].
    pub(super) digest: String,
    /// A JSON patch taking other managers' fields over, sent before the apply.
    pub(super) takeover: Option<Value>,
    /// Immutable fields changed and force is on: delete, wait, then apply anew.
    pub(super) recreate: bool,
}

impl Applier {
    /// Makes a validated write: managed fields taken over first, then the apply (or, where
    /// immutable fields changed, delete, wait and apply anew).
    pub(super) async fn execute(&self, write: Write) -> Result<(), ApplyError> {
        let Write {
            api,
            reference,
            object,
            digest,
            takeover,
            recreate,
        } = write;
        if recreate {
            return self.recreate(&api, &reference, &object).await;
        }
        if let Some(patch) = takeover {
            self.patch_json(
                &api,
                &reference,
                patch,
                "metadata.managedFields cleanup failed",
            )
            .await?;
        }
        self.write(&api, &reference, &object, digest).await
    }

    /// Sends a JSON patch of the live object's metadata; the patched object comes back. A
    /// failure is named as the `step` it was for.
    pub(super) async fn patch_json(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        patch: Value,
        step: &'static str,
    ) -> Result<Value, ApplyError> {
        let failure = |message: String| ApplyError::Step {
            subject: reference.to_string(),
            step,
            message,
        };
        let patch = serde_json::from_value(patch).map_err(|e| failure(e.to_string()))?;
        // As Flux's manager sends these: under the apply's field manager.
        let params = PatchParams {
            field_manager: Some(self.options.field_manager.clone()),
            ..PatchParams::default()
        };
        let patched = api
            .patch(&reference.name, &params, &Patch::<Value>::Json(patch))
            .await
            .map_err(|error| failure(api_error_parts(&error).1))?;
        Ok(serde_json::to_value(&patched).unwrap_or_default())
    }

    /// Applies `object` and remembers what it produced, so an unchanged object is not even
    /// dry-run next time. Only the answer's metadata is kept, so only metadata is asked for
    /// (`PartialObjectMetadata`) and a large object is not parsed to be dropped; the server's
    /// CPU is the same either way (`make bench-server-cost`, a 64 KiB ConfigMap).
    async fn write(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &Value,
        applied_digest: String,
    ) -> Result<(), ApplyError> {
        let applied = api
            .patch_metadata(&reference.name, &self.params(), &Patch::Apply(object))
            .await
            .map_err(|error| ApplyError::Apply {
                subject: reference.to_string(),
                message: api_error_parts(&error).1,
            })?;
        self.cache.put(
            reference.clone(),
            applied_digest,
            applied.metadata.resource_version.clone(),
            &serde_json::to_value(&applied.metadata.managed_fields).unwrap_or_default(),
            &self.options.field_manager,
        );
        Ok(())
    }

    /// Deletes an object whose immutable fields changed, waits until it is gone, and
    /// applies it anew.
    async fn recreate(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        object: &Value,
    ) -> Result<(), ApplyError> {
        let subject = reference.to_string();
        let failure = |step: &'static str, message: String| ApplyError::Step {
            subject: subject.clone(),
            step,
            message,
        };
        const DELETE: &str = "immutable field detected, failed to delete object";
        const WAIT: &str = "immutable field detected, failed to wait for object to be deleted";
        match api
            .delete(&reference.name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(failure(DELETE, api_error_parts(&error).1)),
        }
        let deadline = tokio::time::Instant::now() + self.options.wait_timeout;
        while api
            .get_opt(&reference.name)
            .await
            .map_err(|error| failure(WAIT, api_error_parts(&error).1))?
            .is_some()
        {
            if tokio::time::Instant::now() >= deadline {
                return Err(failure(WAIT, "context deadline exceeded".into()));
            }
            tokio::time::sleep(self.options.poll_interval.min(Duration::from_millis(200))).await;
        }
        self.write(api, reference, object, digest(object)).await
    }
}
