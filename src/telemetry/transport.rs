//! How each export request travels, from the OTLP exporter's standard settings: its timeout
//! (`OTEL_EXPORTER_OTLP_TIMEOUT`), gzip (`OTEL_EXPORTER_OTLP_COMPRESSION`) and TLS
//! (`OTEL_EXPORTER_OTLP_CERTIFICATE`, `_CLIENT_KEY`, `_CLIENT_CERTIFICATE`). Each has a
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
    /// PEM certificates that replace the system's roots for an `https` collector.
    pub(crate) roots: Option<Vec<u8>>,
    /// The client key and certificate chain (PEM, together) for a collector that asks for one.
    pub(crate) identity: Option<Vec<u8>>,
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
    let roots = setting(get, "CERTIFICATE", warnings, |name, path| {
        let pem = read_pem(name, path, "trusted certificates")?;
        match reqwest::Certificate::from_pem_bundle(&pem) {
            Ok(certs) if !certs.is_empty() => Ok(pem),
            _ => Err(format!(
                "{name}: {} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`); it is ignored and the system's roots are used",
                shown_path(path)
            )),
        }
    });
    let identity = identity(get, warnings);
    Transport {
        timeout,
        gzip,
        roots,
        identity,
    }
}

/// The mTLS client key and its certificate: both or neither (one alone is a warning).
fn identity(get: &impl Fn(&str) -> Option<String>, warnings: &mut Vec<Warning>) -> Option<Vec<u8>> {
    let key = setting(get, "CLIENT_KEY", warnings, |name, path| {
        read_pem(name, path, "a private key").map(|pem| (name.to_string(), pem))
    });
    let cert = setting(get, "CLIENT_CERTIFICATE", warnings, |name, path| {
        read_pem(name, path, "a certificate").map(|pem| (name.to_string(), pem))
    });
    let set = |what: &str| {
        get(&format!("OTEL_EXPORTER_OTLP_TRACES_{what}")).is_some()
            || get(&format!("OTEL_EXPORTER_OTLP_{what}")).is_some()
    };
    match (key, cert) {
        (None, None) => None,
        // The other one was set but could not be read: that was its warning.
        (Some(_), None) if set("CLIENT_CERTIFICATE") => None,
        (None, Some(_)) if set("CLIENT_KEY") => None,
        (Some((name, _)), None) => {
            warnings.push(format!(
                "{name} is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, the certificate of that key; no client certificate is sent"
            ));
            None
        }
        (None, Some((name, _))) => {
            warnings.push(format!(
                "{name} is set without OTEL_EXPORTER_OTLP_CLIENT_KEY, the certificate's private key; no client certificate is sent"
            ));
            None
        }
        (Some((key_name, key)), Some((cert_name, cert))) => {
            let mut pem = key;
            pem.push(b'\n');
            pem.extend_from_slice(&cert);
            match reqwest::Identity::from_pem(&pem) {
                Ok(_) => Some(pem),
                Err(_) => {
                    warnings.push(format!(
                        "{key_name} and {cert_name} are not a PEM private key (PKCS#8, RSA or EC) and a PEM certificate; no client certificate is sent"
                    ));
                    None
                }
            }
        }
    }
}

/// A file's bytes. The path is shown (paths are not secrets), the contents never are.
fn read_pem(name: &str, path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| {
        format!(
            "{name}: cannot read {}: {}; it should name a PEM file holding {what}; it is ignored",
            shown_path(path),
            crate::term::visible(&e.to_string())
        )
    })
}

fn shown_path(path: &str) -> String {
    format!("`{}`", crate::term::visible(path))
}

impl Transport {
    /// The HTTP client these settings describe.
    pub(crate) fn client(&self) -> Result<reqwest::Client, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        // Read and checked when the settings were; a failure here would be reqwest's own.
        if let Some(pem) = &self.roots {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())?;
            builder = builder.tls_certs_only(certs);
        }
        if let Some(pem) = &self.identity {
            builder =
                builder.identity(reqwest::Identity::from_pem(pem).map_err(|e| e.to_string())?);
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

    #[test]
    fn certificate_files_that_cannot_be_used_are_warnings() {
        let (t, w) = transport(&[(
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            "/nonexistent/toolrun/ca.pem",
        )]);
        assert!(t.roots.is_none());
        assert!(
            w[0].contains("cannot read `/nonexistent/toolrun/ca.pem`"),
            "{w:?}"
        );
        let (t, w) = transport(&[("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/nonexistent/k.pem")]);
        assert!(t.identity.is_none());
        assert_eq!(w.len(), 1, "{w:?}");
    }
}
