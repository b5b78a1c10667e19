//! Post-build variable substitution (Flux's `spec.postBuild`).
//!
//! Variables come from the `substituteFrom` ConfigMaps and Secrets in order (later ones win;
//! an `optional` source may be missing) and then from the inline `substitute` map, which
//! overrides them. Names must be shell-style identifiers. Each built object is then printed as
//! YAML, its `${…}` expressions expanded (`expr`), and the text read back with Kubernetes' YAML
//! rules, so an expression that yields `3` in an unquoted position becomes a number, as in
//! Flux. Quotes around `"${n}"` in a source file do not survive the kustomize build (kustomize
//! prints `${n}` plain, and so do we), so there too `3` becomes a number — Flux's behaviour,
//! whose documented remedy is a quote variable: `${quote}${n}${quote}` with `quote: '"'`.
//! Objects labelled or annotated `kustomize.toolkit.fluxcd.io/substitute: disabled` are
//! left alone. Errors name the object and the variable, never a value.

mod expr;
mod glob;
mod parse;

use std::collections::BTreeMap;

use crate::value::Value;

use crate::yaml;
pub use expr::{Context, ExprError, expand};

/// The label or annotation that turns substitution off for one object.
pub const DISABLE_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// Why substitution failed.
#[derive(Debug, thiserror::Error)]
pub enum SubstituteError {
    #[error("'{0}' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'")]
    InvalidName(String),
    /// A `substituteFrom` source that could not be read (or is missing and not optional),
    /// with the API server's words (`configmaps "vars" not found`).
    #[error("substitute from '{kind}/{name}' error: {reason}")]
    Source {
        kind: String,
        name: String,
        reason: String,
    },
    #[error("{object}: {error}")]
    Expression { object: String, error: ExprError },
    #[error("{object}: the substituted manifest is not valid YAML: {message}")]
    Reparse { object: String, message: String },
}

impl SubstituteError {
    /// What fluxcd/pkg's substitution says of this failure (its caller names the object).
    pub fn as_fluxs(&self) -> String {
        match self {
            SubstituteError::Expression { error, .. } => {
                format!("envsubst error: variable substitution failed: {error}")
            }
            SubstituteError::Reparse { message, .. } => {
                format!("envsubst error: YAMLToJSON: {message}")
            }
            // fluxcd/pkg reads the sources before it substitutes, outside its envsubst step.
            SubstituteError::Source { .. } => self.to_string(),
            other => format!("envsubst error: {other}"),
        }
    }
}

/// One `substituteFrom` source as the controller found it.
pub struct Source {
    pub kind: String,
    pub name: String,
    pub optional: bool,
    /// The object's data (Secret values already decoded); `None` when it does not exist;
    /// the API server's words when it could not be read.
    pub data: Result<Option<BTreeMap<String, String>>, String>,
}

