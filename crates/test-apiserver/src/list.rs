//! List requests as kube-apiserver answers them: `resourceVersion` and
//! `resourceVersionMatch` choose the snapshot (latest, not older than N, exactly N — rebuilt
//! from the change history, `410 Expired` once compacted), and `limit`/`continue` page
//! through one snapshot: a continue token carries the snapshot's resourceVersion and the
//! last key returned, so later pages do not see writes made between them.

use base64::Engine as _;
use serde_json::{Value, json};

use super::errors::ApiError;
use super::handler::{Filters, Reply, Request, ResourceRoute, present};
use super::store::{EventType, Store};

/// Where a page starts: the snapshot and the last (namespace, name) already returned.
struct Continue {
    resource_version: u64,
    after: (String, String),
}

impl Continue {
    fn encode(&self) -> String {
        let token = json!({"v": "meta.k8s.io/v1", "rv": self.resource_version,
            "start": format!("{}/{}\u{0}", self.after.0, self.after.1)});
        base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
    }

    fn decode(text: &str) -> Option<Continue> {
        let bytes = base64::engine::general_purpose::URL_SAFE
            .decode(text)
            .ok()?;
        let token: Value = serde_json::from_slice(&bytes).ok()?;
        let start = token["start"].as_str()?.strip_suffix('\u{0}')?;
        let (namespace, name) = start.split_once('/')?;
        Some(Continue {
            resource_version: token["rv"].as_u64()?,
            after: (namespace.to_string(), name.to_string()),
        })
    }
}

fn invalid_options(problem: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {problem}"),
    )
}

/// The resourceVersion of the snapshot a list reads, validated as kube-apiserver validates
/// `ListOptions`.
fn snapshot_version(store: &Store, request: &Request) -> Result<(u64, Option<Continue>), ApiError> {
    let query = &request.query;
    let requested = query.get("resourceVersion").map_or("", String::as_str);
    let matching = query.get("resourceVersionMatch").map_or("", String::as_str);
    let token = query.get("continue").filter(|c| !c.is_empty());
    if !matching.is_empty() && requested.is_empty() {
        return Err(invalid_options(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless \
             resourceVersion is provided",
        ));
    }
    if !matches!(matching, "" | "Exact" | "NotOlderThan") {
        return Err(invalid_options(&format!(
            "resourceVersionMatch: Unsupported value: {matching:?}: supported values: \
             \"Exact\", \"NotOlderThan\""
        )));
    }
    if matching == "Exact" && requested == "0" {
        return Err(invalid_options(
            "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for \
             resourceVersion \"0\"",
        ));
    }
    if let Some(token) = token {
        if !requested.is_empty() && requested != "0" {
            return Err(invalid_options(
                "resourceVersion: Forbidden: specifying resource version is not allowed when \
                 using continue",
            ));
        }
        let position = Continue::decode(token)
            .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
        if position.resource_version < store.compacted {
            let mut error = ApiError::new(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list \
                 result. You can start a new list without the continue parameter, or use the \
                 continue token in this response to retrieve the remainder of the results. \
                 Continuing with the provided token results in an inconsistent list - objects \
                 that were created, modified, or deleted between the time the first chunk was \
                 returned and now may show up in the list.",
            );
            error.list_continue = Some(
                Continue {
                    resource_version: store.resource_version,
                    after: position.after,
                }
                .encode(),
            );
            return Err(error);
        }
        return Ok((position.resource_version, Some(position)));
    }
    if requested.is_empty() || requested == "0" {
        return Ok((store.resource_version, None));
    }
    let version: u64 = requested
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {requested:?}")))?;
    if version > store.resource_version {
        let mut error = ApiError::new(
            504,
            "Timeout",
            format!(
                "Too large resource version: {version}, current: {}",
                store.resource_version
            ),
        );
        error.details = Some(json!({"causes": [{"reason": "ResourceVersionTooLarge",
            "message": "Too large resource version"}]}));
        error.retry_after = Some(1);
        return Err(error);
    }
    if matching == "Exact" {
        if version < store.compacted {
            return Err(ApiError::new(
                410,
                "Expired",
                "The resourceVersion for the provided list is too old.",
            ));
        }
        return Ok((version, None));
    }
    // Not older than `version`: the latest state is.
    Ok((store.resource_version, None))
}

