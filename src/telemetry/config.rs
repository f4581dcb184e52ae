//! Export settings from the standard `OTEL_*` variables and the `--otlp` flags. Nothing here
//! connects: it only decides whether and where traces go.

use super::span::{Parent, Value};
use super::transport::Transport;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    Protobuf,
    Json,
}

#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The full traces URL (`…/v1/traces`).
    pub(crate) endpoint: String,
    pub(crate) protocol: Protocol,
    /// Sent with every export; values are secrets (never printed, never exported).
    pub(crate) headers: Vec<(String, String)>,
    /// Each request's timeout, compression and TLS.
    pub(crate) transport: Transport,
    pub(crate) resource: Vec<(String, Value)>,
    /// How long toolrun waits at exit for spans still queued.
    pub(crate) exit_timeout: Duration,
    /// Messages, arguments and results as span attributes (masked).
    pub(crate) content: bool,
    /// The trace a CI job (or any caller) runs toolrun in (`TRACEPARENT`).
    pub(crate) parent: Option<Parent>,
    /// `OTEL_SEMCONV_STABILITY_OPT_IN` holds `gen_ai_latest_experimental`: only the current
    /// attribute names, without the older `gen_ai.system` beside `gen_ai.provider.name`.
    pub(crate) latest_only: bool,
    /// Settings that were ignored while export stays on, said once at start.
    pub(crate) warnings: Vec<Warning>,
}

/// Waiting longer than this at exit would make a dead collector a slow command.
const MAX_EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the command line asked for.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    pub otlp: Option<String>,
    pub content: bool,
}

/// A problem with the settings: said once, export stays off, the command goes on.
pub(crate) type Warning = String;

/// `None` when nothing asks for export (or `OTEL_SDK_DISABLED=true` and no `--otlp`).
pub(crate) fn from_env(
    flags: &Flags,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Config>, Warning> {
    let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let mut warnings = Vec::new();
    let disabled = boolean(&get, "OTEL_SDK_DISABLED", &mut warnings);
    let (endpoint, source) = if let Some(url) = &flags.otlp {
        (traces_url(url), "--otlp")
    } else {
        if disabled {
            return Ok(None);
        }
        let found = match (
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(url), _) => (url.trim().to_string(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            (None, Some(base)) => (traces_url(&base), "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (None, None) => return Ok(None),
        };
        // Read only once an endpoint is set: unconfigured, toolrun reads three variables.
        if traces_exporter_off(&get, &mut warnings) {
            return Ok(None);
        }
        found
    };
    check_url(&endpoint, source)?;
    let protocol = match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
        .map(str::trim)
    {
        None | Some("http/protobuf") => Protocol::Protobuf,
        Some("http/json") => Protocol::Json,
        Some(other) => {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL `{}` is not supported; use http/protobuf or http/json",
                crate::term::visible(other)
            ))
        }
    };
    // The signal's own variable takes the general one's place whole, as the SDKs read them
    // (the general one may hold another backend's key).
    let headers = key_value_list(
        get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| get("OTEL_EXPORTER_OTLP_HEADERS"))
            .as_deref(),
    );
    let content = capture_content(&get, &mut warnings) || flags.content;
    let exit_timeout = match get("OTEL_BSP_EXPORT_TIMEOUT").map(|v| v.trim().parse::<u64>()) {
        None => Duration::from_secs(1),
        Some(Ok(ms)) => Duration::from_millis(ms).min(MAX_EXIT_TIMEOUT),
        Some(Err(_)) => {
            warnings.push("OTEL_BSP_EXPORT_TIMEOUT is not a whole number of milliseconds; toolrun waits its default 1000 ms at exit".into());
            Duration::from_secs(1)
        }
    };
    let latest_only = get("OTEL_SEMCONV_STABILITY_OPT_IN").is_some_and(|v| {
        v.split(',')
            .any(|s| s.trim() == "gen_ai_latest_experimental")
    });
    let resource = resource(&get, &mut warnings);
    let transport = super::transport::from_env(&get, &mut warnings);
    Ok(Some(Config {
        endpoint,
        protocol,
        headers,
        transport,
        resource,
        exit_timeout,
        content,
        parent: get("TRACEPARENT").and_then(|t| Parent::from_traceparent(&t)),
        latest_only,
        warnings,
    }))
}

/// A boolean variable as the configuration specification reads it: only `true` (any case) is
/// true; a value other than `true`, `false` or empty is also a warning.
fn boolean(get: &impl Fn(&str) -> Option<String>, name: &str, warnings: &mut Vec<Warning>) -> bool {
    let Some(v) = get(name) else {
        return false;
    };
    let v = v.trim();
    if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
        warnings.push(format!(
            "{name} is `{}`, read as false; it takes true or false",
            crate::term::visible(v)
        ));
    }
    v.eq_ignore_ascii_case("true")
}

