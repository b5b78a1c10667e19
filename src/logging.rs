//! Log lines as Flux writes them: controller-runtime's zap logger configured by fluxcd/pkg
//! `runtime/logger`. `flux logs`, Loki and Elastic queries select on its keys, so ours are
//! the same: `level` (lowercase), `ts` (ISO 8601 with milliseconds, UTC), `logger` when the
//! line has one, `msg`, then the fields of the enclosing spans (outermost first) and of the
//! event. `--log-encoding=console` is zap's console encoder: tab-separated time, capital
//! level, logger and message, then the fields as spaced JSON.
//!
//! Data flows from `tracing`: a span of this crate stores its fields when created
//! ([`SpanFields`]); an event collects its own, and [`ZapLayer`] writes the line in one write
//! to the writer it was given. Two conventions carry what tracing's field model lacks:
//! a field named `logger` becomes the zap logger name, and a field named `json.<key>` whose
//! value is JSON text is written under `<key>` as JSON (an object, as zap writes a Go map):
//! as it is on a JSON line, so its producer writes it compact with sorted keys, as Go's
//! encoder writes a map.
//! Spans of other crates (kube's runtime has its own) add nothing: their keys are not Flux's.

use std::fmt::Write as _;
use std::io::Write as _;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// zap's two encoders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Json,
    Console,
}

/// The prefix of fields written as JSON rather than as a string.
const JSON_FIELD: &str = "json.";
/// Only this crate's spans carry Flux's keys.
const OWN_TARGET: &str = "kustomize_controller";

/// A span's fields in the order they were recorded, written out once, when the span is
/// made, for the layer's encoding (see [`Collector`]): every line in the span copies them.
#[derive(Clone, Debug, Default)]
pub struct SpanFields(String);

/// Collects an event's or a span's fields, writing each as the encoding writes a field
/// after the message: `,"key":value` in JSON, `, "key": value` on the console (whose
/// first separator the line drops).
struct Collector {
    encoding: Encoding,
    message: Option<String>,
    logger: Option<String>,
    fields: String,
}

impl Collector {
    fn new(encoding: Encoding) -> Collector {
        Collector {
            encoding,
            message: None,
            logger: None,
            fields: String::new(),
        }
    }

    /// Starts the field `key`; its value is written next.
    fn key(&mut self, key: &str) {
        let spaced = self.encoding == Encoding::Console;
        self.fields.push_str(if spaced { ", " } else { "," });
        push_json_string(&mut self.fields, key);
        self.fields.push_str(if spaced { ": " } else { ":" });
    }

    /// A field with a string value: the message, the logger, JSON text or a plain string.
    fn push_str(&mut self, field: &Field, text: &str) {
        match field.name() {
            "message" => self.message = Some(text.to_string()),
            "logger" => self.logger = Some(text.to_string()),
            name => match name.strip_prefix(JSON_FIELD) {
                // Valid JSON text is written as it is on a JSON line (producers write it
                // compact); the console spaces it out, so it is parsed there.
                Some(key) if self.encoding == Encoding::Json => {
                    self.key(key);
                    match serde_json::from_str::<&serde_json::value::RawValue>(text) {
                        Ok(raw) => self.fields.push_str(raw.get()),
                        Err(_) => push_json_string(&mut self.fields, text),
                    }
                }
                Some(key) => {
                    let value = serde_json::from_str(text)
                        .unwrap_or_else(|_| Value::String(text.to_string()));
                    self.push_value(key, &value);
                }
                None => {
                    self.key(name);
                    push_json_string(&mut self.fields, text);
                }
            },
        }
    }

    /// A field whose value is not a string.
    fn push(&mut self, field: &Field, value: Value) {
        match field.name() {
            "message" | "logger" => self.push_str(field, &value.to_string()),
            name => self.push_value(name.strip_prefix(JSON_FIELD).unwrap_or(name), &value),
        }
    }

    fn push_value(&mut self, key: &str, value: &Value) {
        self.key(key);
        push_json(&mut self.fields, value, self.encoding == Encoding::Console);
    }
}

