//! How each export request travels, from the OTLP exporter's standard settings: its timeout
//! (`OTEL_EXPORTER_OTLP_TIMEOUT`) and gzip (`OTEL_EXPORTER_OTLP_COMPRESSION`). Each has a
//! `OTEL_EXPORTER_OTLP_TRACES_*` twin that, when set and readable, is used instead.

use std::io::Write as _;
use std::time::Duration;

/// A setting that could not be used, said once at start (as `config::Warning`).
type Warning = String;

/// The exporter specification's default for `OTEL_EXPORTER_OTLP_TIMEOUT`.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub(crate) struct Transport {
    /// The most one export request may take; `None` for `0`, which the specification reads
    /// as no limit (the wait at exit is still bounded by `OTEL_BSP_EXPORT_TIMEOUT`).
    pub(crate) timeout: Option<Duration>,
    pub(crate) gzip: bool,
}

/// The signal's own variable, then the general one: the first that is set and readable wins;
/// one that is set and unreadable is a warning (saying what `read` expected) and is passed over,
/// as the configuration specification says of values it cannot parse.
fn setting<T>(
    get: &impl Fn(&str) -> Option<String>,
    what: &str,
    warnings: &mut Vec<Warning>,
    read: impl Fn(&str, &str) -> Result<T, String>,
) -> Option<T> {
    for name in [
        format!("OTEL_EXPORTER_OTLP_TRACES_{what}"),
        format!("OTEL_EXPORTER_OTLP_{what}"),
    ] {
        if let Some(value) = get(&name) {
            match read(&name, value.trim()) {
                Ok(v) => return Some(v),
                Err(why) => warnings.push(why),
            }
        }
    }
    None
}

pub(crate) fn from_env(
    get: &impl Fn(&str) -> Option<String>,
    warnings: &mut Vec<Warning>,
) -> Transport {
    let timeout = setting(get, "TIMEOUT", warnings, |name, v| match v.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(Duration::from_millis(ms))),
        Err(_) => Err(format!(
            "{name} is `{}`, not a whole number of milliseconds (0 for no limit); it is ignored (the default is {} ms)",
            crate::term::visible(v),
            DEFAULT_TIMEOUT.as_millis()
        )),
    })
    .unwrap_or(Some(DEFAULT_TIMEOUT));
    let gzip = setting(get, "COMPRESSION", warnings, |name, v| {
        match v.to_ascii_lowercase().as_str() {
            "gzip" => Ok(true),
            "none" => Ok(false),
            _ => Err(format!(
                "{name} is `{}`; it takes gzip or none, so requests are sent uncompressed",
                crate::term::visible(v)
            )),
        }
    })
    .unwrap_or(false);
    Transport { timeout, gzip }
}

impl Transport {
    /// The HTTP client these settings describe; `None` for no request timeout.
    pub(crate) fn client(&self) -> Result<reqwest::Client, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        builder.build().map_err(|e| e.without_url().to_string())
    }

    /// The request body as sent, and its `Content-Encoding`.
    pub(crate) fn body(&self, body: Vec<u8>) -> (Vec<u8>, Option<&'static str>) {
        if !self.gzip {
            return (body, None);
        }
        let mut encoder = flate2::write::GzEncoder::new(
            Vec::with_capacity(body.len() / 4),
            flate2::Compression::default(),
        );
        // Writing into a Vec cannot fail; if it ever did, the body goes uncompressed.
        match encoder.write_all(&body).and_then(|()| encoder.finish()) {
            Ok(gz) => (gz, Some("gzip")),
            Err(_) => (body, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn transport(vars: &[(&str, &str)]) -> (Transport, Vec<Warning>) {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        let get = |k: &str| map.get(k).map(|v| v.to_string());
        let mut warnings = Vec::new();
        (from_env(&get, &mut warnings), warnings)
    }

    #[test]
    fn the_signals_own_setting_wins_and_an_unreadable_one_is_passed_over() {
        let (t, w) = transport(&[]);
        assert_eq!(
            (t.timeout, t.gzip, w.len()),
            (Some(DEFAULT_TIMEOUT), false, 0)
        );
        let (t, w) = transport(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"),
        ]);
        assert_eq!((t.timeout, t.gzip, w.len()), (None, false, 0));
        let (t, w) = transport(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-1"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "GZIP"),
        ]);
        assert_eq!(t.timeout, Some(Duration::from_millis(250)));
        assert!(t.gzip);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT is `-1`"));
        let (t, w) = transport(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "br")]);
        assert!(!t.gzip);
        assert!(w[0].contains("gzip or none"), "{w:?}");
    }

    #[test]
    fn gzip_bodies_decode_to_the_same_bytes() {
        use std::io::Read as _;
        let (t, _) = transport(&[("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")]);
        let plain = b"resourceSpans ".repeat(100);
        let (gz, encoding) = t.body(plain.clone());
        assert_eq!(encoding, Some("gzip"));
        assert!(gz.len() < plain.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, plain);
    }
}