/// `OTEL_TRACES_EXPORTER=none` turns the environment's traces off (a shared
/// `OTEL_EXPORTER_OTLP_ENDPOINT` may be meant for other signals); toolrun has only `otlp`.
fn traces_exporter_off(get: &impl Fn(&str) -> Option<String>, warnings: &mut Vec<Warning>) -> bool {
    let Some(v) = get("OTEL_TRACES_EXPORTER") else {
        return false;
    };
    let names: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    if names.iter().any(|n| n == "none") {
        return true;
    }
    if !names.iter().any(|n| n == "otlp") {
        warnings.push(format!(
            "OTEL_TRACES_EXPORTER is `{}`: toolrun exports OTLP only, and does",
            crate::term::visible(v.trim())
        ));
    }
    false
}

/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: `true`/`false`, or the modes the
/// OpenTelemetry GenAI instrumentations take with the latest conventions (`SPAN_ONLY`,
/// `SPAN_AND_EVENT`, `EVENT_ONLY`, `NO_CONTENT`); toolrun puts content on spans only.
fn capture_content(get: &impl Fn(&str) -> Option<String>, warnings: &mut Vec<Warning>) -> bool {
    const NAME: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
    let Some(v) = get(NAME) else {
        return false;
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "span_only" | "span_and_event" => true,
        "false" | "no_content" => false,
        "event_only" => {
            warnings.push(format!("{NAME}=EVENT_ONLY: toolrun records content on spans only (SPAN_ONLY), so none is sent"));
            false
        }
        _ => boolean(get, NAME, warnings),
    }
}

/// The base endpoint gets the signal's path, as the exporter specification says; a URL that
/// already ends in `/v1/traces` is used as it is.
fn traces_url(base: &str) -> String {
    let base = base.trim();
    if base.trim_end_matches('/').ends_with("/v1/traces") {
        return base.to_string();
    }
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// The value is not shown: without an http(s) scheme nothing tells its host from a password
/// (`user:secret@host:4318` reads as scheme `user`).
fn check_url(url: &str, source: &str) -> Result<(), Warning> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => Err(format!(
            "the OTLP endpoint of {source} is not an http(s) URL with a host; write it as http://HOST:PORT (e.g. http://127.0.0.1:4318); traces are not exported"
        )),
    }
}

/// A URL as warnings show it: no user, password, query or fragment (they can hold keys).
pub(crate) fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => "(not an http(s) URL)".to_string(),
        Ok(u) => {
            let host = u.host_str().unwrap_or("");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}{}", u.scheme(), u.path()),
                None => format!("{}://{host}{}", u.scheme(), u.path()),
            }
        }
        Err(_) => "(unparsable URL)".to_string(),
    }
}

/// `k1=v1,k2=v2` with percent-encoded values (W3C Baggage format, as the variables use).
fn key_value_list(text: Option<&str>) -> Vec<(String, String)> {
    let Some(text) = text else {
        return Vec::new();
    };
    text.split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            let k = k.trim();
            let v = percent_encoding::percent_decode_str(v.trim()).decode_utf8_lossy();
            (!k.is_empty()).then(|| (k.to_string(), v.into_owned()))
        })
        .collect()
}

/// `OTEL_RESOURCE_ATTRIBUTES` as the resource SDK specification reads it: W3C Baggage
/// `key=value` members, keys and values percent-decoded (`,` and `=` in them must be encoded);
/// an entry without `=`, an empty key or a broken `%` escape makes the whole list invalid.
fn baggage_list(text: &str) -> Result<Vec<(String, String)>, String> {
    let decode = |part: &str, n: usize| -> Result<String, String> {
        let bytes = part.as_bytes();
        let broken = bytes.iter().enumerate().any(|(i, b)| {
            *b == b'%'
                && !bytes
                    .get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        });
        if broken {
            return Err(format!(
                "entry {n} has a `%` not followed by two hex digits"
            ));
        }
        // Octets that are not UTF-8 become U+FFFD, as W3C Baggage asks.
        Ok(percent_encoding::percent_decode_str(part)
            .decode_utf8_lossy()
            .into_owned())
    };
    let mut pairs = Vec::new();
    for (i, member) in text.split(',').enumerate() {
        let n = i + 1;
        if member.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = member.split_once('=') else {
            return Err(format!("entry {n} has no `=`"));
        };
        let key = decode(k.trim(), n)?;
        if key.is_empty() {
            return Err(format!("entry {n} has an empty key"));
        }
        pairs.push((key, decode(v.trim(), n)?));
    }
    Ok(pairs)
}

