//! What a collector's answer to an export request means, as the OTLP specification's OTLP/HTTP
//! sections say: "Retryable Response Codes" (429, 502, 503 and 504 SHOULD be retried, "all other
//! `4xx` or `5xx` response status codes MUST NOT be retried"), "Throttling" (honour
//! `Retry-After`, else "an exponential backoff strategy"), "All Other Responses" and
//! "Connection" (a dropped connection or one that cannot be made is retried with backoff and
//! jitter), and "Partial Success" (accepted, never retried, the rejection reported).

use super::otlp;
use crate::net::retry::{parse_retry_after, Backoff};
use std::time::Duration;

/// Tries of one batch, the first included (the Java SDK's default).
pub(crate) const MAX_ATTEMPTS: u32 = 5;

/// Waits between tries when the collector does not say: 0.1–0.2 s, then doubling, so a batch
/// is given up about 3 s after its first try at the latest. Short, because most commands send
/// their one batch at exit, where they wait only `OTEL_BSP_EXPORT_TIMEOUT` (1 s by default).
pub(crate) const BACKOFF: Backoff = Backoff {
    base: Duration::from_millis(200),
    max: Duration::from_secs(5),
};

/// The longest `Retry-After` toolrun waits while the command runs: a collector asking for
/// more is given up on at once (waiting less than it asked would break its throttling).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// At most this much of an answer's body is read (a `Status` or an `ExportTraceServiceResponse`
/// is a few hundred bytes).
pub(crate) const MAX_BODY: usize = 64 * 1024;

#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Taken, with what the collector's `partial_success` said, if it said anything.
    Accepted(Option<Partial>),
    /// Worth another try: why not this time, and the wait the collector asked for.
    Retry {
        why: String,
        after: Option<Duration>,
    },
    /// Refused for good, or failed in a way another try would not change.
    Failed(String),
}

/// `ExportTracePartialSuccess`: spans the collector dropped, or a warning when none.
#[derive(Debug, PartialEq)]
pub(crate) struct Partial {
    pub(crate) rejected: i64,
    pub(crate) message: String,
}

/// An HTTP answer, read.
pub(crate) struct Answer<'a> {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<&'a str>,
    /// The body is JSON (the answer's `Content-Type`, else the request's protocol).
    pub(crate) json: bool,
    pub(crate) body: &'a [u8],
}

pub(crate) fn retryable(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

pub(crate) fn outcome(answer: &Answer<'_>) -> Outcome {
    let status = answer.status;
    if (200..300).contains(&status) {
        return Outcome::Accepted(partial_success(answer));
    }
    let mut why = format!("the collector answered HTTP {status}");
    if let Some(message) = status_message(answer) {
        why = format!("{why} ({})", shortened(&message));
    }
    if !retryable(status) {
        return Outcome::Failed(why);
    }
    // The throttling section names `Retry-After` for 429 and 503 only.
    let after = match status {
        429 | 503 => answer.retry_after.and_then(parse_retry_after),
        _ => None,
    };
    Outcome::Retry { why, after }
}

fn partial_success(answer: &Answer<'_>) -> Option<Partial> {
    let (rejected, message) = if answer.json {
        let v: serde_json::Value = serde_json::from_slice(answer.body).ok()?;
        let p = v
            .get("partialSuccess")
            .or_else(|| v.get("partial_success"))?;
        let rejected = p.get("rejectedSpans").or_else(|| p.get("rejected_spans"));
        // int64 is a string in the JSON mapping; parsers take a number too.
        let rejected = match rejected {
            Some(serde_json::Value::String(s)) => s.parse().ok()?,
            Some(n) => n.as_i64()?,
            None => 0,
        };
        let message = p.get("errorMessage").or_else(|| p.get("error_message"));
        let message = message.and_then(|m| m.as_str()).unwrap_or("");
        (rejected, message.to_string())
    } else {
        otlp::decode_partial_success(answer.body)?
    };
    // An empty `partial_success` is the same as none.
    (rejected != 0 || !message.is_empty()).then(|| Partial {
        rejected,
        message: shortened(&message),
    })
}

/// The developer-facing `message` of the `google.rpc.Status` a failure carries.
fn status_message(answer: &Answer<'_>) -> Option<String> {
    let message = if answer.json {
        let v: serde_json::Value = serde_json::from_slice(answer.body).ok()?;
        v.get("message")?.as_str()?.to_string()
    } else {
        otlp::decode_status_message(answer.body)?
    };
    let message = message.trim();
    (!message.is_empty()).then(|| message.to_string())
}

/// A collector's words, on one line and not too long for a warning.
fn shortened(s: &str) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Whether a request that got no answer is worth another try: a connection that could not be
/// made or broke, or a timeout, is; a TLS failure (an untrusted certificate) or a request
/// reqwest could not build is not.
pub(crate) fn transient(e: &reqwest::Error) -> bool {
    if e.is_builder() || e.is_redirect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if is_tls(s) {
            return false;
        }
        source = s.source();
    }
    true
}