impl Visit for Collector {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push_str(field, value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push_str(field, &value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.push_str(field, &format!("{value:?}"));
    }
}

/// A `tracing_subscriber` layer writing zap's lines to `writer`.
pub struct ZapLayer<W> {
    encoding: Encoding,
    writer: W,
}

impl<W> ZapLayer<W> {
    pub fn new(encoding: Encoding, writer: W) -> ZapLayer<W> {
        ZapLayer { encoding, writer }
    }
}

impl<S, W> tracing_subscriber::Layer<S> for ZapLayer<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + 'static,
{
    fn on_new_span(
        &self,
        attributes: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        if !attributes.metadata().target().starts_with(OWN_TARGET) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut collector = Collector::new(self.encoding);
        attributes.record(&mut collector);
        span.extensions_mut().insert(SpanFields(collector.fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(fields) = extensions.get_mut::<SpanFields>() {
            let mut collector = Collector::new(self.encoding);
            values.record(&mut collector);
            fields.0.push_str(&collector.fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut collector = Collector::new(self.encoding);
        event.record(&mut collector);
        let mut fields = String::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(own) = span.extensions().get::<SpanFields>() {
                    fields.push_str(&own.0);
                }
            }
        }
        fields.push_str(&collector.fields);
        let logger = collector.logger.or_else(|| {
            // Lines of other crates (kube's client and runtime) are named for the crate, as
            // zap names the loggers of controller-runtime's parts.
            let target = event.metadata().target();
            (!target.starts_with(OWN_TARGET))
                .then(|| target.split("::").next().unwrap_or(target).to_string())
        });
        let line = Line {
            level: *event.metadata().level(),
            time: timestamp(),
            logger: logger.as_deref(),
            message: collector.message.as_deref().unwrap_or(""),
            fields: &fields,
        };
        let text = match self.encoding {
            Encoding::Json => line.json(),
            Encoding::Console => line.console(),
        };
        // A log line that cannot be written has nowhere else to go.
        let _ = self.writer.make_writer().write_all(text.as_bytes());
    }
}

/// One log line, ready to encode.
pub struct Line<'a> {
    pub level: Level,
    /// ISO 8601, as [`timestamp`] writes it.
    pub time: String,
    pub logger: Option<&'a str>,
    pub message: &'a str,
    /// The fields, each after its separator, as [`Collector`] writes them for the encoding.
    pub fields: &'a str,
}

impl Line<'_> {
    /// zap's JSON encoder: one object per line, the fixed keys first.
    pub fn json(&self) -> String {
        let mut out = String::with_capacity(160);
        out.push_str("{\"level\":");
        push_json_string(&mut out, lowercase(self.level));
        out.push_str(",\"ts\":");
        push_json_string(&mut out, &self.time);
        if let Some(logger) = self.logger {
            out.push_str(",\"logger\":");
            push_json_string(&mut out, logger);
        }
        out.push_str(",\"msg\":");
        push_json_string(&mut out, self.message);
        out.push_str(self.fields);
        out.push_str("}\n");
        out
    }

    /// zap's console encoder: `time\tLEVEL\tlogger\tmessage\t{"key": value, …}`, the logger
    /// and the fields only when there are some.
    pub fn console(&self) -> String {
        let mut out = String::with_capacity(160);
        out.push_str(&self.time);
        out.push('\t');
        out.push_str(capital(self.level));
        if let Some(logger) = self.logger {
            out.push('\t');
            out.push_str(logger);
        }
        out.push('\t');
        out.push_str(self.message);
        if !self.fields.is_empty() {
            out.push_str("\t{");
            out.push_str(self.fields.strip_prefix(", ").unwrap_or(self.fields));
            out.push('}');
        }
        out.push('\n');
        out
    }
}

/// fluxcd/pkg's lowercase level names; logr has no warning level, zap calls it `warn`.
fn lowercase(level: Level) -> &'static str {
    match level {
        Level::TRACE => "trace",
        Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

fn capital(level: Level) -> &'static str {
    match level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        Level::ERROR => "ERROR",
    }
}

/// Now, as zap's ISO 8601 encoder writes it in UTC: `2026-11-26T15:45:22.123Z`.
pub fn timestamp() -> String {
    iso8601_millis(k8s_openapi::jiff::Timestamp::now())
}

