//! A loopback stand-in for notification-controller (`--events-addr`) and what it accepts.

use std::sync::Arc;

use serde_json::Value;

/// A loopback stand-in for notification-controller: records the JSON bodies POSTed to it.
pub async fn event_receiver() -> (String, Arc<std::sync::Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    let received: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let sink = received.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut data = Vec::new();
                let mut buffer = [0u8; 8192];
                loop {
                    let Ok(n) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    data.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&data).to_string();
                    let Some(split) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let length: usize = text[..split]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if data.len() >= split + 4 + length {
                        if let Ok(body) =
                            serde_json::from_slice::<Value>(&data[split + 4..split + 4 + length])
                        {
                            sink.lock().unwrap().push(body);
                        }
                        let _ = stream
                            .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                            .await;
                        return;
                    }
                }
            });
        }
    });
    (address, received)
}

/// notification-controller's view of a POSTed event (fluxcd/pkg apis/event v1beta1 `Event`
/// and its event server): the required fields with their types and bounds, then its metadata
/// cleanup, which keeps only keys prefixed with the involved object's API group or
/// `event.toolkit.fluxcd.io/` (and drops checksum and digest).
pub fn accepted_by_notification_controller(event: &Value) -> Value {
    let object = &event["involvedObject"];
    for field in ["apiVersion", "kind", "name", "namespace"] {
        assert!(
            object[field].as_str().is_some_and(|v| !v.is_empty()),
            "involvedObject.{field}: {event}"
        );
    }
    assert!(
        ["trace", "info", "error"].contains(&event["severity"].as_str().unwrap_or("")),
        "severity: {event}"
    );
    let timestamp = event["timestamp"].as_str().expect("timestamp");
    assert!(
        timestamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "timestamp is RFC 3339: {timestamp}"
    );
    let message = event["message"].as_str().expect("message");
    assert!(message.chars().count() <= 39_000);
    for field in ["reason", "reportingController"] {
        assert!(
            event[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field}: {event}"
        );
    }
    let metadata = event["metadata"].as_object().cloned().unwrap_or_default();
    assert!(
        metadata.values().all(Value::is_string),
        "metadata is map[string]string"
    );
    let group = object["apiVersion"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let object_prefix = format!("{group}/");
    let kept: serde_json::Map<String, Value> = metadata
        .into_iter()
        .filter(|(key, _)| {
            !key.eq_ignore_ascii_case(&format!("{object_prefix}checksum"))
                && !key.eq_ignore_ascii_case(&format!("{object_prefix}digest"))
                && (key.starts_with("event.toolkit.fluxcd.io/") || key.starts_with(&object_prefix))
        })
        .collect();
    let mut cleaned = event.clone();
    cleaned["metadata"] = Value::Object(kept);
    cleaned
}
