//! `vars:`: `$(NAME)` references replaced by a field of a named resource.
//!
//! A var is bound to its resource when the kustomization declaring it is accumulated
//! (exactly one resource must match its `objref`, by current or earlier identity); its value
//! is read at the top of the build, after every rename, and substituted into the var
//! reference fields with Kubernetes' `$(VAR)` expansion rules (`$$` escapes, unknown names
//! stay as written).

use std::collections::HashMap;
use std::path::Path;

use crate::value::Value;

use super::KustomizeError;
use super::fieldspec::{split_path, visit_leaves};
use super::kustfile::{FieldSpec, Var};
use super::replacements::{PathSegment, parse_field_path, scalar_text};
use super::resource::{Resource, split_api_version};

/// Binds `var` to the one resource its `objref` names: kind, name, group and version exactly
/// (an objref without an apiVersion names the empty group and version, so it finds nothing,
/// as in kustomize), and the namespace where the objref gives one.
pub fn bind(var: &Var, resources: &mut [Resource], file: &Path) -> Result<(), KustomizeError> {
    let objref = &var.objref;
    let (group, version) = if objref.api_version.is_empty() {
        (objref.group.as_str(), objref.version.as_str())
    } else {
        split_api_version(&objref.api_version)
    };
    let matching: Vec<usize> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            std::iter::once(r.id())
                .chain(r.previous_ids.iter().cloned())
                .any(|id| {
                    id.kind == objref.kind
                        && id.name == objref.name
                        && group == id.group
                        && version == id.version
                        && (objref.namespace.is_empty()
                            || super::resource::namespaces_equal(&objref.namespace, &id.namespace))
                })
        })
        .map(|(i, _)| i)
        .collect();
    match matching.as_slice() {
        [one] => {
            resources[*one].var_names.push(var.name.clone());
            Ok(())
        }
        [] => Err(KustomizeError::Var {
            file: file.to_path_buf(),
            name: var.name.clone(),
            message: format!(
                "cannot be mapped to a field in the set of known resources (no {} named {}{})",
                objref.kind,
                objref.name,
                if version.is_empty() {
                    " with no version: the objref needs the object's apiVersion"
                } else {
                    ""
                }
            ),
        }),
        many => Err(KustomizeError::Var {
            file: file.to_path_buf(),
            name: var.name.clone(),
            message: format!(
                "found {} resources matching {} {} (unable to disambiguate)",
                many.len(),
                objref.kind,
                objref.name
            ),
        }),
    }
}

/// Reads every var's value and substitutes `$(NAME)` in the var reference fields.
pub fn resolve(
    vars: &[Var],
    resources: &mut [Resource],
    specs: &[FieldSpec],
) -> Result<(), KustomizeError> {
    if vars.is_empty() {
        return Ok(());
    }
    let mut values = HashMap::new();
    for var in vars {
        let resource = resources
            .iter()
            .find(|r| r.var_names.contains(&var.name))
            .ok_or_else(|| KustomizeError::VarValue {
                name: var.name.clone(),
                message: "cannot be mapped to a field in the set of known resources".into(),
            })?;
        let path = var
            .fieldref
            .as_ref()
            .map(|f| f.field_path.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("metadata.name");
        let value = read_path(&resource.object, path).ok_or_else(|| KustomizeError::VarValue {
            name: var.name.clone(),
            message: format!(
                "field {path} specified in var not found in corresponding resource {}",
                resource.id()
            ),
        })?;
        // As kustomize's primitive replacer: a var whose value is a mapping or a list
        // replaces nothing (its `$(NAME)` stays as written); a null is read as its text.
        match value {
            Value::Object(_) | Value::Array(_) => {}
            Value::Null => {
                values.insert(var.name.clone(), Value::String("null".into()));
            }
            // kustomize decodes the field, so a var is its value as Go prints it: `1.10`
            // gives `1.1`.
            scalar => {
                let mut decoded = scalar.clone();
                decoded.forget_spellings();
                values.insert(var.name.clone(), decoded);
            }
        }
    }
    let texts: HashMap<String, String> = values
        .iter()
        .map(|(name, value)| (name.clone(), scalar_text(value)))
        .collect();
    let substitution = Substitution {
        values: &values,
        texts: &texts,
    };
    for resource in resources.iter_mut() {
        let id = resource.id();
        for spec in specs.iter().filter(|s| s.applies_to(&id)) {
            visit_leaves(
                &mut resource.object,
                &split_path(&spec.path),
                false,
                &mut |map, key| match map.get_mut(key) {
                    Some(value) => substitution.substitute_field(value),
                    None => Ok(()),
                },
            )
            .map_err(|e| e.in_field(&id, &spec.path))?;
        }
    }
    Ok(())
}

/// A field path like `spec.ports[0].port` or `spec.template.spec.containers[name=app].image`.
fn read_path<'v>(object: &'v Value, path: &str) -> Option<&'v Value> {
    let normalized = path.replace('[', ".[");
    let mut current = object;
    for segment in parse_field_path(&normalized) {
        current = match (segment, current) {
            (PathSegment::Field(name), Value::Object(map)) => map.get(&name)?,
            (PathSegment::Field(index), Value::Array(items)) => {
                items.get(index.parse::<usize>().ok()?)?
            }
            (PathSegment::Index(i), Value::Array(items)) => items.get(i)?,
            (PathSegment::Match(k, v), Value::Array(items)) => items
                .iter()
                .find(|item| item.get(&k).is_some_and(|x| scalar_text(x) == v))?,
            _ => return None,
        };
    }
    Some(current)
}

/// The vars' values, and their texts for references inside longer strings.
struct Substitution<'v> {
    values: &'v HashMap<String, Value>,
    texts: &'v HashMap<String, String>,
}

impl Substitution<'_> {
    /// kustomize's refvar filter on the field a spec reaches: a string, each string value of
    /// a mapping (others left alone), or each element of a list, which must all be strings;
    /// nothing deeper.
    fn substitute_field(&self, value: &mut Value) -> Result<(), KustomizeError> {
        match value {
            Value::String(_) => self.substitute_string(value),
            Value::Object(map) => map
                .values_mut()
                .filter(|value| value.is_string())
                .for_each(|value| self.substitute_string(value)),
            Value::Array(items) => {
                for item in items {
                    if !item.is_string() {
                        return Err(KustomizeError::field_spec(
                            "invalid value type expect a string",
                        ));
                    }
                    self.substitute_string(item);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A string that is exactly one reference takes the var's value with its type; else the
    /// references in it are expanded.
    fn substitute_string(&self, value: &mut Value) {
        let Value::String(text) = value else {
            return;
        };
        let whole = text
            .strip_prefix("$(")
            .and_then(|t| t.strip_suffix(')'))
            .and_then(|name| self.values.get(name));
        match whole {
            Some(typed) => *value = typed.clone(),
            None => *text = expand(text, self.texts),
        }
    }
}

/// Kubernetes' `$(VAR)` expansion.
pub fn expand(input: &str, values: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match values.get(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let values = HashMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$-$(", &values), "x-$(B)-$(A)-$-$(");
    }

    #[test]
    fn reads_bracketed_paths() {
        let object =
            crate::json!({"spec": {"ports": [{"port": 80}], "c": [{"name": "a", "image": "i"}]}});
        assert_eq!(
            read_path(&object, "spec.ports[0].port"),
            Some(&crate::json!(80))
        );
        assert_eq!(
            read_path(&object, "spec.c[name=a].image"),
            Some(&crate::json!("i"))
        );
    }
}
