//! Name references: after prefixes, suffixes and hashes renamed resources, point the fields
//! that refer to them (volumes, envFrom, roleRef, subjects, scaleTargetRef, …) at the new
//! names.
//!
//! A reference holds a name the referenced resource had before it was renamed. Candidates
//! are found through an index of earlier names, so the pass is linear in the number of
//! referring fields. A namespaced referrer reaches only its own namespace, cluster-scoped
//! resources and, for a RoleBinding, the namespaces its ServiceAccount subjects name. Among
//! the candidates of the referenced kind it reaches, kustomize's sieve applies: same kind as
//! a `roleRef` says, same current namespace as the referrer (cluster-scoped resources and
//! ServiceAccounts pass), then matching prefixes and suffixes to break ties.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::value::Value;
use crate::yaml::{self, Schema};

use super::KustomizeError;
use super::config::NameReference;
use super::fieldspec::{split_path, visit_leaves};
use super::history::History;
use super::openapi::SchemaView;
use super::resource::{ResId, Resource, namespaces_equal, str_at};

/// What the fix-up needs to know about a possible referral target.
struct Candidate {
    current: ResId,
    /// The namespace the resource had before any transformer moved it, as kustomize's
    /// `OrgId().EffectiveNamespace()` (`default` for none); `None` if it was cluster-scoped.
    original_namespace: Option<String>,
    previous: History<ResId>,
    prefixes: History<String>,
    suffixes: History<String>,
    cluster_scoped: bool,
}

/// Rewrites every name reference in `resources` to the current names.
pub fn fix(
    resources: &mut [Resource],
    references: &[NameReference],
    schema: SchemaView,
) -> Result<(), KustomizeError> {
    let subject_namespaces = rolebinding_subject_namespaces(resources, schema)?;
    // Only renamed resources can be referred to by an outdated name; without any, the
    // fields are still walked, for kustomize refuses a path through a scalar either way.
    let renamed = resources.iter().any(|r| !r.previous_ids.is_empty());
    let candidates: Vec<Candidate> = resources
        .iter()
        .filter(|_| renamed)
        .map(|r| Candidate {
            current: r.id(),
            original_namespace: original_namespace(r, schema),
            previous: r.previous_ids.clone(),
            prefixes: r.prefixes.clone(),
            suffixes: r.suffixes.clone(),
            cluster_scoped: schema.is_cluster_scoped(str_at(&r.object, "/apiVersion"), r.kind()),
        })
        .collect();
    let index = CandidateIndex::of(&candidates);
    let mut referrals: Vec<(usize, ResId)> = Vec::new();
    let paths: Vec<Vec<Vec<Cow<str>>>> = references
        .iter()
        .map(|r| r.field_specs.iter().map(|s| split_path(&s.path)).collect())
        .collect();
    for (referrer_index, resource) in resources.iter_mut().enumerate() {
        let referrer_id = resource.id();
        let mut found = Vec::new();
        let referrer = candidates.get(referrer_index);
        let role_ref = role_ref_selector(&resource.object);
        for (reference, paths) in references.iter().zip(&paths) {
            for (spec, path) in reference
                .field_specs
                .iter()
                .zip(paths)
                .filter(|(s, _)| s.applies_to(&referrer_id))
            {
                let is_role_ref = spec.path.ends_with("roleRef/name");
                let context = referrer.map(|referrer| Context {
                    reference,
                    field: &spec.path,
                    referrer,
                    subject_namespaces: &subject_namespaces[referrer_index],
                    candidates: &candidates,
                    index: &index,
                    role_ref: role_ref.as_ref().filter(|_| is_role_ref),
                });
                visit_leaves(&mut resource.object, path, false, &mut |map, key| {
                    let Some(value) = map.get_mut(key) else {
                        return Ok(());
                    };
                    refuse_unreferable(value).map_err(KustomizeError::field_spec)?;
                    if let Some(context) = &context {
                        context.update(value, &referrer_id, &mut found)?;
                    }
                    Ok(())
                })
                .map_err(|e: KustomizeError| e.in_name_reference(&referrer_id, &spec.path))?;
            }
        }
        referrals.extend(
            found
                .into_iter()
                .map(|position| (position, referrer_id.clone())),
        );
    }
    for (position, referrer) in referrals {
        let referred = &mut resources[position].referred_by;
        if !referred.contains(&referrer) {
            referred.push(referrer);
        }
    }
    Ok(())
}

