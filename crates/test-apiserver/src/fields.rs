//! What a write does with fields a kind's schema does not declare, as kube-apiserver does:
//! server-side apply refuses them (its typed conversion fails, whatever `fieldValidation`
//! says); create, update and patch drop them with a warning (`Warn`, the default), refuse them
//! (`Strict`) or drop them silently (`Ignore`).

use serde_json::Value;

use super::errors::ApiError;
use super::handler::Request;
use super::resources::ResourceType;
use super::schema::{self, Nulls, Schema};

/// `fieldValidation`: what a create, update or patch does with fields the schema does not
/// declare.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn of(request: &Request) -> Result<FieldValidation, ApiError> {
        match request.query.get("fieldValidation").map(String::as_str) {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other}"
            ))),
        }
    }
}

/// Drops the fields the kind's schema does not declare. Under `Strict` they refuse the
/// write as the strict decoder does; under `Warn` each becomes a warning.
pub fn drop_unknown_fields(
    rt: &ResourceType,
    object: &mut Value,
    validation: FieldValidation,
    nulls: Nulls,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Some(schema) = Schema::of(rt) else {
        return Ok(());
    };
    let unknown = schema::unknown_fields(schema, object);
    if validation == FieldValidation::Strict && !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|u| format!("unknown field \"{}\"", u.json_path))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            list.join(", "),
            kind = rt.kind,
            version = rt.version,
        )));
    }
    if validation == FieldValidation::Warn {
        warnings.extend(
            unknown
                .iter()
                .map(|u| format!("unknown field \"{}\"", u.json_path)),
        );
    }
    schema::prune(schema, object, nulls);
    Ok(())
}

/// Server-side apply types the whole configuration first; a field the schema does not declare,
/// or a value of the wrong type, fails that step (500), whatever `fieldValidation` says.
pub fn refuse_mistyped_applied_config(rt: &ResourceType, config: &Value) -> Result<(), ApiError> {
    let Some(schema) = Schema::of(rt) else {
        return Ok(());
    };
    let problems = schema::typed_problems(schema, config);
    if problems.is_empty() {
        return Ok(());
    }
    let text = |p: &str| config.pointer(p).and_then(Value::as_str).unwrap_or("");
    let problems = match problems.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    let group_version = if rt.group.is_empty() {
        format!("/{}", rt.version)
    } else {
        rt.api_version()
    };
    Err(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {group_version}, Kind={}): {problems}",
            text("/metadata/namespace"),
            text("/metadata/name"),
            rt.kind,
        ),
    ))
}

/// Before a server-side apply, structured-merge-diff converts the live object to the version
/// of every managed-fields entry (`reconcileManagedFieldsWithSchemaChanges`) and types it with
/// that version's schema. A custom resource read at a newer version may hold fields an older
/// version does not declare (a default the new version added): an entry left at the older
/// version then fails every apply (500, the typing's words), which is what Flux's
/// MigrateAPIVersion exists for. Entries at a version the CRD no longer has are skipped, as
/// the server skips them.
pub fn refuse_live_untyped_at_managed_versions(
    rt: &ResourceType,
    live: &Value,
) -> Result<(), ApiError> {
    let Some(custom) = &rt.custom else {
        return Ok(());
    };
    let entries = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let mut checked = std::collections::BTreeSet::new();
    for entry in entries {
        let Some(version) = entry
            .get("apiVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.strip_prefix(&format!("{}/", rt.group)))
        else {
            continue;
        };
        if version == rt.version || !checked.insert(version.to_string()) {
            continue;
        }
        let Some(Some(node)) = custom.version_schema(version) else {
            continue;
        };
        let problems = schema::typed_problems(Schema::custom(node), live);
        let problems = match problems.as_slice() {
            [] => continue,
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        return Err(ApiError::new(500, "", problems));
    }
    Ok(())
}