/// The variables for a Kustomization: sources in order, then inline values.
pub fn collect_variables(
    sources: Vec<Source>,
    inline: Option<&BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, SubstituteError> {
    // Flux drops newlines from every value (a trailing one from `echo … | kubectl create`
    // would otherwise break the manifests it lands in).
    let strip = |v: &String| v.replace('\n', "");
    let mut vars = BTreeMap::new();
    for source in sources {
        let unreadable = |reason: String| SubstituteError::Source {
            kind: source.kind.clone(),
            name: source.name.clone(),
            reason,
        };
        match source.data {
            Ok(Some(data)) => vars.extend(data.iter().map(|(k, v)| (k.clone(), strip(v)))),
            Ok(None) if source.optional => {}
            Ok(None) => {
                let plural = format!("{}s", source.kind.to_lowercase());
                return Err(unreadable(format!(
                    "{plural} \"{}\" not found",
                    source.name
                )));
            }
            Err(reason) => return Err(unreadable(reason)),
        }
    }
    if let Some(inline) = inline {
        vars.extend(inline.iter().map(|(k, v)| (k.clone(), strip(v))));
    }
    if let Some(bad) = vars.keys().find(|name| !is_valid_name(name)) {
        return Err(SubstituteError::InvalidName(bad.clone()));
    }
    Ok(vars)
}

/// `^[_[:alpha:]][_[:alpha:][:digit:]]*$`
fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Whether substitution runs at all: with at least one variable, or always when the strategy
/// says so.
pub fn should_run(vars: &BTreeMap<String, String>, always: bool) -> bool {
    always || !vars.is_empty()
}

/// Whether an object opted out with the label or annotation.
pub fn is_disabled(object: &Value) -> bool {
    ["labels", "annotations"].iter().any(|field| {
        object
            .get("metadata")
            .and_then(|m| m.get(*field))
            .and_then(|m| m.get(DISABLE_KEY))
            .and_then(Value::as_str)
            == Some("disabled")
    })
}

/// Substitutes the variables into one object, in place.
pub fn substitute_object(
    object: &mut Value,
    vars: &BTreeMap<String, String>,
    strict: bool,
) -> Result<(), SubstituteError> {
    if is_disabled(object) {
        return Ok(());
    }
    let text = yaml::to_yaml_string(object);
    // Nothing to expand, and no `$$` to make a `$`.
    if !text.contains("${") && !text.contains("$$") {
        return Ok(());
    }
    let describe = || {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let namespace = text("/metadata/namespace");
        let name = text("/metadata/name");
        if namespace.is_empty() {
            format!("{}/{}", text("/kind"), name)
        } else {
            format!("{}/{}/{}", text("/kind"), namespace, name)
        }
    };
    let expanded =
        expand(&text, &Context { vars, strict }).map_err(|error| SubstituteError::Expression {
            object: describe(),
            error,
        })?;
    let parsed = yaml::parse_yaml_to_json(&expanded).map_err(|e| SubstituteError::Reparse {
        object: describe(),
        message: without_values(&e),
    })?;
    *object = parsed;
    Ok(())
}

/// A YAML error of substituted text, without the text itself: the substituted values may be
/// secrets, and errors end up in events and status.
fn without_values(error: &yaml::YamlError) -> String {
    use yaml::YamlError as E;
    match error {
        E::DuplicateKey { line, .. } => format!("line {line}: a mapping key is repeated"),
        E::UnsupportedValue { line, .. } => {
            format!("line {line}: a value has no JSON representation")
        }
        E::NonStringKey { line, .. } => format!("line {line}: a mapping key is not a string"),
        E::Syntax { line, column, .. } => format!("line {line}, column {column}: invalid YAML"),
        other => other.to_string(),
    }
}

/// The tables of `tests/fixtures/envsubst/` that Flux's own code wrote.
#[cfg(test)]
mod fixtures {
    use std::collections::BTreeMap;

    /// The variables every row sees, and five columns a row.
    #[derive(serde::Deserialize)]
    pub(super) struct Table {
        pub(super) vars: BTreeMap<String, String>,
        pub(super) rows: Vec<[String; 5]>,
    }

    pub(super) fn table(name: &str) -> Table {
        let path = format!(
            "{}/tests/fixtures/envsubst/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sources_in_order_then_inline() {
        let sources = vec![
            Source {
                kind: "ConfigMap".into(),
                name: "a".into(),
                optional: false,
                data: Ok(Some(vars(&[("x", "1"), ("y", "1")]))),
            },
            Source {
                kind: "Secret".into(),
                name: "b".into(),
                optional: true,
                data: Ok(None),
            },
            Source {
                kind: "Secret".into(),
                name: "c".into(),
                optional: false,
                data: Ok(Some(vars(&[("y", "2")]))),
            },
        ];
        let inline = vars(&[("x", "inline")]);
        let collected = collect_variables(sources, Some(&inline)).unwrap();
        assert_eq!(collected, vars(&[("x", "inline"), ("y", "2")]));
    }

    #[test]
    fn missing_required_sources_and_bad_names_are_errors() {
        let missing = vec![Source {
            kind: "ConfigMap".into(),
            name: "cfg".into(),
            optional: false,
            data: Ok(None),
        }];
        let err = collect_variables(missing, None).unwrap_err();
        assert_eq!(
            err.as_fluxs(),
            "substitute from 'ConfigMap/cfg' error: configmaps \"cfg\" not found"
        );
        // A source that could not be read fails even when optional, as in Flux.
        let forbidden = vec![Source {
            kind: "Secret".into(),
            name: "s".into(),
            optional: true,
            data: Err("secrets \"s\" is forbidden".into()),
        }];
        assert_eq!(
            collect_variables(forbidden, None).unwrap_err().as_fluxs(),
            "substitute from 'Secret/s' error: secrets \"s\" is forbidden"
        );
        let err = collect_variables(Vec::new(), Some(&vars(&[("bad-name", "v")]))).unwrap_err();
        assert!(
            err.to_string().contains("'bad-name' var name is invalid"),
            "{err}"
        );
        assert!(collect_variables(Vec::new(), Some(&vars(&[("_ok1", "v")]))).is_ok());
        assert!(!should_run(&BTreeMap::new(), false));
        assert!(should_run(&BTreeMap::new(), true));
    }

    #[test]
    fn objects_are_typed_after_substitution() {
        let mut deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "app", "namespace": "${ns}", "labels": {"env": "${env:=dev}"}},
            "spec": {"replicas": "${replicas}", "paused": "${paused}", "template": {"spec": {"containers": [
                {"name": "app", "image": "app:${tag}", "args": ["--level=${level:-info}"]}
            ]}}}
        });
        let vars = vars(&[
            ("ns", "prod"),
            ("replicas", "3"),
            ("paused", "false"),
            ("tag", "1.2.3"),
        ]);
        substitute_object(&mut deployment, &vars, true).unwrap();
        assert_eq!(deployment["metadata"]["namespace"], "prod");
        assert_eq!(deployment["metadata"]["labels"]["env"], "dev");
        assert_eq!(
            deployment["spec"]["replicas"], 3,
            "an unquoted number is a number again"
        );
        assert_eq!(deployment["spec"]["paused"], false);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "app:1.2.3"
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["args"][0],
            "--level=info"
        );
    }

    #[test]
    fn quotes_come_from_values_as_in_flux() {
        // Source quotes are gone after a build, as in kustomize and Flux: "${n}" is the
        // string `${n}` here and yields a number.
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "annotations": {
                "plain": "${id}", "quoted": "${quote}${id}${quote}", "single": "${single}"}}});
        let vars = vars(&[("id", "0123"), ("quote", "\""), ("single", "'true'")]);
        substitute_object(&mut object, &vars, true).unwrap();
        let annotations = &object["metadata"]["annotations"];
        assert_eq!(annotations["quoted"], "0123");
        assert_eq!(annotations["single"], "true");
        // YAML 1.1 reads 0123 as octal 83, as sigs.k8s.io/yaml does in Flux.
        assert_eq!(annotations["plain"], 83);
    }

    #[test]
    fn reparse_errors_never_show_substituted_values() {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm"}, "data": {"a": "${v}"}});
        let secret = "top-secret: [unclosed";
        let err = substitute_object(&mut object, &vars(&[("v", secret)]), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ConfigMap/cm"), "{err}");
        assert!(
            !err.contains("top-secret") && !err.contains("unclosed"),
            "{err}"
        );
    }

    /// Objects as Flux's own substitution (fluxcd/pkg/kustomize v1.35.4: sigs.k8s.io/yaml's
    /// printing, envsubst v1.7.0, YAMLToJSON) turned them (`tools/go-oracles/flux-substitute`):
    /// every string whose meaning could hang on how it is printed — folded at 80 columns, in a
    /// block scalar, quoted, a key — substituted with values that are quotes, colons, hashes,
    /// blanks, numbers. The same object, or a failure of the same step (we never show the text).
    #[test]
    fn objects_substitute_as_fluxs_printing_and_reading_make_them() {
        // object, output, error, strict output, strict error.
        let fixture = fixtures::table("flux-substitute-objects-v1.7.0.json");
        assert!(fixture.rows.len() > 2_500);
        let vars: BTreeMap<String, String> = fixture
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.replace('\n', "")))
            .collect();
        // Objects known to differ, with why (the file's header says).
        let known: BTreeMap<&str, &str> = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/envsubst/flux-substitute-objects-known.tsv"
        ))
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('\t'))
        .map(|(reason, object)| (object, reason))
        .collect();
        let mut differ = Vec::new();
        let mut known_differ = 0;
        for [object, output, error, strict_output, strict_error] in &fixture.rows {
            let mut object_differs = false;
            for (strict, want_output, want_error) in
                [(false, output, error), (true, strict_output, strict_error)]
            {
                let input: serde_json::Value = serde_json::from_str(object).unwrap();
                let mut ours = Value::from(input);
                let got = substitute_object(&mut ours, &vars, strict);
                let same = match (&got, want_error.as_str()) {
                    (Ok(()), "") => {
                        let want: serde_json::Value = serde_json::from_str(want_output).unwrap();
                        same_json(&serde_json::Value::from(&ours), &want)
                    }
                    (Err(SubstituteError::Expression { .. }), e) => e.starts_with("envsubst: "),
                    (Err(SubstituteError::Reparse { .. }), e) => e.starts_with("yaml: "),
                    _ => false,
                };
                object_differs |= !same;
                if !same && !known.contains_key(object.as_str()) {
                    let ours = match got {
                        Ok(()) => serde_json::Value::from(&ours).to_string(),
                        Err(e) => e.to_string(),
                    };
                    differ.push(format!(
                        "{object} strict={strict}:\n  Flux {want_output}{want_error}\n  ours {ours}"
                    ));
                }
            }
            if let Some(reason) = known.get(object.as_str()) {
                if object_differs {
                    known_differ += 1;
                } else {
                    differ.push(format!(
                        "{object}: listed as known ({reason}), but it is alike"
                    ));
                }
            }
        }
        assert!(
            differ.is_empty(),
            "{} of {} differ:\n{}",
            differ.len(),
            fixture.rows.len() * 2,
            differ.join("\n")
        );
        assert_eq!(
            known_differ,
            known.len(),
            "every known object is in the fixture"
        );
    }

    /// JSON values alike, numbers by what they are worth (Go's JSON writes the float 1.0 as 1).
    fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value as J;
        match (a, b) {
            (J::Number(x), J::Number(y)) => x == y || x.as_f64() == y.as_f64(),
            (J::Array(x), J::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
            }
            (J::Object(x), J::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
            }
            _ => a == b,
        }
    }

    #[test]
    fn disabled_objects_and_strict_errors() {
        let original = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "script", "annotations": {DISABLE_KEY: "disabled"}},
            "data": {"run.sh": "echo ${HOME}"}});
        let mut object = original.clone();
        substitute_object(&mut object, &BTreeMap::new(), true).unwrap();
        assert_eq!(object, original);

        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "apps"},
            "data": {"a": "${secret_token}", "b": "${missing}"}});
        let err = substitute_object(&mut object, &vars(&[("secret_token", "hunter2")]), true)
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("ConfigMap/apps/cfg") && message.contains("\"missing\""),
            "{message}"
        );
        assert!(
            !message.contains("hunter2"),
            "values never appear in errors: {message}"
        );

        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"b": "x${missing}y"}});
        substitute_object(&mut object, &BTreeMap::new(), false).unwrap();
        assert_eq!(object["data"]["b"], "xy");
    }
}