/// The group and kind a referrer's `roleRef` names, which a `roleRef/name` candidate must
/// have had at some point (a JSON patch may have turned a ClusterRole into a Role since);
/// `None`, accepting every candidate, where `roleRef`, its `apiGroup` or its `kind` is missing.
fn role_ref_selector(object: &Value) -> Option<(String, String)> {
    let role_ref = object.get("roleRef")?;
    let text = |field: &str| role_ref.get(field).map(super::replacements::kyaml_text);
    Some((text("apiGroup")?, text("kind")?))
}

fn original_namespace(resource: &Resource, schema: SchemaView) -> Option<String> {
    let original = resource.original_id();
    let api_version = if original.group.is_empty() {
        original.version.clone()
    } else {
        format!("{}/{}", original.group, original.version)
    };
    (!schema.is_cluster_scoped(&api_version, &original.kind))
        .then(|| effective_namespace(&original.namespace).to_string())
}

/// What kustomize's name-reference filter refuses at a field before looking for referrals:
/// a mapping without a `name` (the field spec cannot say which field to update), and in a
/// list, an element that is neither a scalar nor such a mapping.
fn refuse_unreferable(value: &Value) -> Result<(), &'static str> {
    let mapping = |map: &crate::value::Map| {
        if map.contains_key("name") {
            Ok(())
        } else {
            Err("path config error; no 'name' field in node")
        }
    };
    match value {
        Value::Object(map) => mapping(map),
        Value::Array(items) => items.iter().try_for_each(|item| match item {
            Value::Object(map) => mapping(map),
            Value::Array(_) => {
                Err("a list element is expected to be either a string or a map of string")
            }
            _ => Ok(()),
        }),
        _ => Ok(()),
    }
}

/// The namespaces each RoleBinding's ServiceAccount subjects name, read before any reference
/// is fixed: besides its own namespace and cluster-scoped resources, a namespaced RoleBinding
/// reaches only these (kustomize's `SubsetThatCouldBeReferencedByResource`). kustomize refuses
/// a subject namespace written without a value there.
fn rolebinding_subject_namespaces(
    resources: &[Resource],
    schema: SchemaView,
) -> Result<Vec<Vec<String>>, KustomizeError> {
    resources
        .iter()
        .map(|resource| {
            if resource.kind() != "RoleBinding"
                || schema.is_cluster_scoped(str_at(&resource.object, "/apiVersion"), "RoleBinding")
            {
                return Ok(Vec::new());
            }
            let subjects = resource.object.get("subjects").and_then(Value::as_array);
            let service_accounts = subjects.into_iter().flatten().filter(|subject| {
                subject.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
            });
            let mut namespaces = Vec::new();
            for subject in service_accounts {
                match subject.get("namespace") {
                    None => {}
                    Some(Value::String(namespace)) => namespaces.push(namespace.clone()),
                    Some(_) => {
                        return Err(KustomizeError::BlankSubjectNamespace {
                            resource: resource.id().to_string(),
                        });
                    }
                }
            }
            Ok(namespaces)
        })
        .collect()
}

impl<'a> CandidateIndex<'a> {
    /// Candidates by (kind, earlier name), and also by current namespace for the common
    /// lookup from a namespaced referrer, where copies of one base in many namespaces share
    /// earlier names.
    fn of(candidates: &'a [Candidate]) -> CandidateIndex<'a> {
        let mut index = CandidateIndex::default();
        for candidate in candidates {
            if let Some(original) = &candidate.original_namespace {
                let group = index.by_original_namespace.entry(original).or_default();
                if candidate.cluster_scoped {
                    group.cluster_scoped_now = true;
                } else if !group
                    .current_namespaces
                    .contains(&candidate.current.namespace.as_str())
                {
                    group.current_namespaces.push(&candidate.current.namespace);
                }
            }
        }
        for (position, candidate) in candidates.iter().enumerate() {
            let namespaced =
                !candidate.cluster_scoped && candidate.current.kind != "ServiceAccount";
            let namespace = effective_namespace(&candidate.current.namespace);
            for previous in &candidate.previous {
                let key = (previous.kind.as_str(), previous.name.as_str());
                push_once(index.by_name.entry(key).or_default(), position);
                if namespaced {
                    push_once(
                        index
                            .by_namespace
                            .entry((key.0, key.1, namespace))
                            .or_default(),
                        position,
                    );
                } else {
                    push_once(index.unscoped.entry(key).or_default(), position);
                }
            }
        }
        index
    }
}

/// Candidate positions by (kind, earlier name), and split by scope for namespaced lookups.
#[derive(Default)]
struct CandidateIndex<'a> {
    by_name: HashMap<(&'a str, &'a str), Vec<usize>>,
    /// Namespaced candidates (not ServiceAccounts) by their current namespace.
    by_namespace: HashMap<(&'a str, &'a str, &'a str), Vec<usize>>,
    /// Cluster-scoped candidates and ServiceAccounts, which any namespace may refer to.
    unscoped: HashMap<(&'a str, &'a str), Vec<usize>>,
    /// Every resource, of any kind, by the namespace it came from: where a referrer reaches
    /// any of them, a reference naming that namespace looks only among them.
    by_original_namespace: HashMap<&'a str, OriginalGroup<'a>>,
}

/// Where the resources that came from one namespace are now.
#[derive(Default)]
struct OriginalGroup<'a> {
    /// Their current namespaces as written, each once.
    current_namespaces: Vec<&'a str>,
    /// Whether one of them is cluster-scoped now (a JSON patch changed its kind).
    cluster_scoped_now: bool,
}