/// A rustls error, itself or wrapped in `io::Error`s (whose `source` skips what they wrap).
fn is_tls(mut e: &(dyn std::error::Error + 'static)) -> bool {
    loop {
        if e.is::<rustls::Error>() {
            return true;
        }
        match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => e = inner,
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after: Option<&str>, json: bool, body: &[u8]) -> Outcome {
        outcome(&Answer {
            status,
            retry_after,
            json,
            body,
        })
    }

    #[test]
    fn only_429_502_503_and_504_are_retried_and_retry_after_only_on_429_and_503() {
        for status in [429, 502, 503, 504] {
            assert!(
                matches!(
                    answer(status, None, true, b""),
                    Outcome::Retry { after: None, .. }
                ),
                "{status}"
            );
        }
        for status in [400, 401, 403, 404, 408, 413, 500, 501, 505] {
            assert_eq!(
                answer(status, Some("1"), true, b""),
                Outcome::Failed(format!("the collector answered HTTP {status}"))
            );
        }
        let wait = |status| match answer(status, Some("2"), false, b"") {
            Outcome::Retry { after, .. } => after,
            other => panic!("{other:?}"),
        };
        assert_eq!(wait(429), Some(Duration::from_secs(2)));
        assert_eq!(wait(503), Some(Duration::from_secs(2)));
        assert_eq!(wait(502), None);
        assert_eq!(
            answer(503, Some("Sun, 06 Nov 1994 08:49:37 GMT"), true, b""),
            Outcome::Retry {
                why: "the collector answered HTTP 503".into(),
                after: Some(Duration::ZERO)
            }
        );
    }

    #[test]
    fn partial_success_is_read_in_either_encoding_and_an_empty_one_is_none() {
        let json = br#"{"partialSuccess":{"rejectedSpans":"3","errorMessage":"too\nold"}}"#;
        let expected = Some(Partial {
            rejected: 3,
            message: "too old".into(),
        });
        assert_eq!(answer(200, None, true, json), Outcome::Accepted(expected));
        assert_eq!(
            answer(200, None, true, br#"{"partialSuccess":{}}"#),
            Outcome::Accepted(None)
        );
        assert_eq!(answer(200, None, true, b"{}"), Outcome::Accepted(None));
        assert_eq!(answer(200, None, false, b""), Outcome::Accepted(None));
        // ExportTraceServiceResponse { partial_success: { rejected_spans: 0, error_message } }
        let proto = [&[0x0a, 0x06, 0x12, 0x04][..], b"slow"].concat();
        assert_eq!(
            answer(200, None, false, &proto),
            Outcome::Accepted(Some(Partial {
                rejected: 0,
                message: "slow".into()
            }))
        );
        // Garbage is no partial success, not a failure.
        assert_eq!(
            answer(200, None, false, b"\xff\xff"),
            Outcome::Accepted(None)
        );
    }

    #[test]
    fn a_tls_failure_is_found_inside_the_io_errors_that_wrap_it() {
        use std::io::{Error, ErrorKind};
        // As hyper-rustls hands it over: io(Other) around io(InvalidData) around rustls.
        let certificate = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let wrapped = Error::other(Error::new(ErrorKind::InvalidData, certificate));
        assert!(is_tls(&wrapped));
        assert!(!is_tls(&Error::other(Error::from(
            ErrorKind::ConnectionRefused
        ))));
    }

    #[test]
    fn a_failures_status_message_is_part_of_the_reason() {
        // google.rpc.Status { code: 3, message: "bad span" }
        let proto = [&[0x08, 0x03, 0x12, 0x08][..], b"bad span"].concat();
        assert_eq!(
            answer(400, None, false, &proto),
            Outcome::Failed("the collector answered HTTP 400 (bad span)".into())
        );
        assert_eq!(
            answer(400, None, true, br#"{"code":3,"message":"bad span"}"#),
            Outcome::Failed("the collector answered HTTP 400 (bad span)".into())
        );
        let long = "x".repeat(400);
        let Outcome::Failed(why) = answer(
            400,
            None,
            true,
            &serde_json::to_vec(&serde_json::json!({ "message": long })).unwrap(),
        ) else {
            panic!()
        };
        assert!(why.ends_with("x…)") && why.len() < 340, "{why}");
    }
}