fn resource(
    get: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<Warning>,
) -> Vec<(String, Value)> {
    let listed = match get("OTEL_RESOURCE_ATTRIBUTES").map(|t| baggage_list(&t)) {
        None => Vec::new(),
        Some(Ok(pairs)) => pairs,
        // The specification: on any error the whole variable is discarded and the error
        // reported (its text is not shown: it may be anything a CI job put there).
        Some(Err(why)) => {
            warnings.push(format!(
                "OTEL_RESOURCE_ATTRIBUTES is ignored: {why}; it takes `key=value` pairs separated by commas, with `,`, `=` and `%` in keys and values percent-encoded"
            ));
            Vec::new()
        }
    };
    let mut attrs: Vec<(String, Value)> = listed
        .into_iter()
        .map(|(k, v)| (k, Value::Str(v)))
        .collect();
    // OTEL_SERVICE_NAME wins over a service.name among the resource attributes.
    let service = get("OTEL_SERVICE_NAME").map(|s| s.trim().to_string());
    let from_attrs = attrs.iter().position(|(k, _)| k == "service.name");
    match (service, from_attrs) {
        (Some(name), Some(i)) => attrs[i].1 = Value::Str(name),
        (Some(name), None) => attrs.push(("service.name".into(), Value::Str(name))),
        (None, Some(_)) => {}
        (None, None) => attrs.push(("service.name".into(), "toolrun".into())),
    }
    for (k, v) in [
        ("telemetry.sdk.name", "toolrun"),
        ("telemetry.sdk.language", "rust"),
        ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
    ] {
        attrs.push((k.to_string(), v.into()));
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)], flags: Flags) -> Result<Option<Config>, Warning> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_env(&flags, |k| map.get(k).cloned())
    }

    #[test]
    fn nothing_set_is_no_export() {
        assert!(config(&[], Flags::default()).unwrap().is_none());
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(config(&off, Flags::default()).unwrap().is_none());
    }

    #[test]
    fn endpoints_get_the_traces_path_unless_signal_specific() {
        let c = config(
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")],
            Flags::default(),
        );
        assert_eq!(c.unwrap().unwrap().endpoint, "http://h:4318/v1/traces");
        let c = config(
            &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1/x")],
            Flags::default(),
        );
        assert_eq!(c.unwrap().unwrap().endpoint, "http://h:1/x");
        let flags = Flags {
            otlp: Some("http://h:2/v1/traces".into()),
            content: false,
        };
        assert_eq!(
            config(&[], flags).unwrap().unwrap().endpoint,
            "http://h:2/v1/traces"
        );
    }

    #[test]
    fn headers_resource_and_service_name() {
        let c = config(
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "authorization=Bearer%20abc, x-team = a",
                ),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=a,deployment.environment=ci",
                ),
                ("OTEL_SERVICE_NAME", "agent"),
                ("OTEL_BSP_EXPORT_TIMEOUT", "999999"),
            ],
            Flags::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.headers[0], ("authorization".into(), "Bearer abc".into()));
        assert_eq!(c.headers[1], ("x-team".into(), "a".into()));
        assert_eq!(c.resource[0], ("service.name".into(), "agent".into()));
        assert_eq!(c.exit_timeout, MAX_EXIT_TIMEOUT);
    }

    #[test]
    fn resource_attributes_are_percent_decoded_or_ignored_whole() {
        assert_eq!(
            baggage_list("env=ci%2Cprod, my%3Dkey = a%3Db ,,k=%E2%9C%93").unwrap(),
            [
                ("env".to_string(), "ci,prod".to_string()),
                ("my=key".to_string(), "a=b".to_string()),
                ("k".to_string(), "\u{2713}".to_string()),
            ]
        );
        for bad in ["a=1,b", "a=1,=2", "a=%ZZ", "a%2=1", "a=1%"] {
            assert!(baggage_list(bad).is_err(), "{bad}");
        }
        let c = config(
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                ("OTEL_RESOURCE_ATTRIBUTES", "team=a,broken"),
            ],
            Flags::default(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.warnings.len(), 1);
        assert!(!c.resource.iter().any(|(k, _)| k == "team"));
    }

    #[test]
    fn bad_settings_are_warnings() {
        let bad = [("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")];
        assert!(config(&bad, Flags::default()).is_err());
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert!(config(&grpc, Flags::default()).is_err());
    }

    #[test]
    fn shown_urls_drop_credentials_and_queries() {
        assert_eq!(
            shown_url("http://u:p@h:1/v1/traces?key=s#f"),
            "http://h:1/v1/traces"
        );
        assert_eq!(shown_url("user:pw@h:4318"), "(not an http(s) URL)");
    }
}