fn push_once(positions: &mut Vec<usize>, position: usize) {
    if positions.last() != Some(&position) {
        positions.push(position);
    }
}

fn effective_namespace(namespace: &str) -> &str {
    if namespace.is_empty() {
        "default"
    } else {
        namespace
    }
}

struct Context<'a> {
    reference: &'a NameReference,
    /// The referrer's field being updated, for errors.
    field: &'a str,
    referrer: &'a Candidate,
    /// The referrer's ServiceAccount subject namespaces, where it is a RoleBinding.
    subject_namespaces: &'a [String],
    candidates: &'a [Candidate],
    index: &'a CandidateIndex<'a>,
    /// For a `roleRef/name` field, the group and kind its `roleRef` names.
    role_ref: Option<&'a (String, String)>,
}

/// The new name kyaml writes over a reference's old one: a node with no tag, in the old one's
/// style. A plain old name (which reads as a string) leaves the new one plain, so a name a
/// JSON patch made `3` is the number 3; a quoted one keeps it a string.
fn renamed(new: &str, old: &str) -> Value {
    if yaml::plain_scalar(old, Schema::Kyaml).is_string() {
        yaml::plain_scalar(new, Schema::Kyaml)
    } else {
        Value::String(new.to_string())
    }
}

impl Context<'_> {
    /// Points the reference in `value` at the current name; the positions of the referred-to
    /// candidates go to `referrals`.
    fn update(
        &self,
        value: &mut Value,
        referrer_id: &ResId,
        referrals: &mut Vec<usize>,
    ) -> Result<(), KustomizeError> {
        match value {
            Value::String(name) => {
                if let Some(position) = self.select(name, None, false, referrer_id)? {
                    referrals.push(position);
                    let current = &self.candidates[position].current.name;
                    if current != name {
                        *value = renamed(current, name);
                    }
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.update(item, referrer_id, referrals)?;
                }
            }
            // As kustomize's setMapping: the map's own `kind` is not looked at (a User subject
            // named like a ServiceAccount follows it too).
            Value::Object(map) => {
                let Some(name) = map.get("name").and_then(Value::as_str).map(str::to_string) else {
                    return Ok(());
                };
                let namespace = map.get("namespace").map(super::replacements::kyaml_text);
                if let Some(position) =
                    self.select(&name, namespace.as_deref(), true, referrer_id)?
                {
                    referrals.push(position);
                    let found = &self.candidates[position];
                    if found.current.name != name {
                        map.insert("name".into(), renamed(&found.current.name, &name));
                    }
                    if !found.current.namespace.is_empty() {
                        map.insert(
                            "namespace".into(),
                            Value::String(found.current.namespace.clone()),
                        );
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The one candidate `name` (optionally in `namespace`) refers to, if any.
    /// `mapping`: the reference is a `{name, namespace}` map, which takes both from the
    /// referral, so candidates are the same only when both agree.
    fn select(
        &self,
        name: &str,
        namespace: Option<&str>,
        mapping: bool,
        referrer_id: &ResId,
    ) -> Result<Option<usize>, KustomizeError> {
        let kind = self.reference.kind.as_str();
        let positions: Vec<usize> = if namespace.is_none() && !self.referrer.cluster_scoped {
            let ns = effective_namespace(&self.referrer.current.namespace);
            let local = self
                .index
                .by_namespace
                .get(&(kind, name, ns))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let unscoped = self
                .index
                .unscoped
                .get(&(kind, name))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut positions: Vec<usize> = local.iter().chain(unscoped).copied().collect();
            // Keep resource order: ties are broken by the first candidate.
            positions.sort_unstable();
            positions
        } else {
            self.index
                .by_name
                .get(&(kind, name))
                .cloned()
                .unwrap_or_default()
        };
        if positions.is_empty() {
            return Ok(None);
        }
        // kustomize's filterMapCandidatesByNamespace: a `{name, namespace}` reference looks
        // among the resources that came from that namespace if the referrer reaches any, of
        // whatever kind, and otherwise among those now in it.
        let by_original_namespace = namespace.is_some_and(|ns| self.reaches_original_group(ns));
        let mut found: Vec<(usize, &Candidate)> = positions
            .iter()
            .map(|i| (*i, &self.candidates[*i]))
            .filter(|(_, c)| {
                c.previous
                    .iter()
                    .any(|p| p.name == name && self.reference.refers_to(p))
            })
            .filter(|(_, c)| self.reaches(c))
            .filter(|(_, c)| {
                self.role_ref.is_none_or(|(group, kind)| {
                    c.previous.iter().any(|id| {
                        (group.is_empty() || id.group == *group)
                            && (kind.is_empty() || id.kind == *kind)
                    })
                })
            })
            .filter(|(_, c)| match namespace {
                Some(ns) if by_original_namespace => c.original_namespace.as_deref() == Some(ns),
                Some(ns) => !c.cluster_scoped && effective_namespace(&c.current.namespace) == ns,
                None => true,
            })
            .filter(|(_, c)| self.same_namespace(c))
            .collect();
        if found.len() > 1 {
            found.retain(|(_, c)| affixes_agree(c, self.referrer, true));
        }
        if found.len() > 1 {
            found.retain(|(_, c)| affixes_agree(c, self.referrer, false));
        }
        match found.as_slice() {
            [] => Ok(None),
            [(one, _)] => Ok(Some(*one)),
            [(first, candidate), rest @ ..]
                if rest.iter().all(|(_, c)| {
                    c.current.name == candidate.current.name
                        && (!mapping || c.current.namespace == candidate.current.namespace)
                }) =>
            {
                Ok(Some(*first))
            }
            many => Err(KustomizeError::AmbiguousReference {
                referrer: referrer_id.to_string(),
                field: self.field.to_string(),
                name: name.to_string(),
                candidates: many
                    .iter()
                    .map(|(_, c)| c.current.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Whether the referrer can refer to `candidate` at all, before kustomize's sieve: a
    /// cluster-scoped referrer reaches everything; a namespaced one, cluster-scoped resources,
    /// its own namespace and, for a RoleBinding, its ServiceAccount subjects' namespaces (a
    /// ServiceAccount elsewhere is not reached, though the sieve would let it through).
    fn reaches(&self, candidate: &Candidate) -> bool {
        candidate.cluster_scoped || self.reaches_namespace(&candidate.current.namespace)
    }

    /// Whether the referrer reaches one of the resources that came from `namespace`.
    fn reaches_original_group(&self, namespace: &str) -> bool {
        self.index
            .by_original_namespace
            .get(namespace)
            .is_some_and(|group| {
                group.cluster_scoped_now
                    || group
                        .current_namespaces
                        .iter()
                        .any(|current| self.reaches_namespace(current))
            })
    }

    /// Whether the referrer reaches a namespaced resource now in `namespace` (as written).
    fn reaches_namespace(&self, namespace: &str) -> bool {
        self.referrer.cluster_scoped
            || namespaces_equal(&self.referrer.current.namespace, namespace)
            || self.subject_namespaces.iter().any(|ns| ns == namespace)
    }

    fn same_namespace(&self, candidate: &Candidate) -> bool {
        self.referrer.cluster_scoped
            || candidate.cluster_scoped
            || candidate.current.kind == "ServiceAccount"
            || namespaces_equal(
                &self.referrer.current.namespace,
                &candidate.current.namespace,
            )
    }
}

/// Prefixes and suffixes agree when their outermost ones match, one list ending the other;
/// `allow_empty`, also when either side has none (kustomize tries that first, then, if that
/// leaves several candidates, without it).
fn affixes_agree(candidate: &Candidate, referrer: &Candidate, allow_empty: bool) -> bool {
    let agree = |a: &History<String>, b: &History<String>| {
        if a.is_empty() || b.is_empty() {
            return allow_empty || a.len() == b.len();
        }
        let n = a.len().min(b.len());
        a.iter().take(n).eq(b.iter().take(n))
    };
    agree(&candidate.prefixes, &referrer.prefixes) && agree(&candidate.suffixes, &referrer.suffixes)
}