/// The objects of `route`'s resource as they were at `version`, keyed by (namespace, name):
/// the current objects with every later change undone.
fn snapshot(store: &Store, route: &ResourceRoute, version: u64) -> Vec<((String, String), Value)> {
    let (group, plural) = route.rt.storage_key();
    let in_scope = |namespace: &str| route.namespace.as_deref().is_none_or(|n| n == namespace);
    let mut objects: std::collections::BTreeMap<(String, String), Value> = store
        .stored(&group, &plural, route.namespace.as_deref())
        .map(|((_, _, ns, name), object)| ((ns.clone(), name.clone()), object.clone()))
        .collect();
    let later = store
        .history
        .iter()
        .rev()
        .take_while(|event| event.resource_version > version);
    for event in later {
        if event.group != group || event.plural != plural || !in_scope(&event.namespace) {
            continue;
        }
        let name = event.object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let key = (event.namespace.clone(), name);
        match (&event.event_type, &event.previous) {
            (EventType::Added, _) => {
                objects.remove(&key);
            }
            (_, Some(previous)) => {
                objects.insert(key, previous.clone());
            }
            (_, None) => {}
        }
    }
    objects.into_iter().collect()
}

pub fn list(store: &Store, request: &Request, route: &ResourceRoute) -> Result<Reply, ApiError> {
    let filters = Filters::parse(&request.query, &route.rt.kind)?;
    let (version, position) = snapshot_version(store, request)?;
    let matching: Vec<((String, String), Value)> = snapshot(store, route, version)
        .into_iter()
        .filter(|(key, object)| {
            filters.matches(object) && position.as_ref().is_none_or(|p| *key > p.after)
        })
        .collect();
    let limit: usize = request
        .query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let metadata_only = request.accept.contains("as=PartialObjectMetadataList");
    let page: Vec<Value> = matching
        .iter()
        .take(limit)
        .map(|(_, o)| {
            if metadata_only {
                json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": o["metadata"]})
            } else if route.rt.custom.is_some() {
                present(&route.rt, o)
            } else {
                let mut item = o.clone();
                if let Some(map) = item.as_object_mut() {
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                item
            }
        })
        .collect();
    let mut metadata = json!({"resourceVersion": version.to_string()});
    if page.len() < matching.len() {
        let last = matching[page.len() - 1].0.clone();
        metadata["continue"] = json!(
            Continue {
                resource_version: version,
                after: last,
            }
            .encode()
        );
        metadata["remainingItemCount"] = json!(matching.len() - page.len());
    }
    let (api_version, kind) = if metadata_only {
        (
            "meta.k8s.io/v1".to_string(),
            "PartialObjectMetadataList".to_string(),
        )
    } else {
        (route.rt.api_version(), format!("{}List", route.rt.kind))
    };
    Ok(Reply::ok(json!({
        "apiVersion": api_version, "kind": kind, "metadata": metadata, "items": page,
    })))
}

#[cfg(test)]
mod tests {
    use super::super::rbac::Identity;
    use super::*;

    fn request(query: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            path: "/api/v1/configmaps".into(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            content_type: String::new(),
            accept: String::new(),
            user_agent: String::new(),
            identity: Identity::admin(),
            credentials: Default::default(),
            body: Vec::new(),
        }
    }

    // Not an integration test: kube's client retries a 504 with Retry-After for minutes.
    #[test]
    fn a_future_resource_version_times_out_as_too_large() {
        let store = Store::new();
        let error = snapshot_version(&store, &request(&[("resourceVersion", "999999")]))
            .err()
            .expect("refused");
        assert_eq!((error.code, error.reason), (504, "Timeout"));
        assert_eq!(
            error.message,
            format!(
                "Too large resource version: 999999, current: {}",
                store.resource_version
            )
        );
        let continued = snapshot_version(
            &store,
            &request(&[("resourceVersion", "5"), ("continue", "x")]),
        )
        .err()
        .expect("refused");
        assert_eq!(continued.code, 422);
    }
}