fn iso8601_millis(at: k8s_openapi::jiff::Timestamp) -> String {
    let now = at.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC).datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        now.year(),
        now.month(),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.subsec_nanosecond() / 1_000_000
    )
}

fn push_json_string(out: &mut String, text: &str) {
    // What JSON needs escaped is rare in a log line's keys and values: those without it are
    // copied as they are, the others escaped as serde_json escapes them.
    if text
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
    {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        // Serialising a string cannot fail.
        out.push_str(&serde_json::to_string(text).unwrap_or_default());
    }
}

/// JSON text of `value`; `spaced` as zap's console encoder writes nested objects and arrays.
fn push_json(out: &mut String, value: &Value, spaced: bool) {
    let (colon, comma) = if spaced { (": ", ", ") } else { (":", ",") };
    match value {
        Value::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push_str(comma);
                }
                push_json_string(out, key);
                out.push_str(colon);
                push_json(out, item, spaced);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(comma);
                }
                push_json(out, item, spaced);
            }
            out.push(']');
        }
        Value::String(text) => push_json_string(out, text),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// A fresh reconcile ID: a random UUID (version 4), as controller-runtime gives each
/// reconciliation.
pub fn reconcile_id() -> String {
    let high = fastrand::u64(..);
    let low = fastrand::u64(..);
    let high = (high & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
    let low = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

/// What the layer writes while `emit` runs, with lines below `level` filtered out: for tests
/// of what other modules log.
#[cfg(test)]
pub(crate) fn captured(
    encoding: Encoding,
    level: tracing_subscriber::filter::LevelFilter,
    emit: impl FnOnce(),
) -> String {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    let writer = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(level)
        .with(ZapLayer::new(encoding, writer.clone()));
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = writer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(encoding: Encoding, emit: impl FnOnce()) -> String {
        captured(
            encoding,
            tracing_subscriber::filter::LevelFilter::TRACE,
            emit,
        )
    }

    fn in_a_reconcile() {
        let span = tracing::error_span!(
            "reconcile",
            controller = "kustomization",
            json.Kustomization = r#"{"name":"podinfo","namespace":"apps"}"#,
            namespace = "apps",
            name = "podinfo",
            reconcileID = "7d0c1a3e-0000-4000-8000-000000000000",
        );
        let _entered = span.enter();
        tracing::info!(
            json.output = r#"{"ConfigMap/apps/podinfo":"created"}"#,
            revision = "main@sha1:3e7c",
            "server-side apply completed"
        );
    }

    #[test]
    fn json_lines_have_zaps_keys_in_zaps_order() {
        let text = logged(Encoding::Json, in_a_reconcile);
        let (head, rest) = text.split_once(",\"msg\"").unwrap();
        assert!(head.starts_with("{\"level\":\"info\",\"ts\":\""), "{text}");
        assert_eq!(
            rest,
            ":\"server-side apply completed\",\"controller\":\"kustomization\",\
             \"Kustomization\":{\"name\":\"podinfo\",\"namespace\":\"apps\"},\
             \"namespace\":\"apps\",\"name\":\"podinfo\",\
             \"reconcileID\":\"7d0c1a3e-0000-4000-8000-000000000000\",\
             \"output\":{\"ConfigMap/apps/podinfo\":\"created\"},\"revision\":\"main@sha1:3e7c\"}\n"
        );
    }

    #[test]
    fn the_timestamp_is_iso8601_with_milliseconds_in_utc() {
        let time = timestamp();
        assert_eq!(time.len(), "2026-11-26T15:45:22.123Z".len(), "{time}");
        assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
        assert_eq!(&time[19..20], ".");
    }

    #[test]
    fn timestamps_are_written_as_strftime_writes_them() {
        for text in [
            "2026-11-26T15:45:22.123456789Z",
            "2026-01-02T03:04:05Z",
            "1999-12-31T23:59:59.999999Z",
            "2030-06-07T08:09:10.001Z",
        ] {
            let at: k8s_openapi::jiff::Timestamp = text.parse().unwrap();
            assert_eq!(
                iso8601_millis(at),
                at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
                "{text}"
            );
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in [
            "plain",
            "",
            "quote \" inside",
            "back\\slash",
            "new\nline\ttab",
            "bell \u{7}",
            "unicode é ✓ \u{2028}",
            "del \u{7f}",
        ] {
            let mut out = String::new();
            push_json_string(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn console_lines_are_zaps_tab_separated_columns() {
        let text = logged(Encoding::Console, in_a_reconcile);
        let columns: Vec<&str> = text.trim_end().split('\t').collect();
        assert_eq!(columns.len(), 4, "{text}");
        assert_eq!(columns[1], "INFO");
        assert_eq!(columns[2], "server-side apply completed");
        assert_eq!(
            columns[3],
            "{\"controller\": \"kustomization\", \
             \"Kustomization\": {\"name\": \"podinfo\", \"namespace\": \"apps\"}, \
             \"namespace\": \"apps\", \"name\": \"podinfo\", \
             \"reconcileID\": \"7d0c1a3e-0000-4000-8000-000000000000\", \
             \"output\": {\"ConfigMap/apps/podinfo\": \"created\"}, \"revision\": \"main@sha1:3e7c\"}"
        );
    }

    #[test]
    fn a_named_logger_comes_before_the_message() {
        let json = logged(Encoding::Json, || {
            tracing::info!(logger = "setup", "starting manager")
        });
        assert!(
            json.contains("\",\"logger\":\"setup\",\"msg\":\"starting manager\"}"),
            "{json}"
        );
        let console = logged(Encoding::Console, || {
            tracing::error!(logger = "setup", error = "boom", "unable to start manager")
        });
        let columns: Vec<&str> = console.trim_end().split('\t').collect();
        assert_eq!(
            columns[1..],
            [
                "ERROR",
                "setup",
                "unable to start manager",
                "{\"error\": \"boom\"}"
            ]
        );
    }

    #[test]
    fn levels_are_fluxs_names() {
        for (level, json, console) in [
            (Level::TRACE, "trace", "TRACE"),
            (Level::DEBUG, "debug", "DEBUG"),
            (Level::INFO, "info", "INFO"),
            (Level::ERROR, "error", "ERROR"),
        ] {
            assert_eq!((lowercase(level), capital(level)), (json, console));
        }
    }

    #[test]
    fn values_keep_their_json_types_and_other_crates_name_the_logger() {
        let text = logged(
            Encoding::Json,
            || tracing::info!(target: "kube_runtime::controller", workers = 4u64, ratio = 0.5, on = true, "x"),
        );
        assert!(
            text.contains(
                "\"logger\":\"kube_runtime\",\"msg\":\"x\",\"workers\":4,\"ratio\":0.5,\"on\":true}"
            ),
            "{text}"
        );
    }

    /// A `json.*` field whose text is not JSON is written as a string, on both encodings,
    /// and JSON text on the console is spaced out as zap's console encoder writes it.
    #[test]
    fn json_fields_that_are_not_json_are_written_as_strings() {
        let emit = || tracing::info!(json.output = "not {json", json.list = "[1,2]", "x");
        let json = logged(Encoding::Json, emit);
        assert!(
            json.contains("\"output\":\"not {json\",\"list\":[1,2]}"),
            "{json}"
        );
        let console = logged(Encoding::Console, emit);
        assert!(
            console.contains("\"output\": \"not {json\", \"list\": [1, 2]}"),
            "{console}"
        );
    }

    #[test]
    fn fields_recorded_on_a_span_later_are_written_too() {
        let text = logged(Encoding::Json, || {
            let span =
                tracing::error_span!("reconcile", name = "web", revision = tracing::field::Empty);
            span.record("revision", "main@sha1:1");
            let _entered = span.enter();
            tracing::info!("x");
        });
        assert!(
            text.ends_with("\"msg\":\"x\",\"name\":\"web\",\"revision\":\"main@sha1:1\"}\n"),
            "{text}"
        );
    }

    #[test]
    fn reconcile_ids_are_version_4_uuids() {
        let id = reconcile_id();
        let groups: Vec<&str> = id.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'), "{id}");
        assert!(matches!(&groups[3][..1], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(id, reconcile_id());
    }
}
