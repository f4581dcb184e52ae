//! Spans as toolrun builds them before encoding: ids, parent links, times and attributes.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// `Span.kind` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    StrArray(Vec<String>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<f64> for Value {
    fn from(d: f64) -> Value {
        Value::Double(d)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub(crate) name: String,
    pub(crate) time_ns: u64,
    pub(crate) attributes: Vec<(String, Value)>,
}

#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) parent_span_id: Option<[u8; 8]>,
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    pub(crate) attributes: Vec<(String, Value)>,
    pub(crate) events: Vec<Event>,
    /// Set on failure: the span's status becomes ERROR with this description.
    pub(crate) error: Option<String>,
}

/// Where a span hangs: a trace and, unless it is a root, the span it is a child of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parent {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: Option<[u8; 8]>,
    /// The W3C `sampled` flag: a caller's trace that is not sampled records no children.
    pub(crate) sampled: bool,
}

impl Parent {
    /// A new trace with no parent span.
    pub(crate) fn root() -> Parent {
        let mut trace_id = [0; 16];
        trace_id[..8].copy_from_slice(&random_u64().to_be_bytes());
        trace_id[8..].copy_from_slice(&random_u64().to_be_bytes());
        Parent {
            trace_id,
            span_id: None,
            sampled: true,
        }
    }

    /// W3C `traceparent` (`00-<trace id>-<parent id>-<flags>`); `None` for anything else, as
    /// the recommendation asks (an invalid header starts a new trace). A later version is read
    /// by its first four fields, as the recommendation says, and may carry more.
    pub(crate) fn from_traceparent(header: &str) -> Option<Parent> {
        let parts: Vec<&str> = header.trim().split('-').collect();
        let (version, trace, span, flags) = match parts.as_slice() {
            [v, t, s, f] => (*v, *t, *s, *f),
            [v, t, s, f, ..] if *v != "00" => (*v, *t, *s, *f),
            _ => return None,
        };
        let version: [u8; 1] = unhex(version)?.try_into().ok()?;
        let [flags]: [u8; 1] = unhex(flags)?.try_into().ok()?;
        if version == [0xff] {
            return None;
        }
        let trace_id: [u8; 16] = unhex(trace)?.try_into().ok()?;
        let span_id: [u8; 8] = unhex(span)?.try_into().ok()?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Parent {
            trace_id,
            span_id: Some(span_id),
            sampled: flags & 1 == 1,
        })
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// Ids need to be unique, not secret: the std hasher's random keys, a counter and the clock.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(now_ns().into());
    h.write_u32(std::process::id());
    h.finish().max(1)
}

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Span {
    pub(crate) fn new(parent: Parent, name: impl Into<String>, kind: Kind) -> Span {
        Span {
            trace_id: parent.trace_id,
            span_id: random_u64().to_be_bytes(),
            parent_span_id: parent.span_id,
            name: name.into(),
            kind,
            start_ns: 0,
            end_ns: 0,
            attributes: Vec::new(),
            events: Vec::new(),
            error: None,
        }
    }

    /// The context its children hang from.
    pub(crate) fn as_parent(&self) -> Parent {
        Parent {
            trace_id: self.trace_id,
            span_id: Some(self.span_id),
            sampled: true,
        }
    }

    pub(crate) fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Span {
        self.attributes.push((key.to_string(), value.into()));
        self
    }

    pub(crate) fn timed(&mut self, start_ns: u64, duration_ms: f64) -> &mut Span {
        self.start_ns = start_ns;
        self.end_ns = start_ns + (duration_ms.max(0.0) * 1_000_000.0) as u64;
        self
    }

    /// Marks the span failed: `error.type` is `kind` (a word of toolrun's vocabularies or a
    /// status code), `detail` the error's own words, which leave the process only with content
    /// capture (see [`Span::withhold_content`]).
    pub(crate) fn fail(&mut self, kind: impl Into<String>, detail: String) -> &mut Span {
        self.set("error.type", kind.into());
        self.error = Some(detail);
        self
    }

    /// `error.type`, when the span has one.
    pub(crate) fn error_type(&self) -> Option<&str> {
        self.attributes.iter().find_map(|(k, v)| match v {
            Value::Str(s) if k == "error.type" => Some(s.as_str()),
            _ => None,
        })
    }

    /// Without content capture an error's own words stay home: they quote the arguments, the
    /// URL and the service's reply (`.../patients?name=... returned HTTP 500: {...}`), which is
    /// content as much as the arguments are. The status then says only what `error.type` says.
    /// Done where every span leaves the process, so no mapping can forget it.
    pub(crate) fn withhold_content(&mut self) {
        if self.error.is_some() {
            self.error = Some(describe(self.error_type().unwrap_or("")));
        }
        for event in &mut self.events {
            if event.name == "exception" {
                event
                    .attributes
                    .retain(|(k, _)| k == "exception.type" || k == "exception.escaped");
            }
        }
    }
}

/// The fixed description of an error of kind `kind`: nothing in it comes from the error itself.
pub(crate) fn describe(kind: &str) -> String {
    use crate::vocab::{ErrorKind, StopReason};
    if let Some(k) = ErrorKind::parse(kind) {
        return match k {
            ErrorKind::UnknownTool => "the model called a tool the spec does not have",
            ErrorKind::InvalidArguments => "the arguments do not match the tool's input schema",
            ErrorKind::Denied => "the policy refused the call",
            ErrorKind::LoopDetected => "the same call was repeated too often",
            ErrorKind::LimitExceeded => "a limit was reached",
            ErrorKind::Timeout => "the call did not finish in time",
            ErrorKind::HttpStatus => "the service answered with an error status",
            ErrorKind::Network => "the service could not be reached",
            ErrorKind::NotFound => "no response matches the arguments",
            ErrorKind::ExecutionError => "the tool failed",
            ErrorKind::MalformedDecision => "the model's reply could not be read",
            ErrorKind::ModelError => "the model call failed",
        }
        .to_string();
    }
    if let Some(r) = StopReason::parse(kind) {
        return format!("the run stopped: {}", r.as_str().replace('_', " "));
    }
    match kind.parse::<i64>() {
        Ok(code @ 100..=599) => format!("HTTP {code}"),
        Ok(code) => format!("JSON-RPC error {code}"),
        Err(_) => match kind {
            "tool_error" => "the tool reported an error",
            "test_failed" => "the test failed",
            "replay_diverged" => "the replay diverged from the recording",
            _ => "failed",
        }
        .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_parsed_and_bad_ones_are_refused() {
        let p = Parent::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap();
        assert_eq!(p.trace_id[0], 0x4b);
        assert_eq!(p.span_id.unwrap()[7], 0xb7);
        assert!(p.sampled);
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02";
        assert!(!Parent::from_traceparent(unsampled).unwrap().sampled);
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert_eq!(Parent::from_traceparent(later), Some(p));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u{1b}[31m",
        ] {
            assert_eq!(Parent::from_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn without_content_an_error_says_its_kind_in_fixed_words() {
        let mut span = Span::new(Parent::root(), "execute_tool lookup", Kind::Internal);
        let said = "GET http://h/patients?name=Jane+Roe returned HTTP 500: {\"error\": \"HIV\"}";
        span.fail("http_status", said.to_string());
        span.events.push(Event {
            name: "exception".into(),
            time_ns: 0,
            attributes: vec![
                ("exception.type".into(), "http_status".into()),
                ("exception.message".into(), said.into()),
            ],
        });
        span.withhold_content();
        assert_eq!(
            span.error.as_deref(),
            Some("the service answered with an error status")
        );
        assert_eq!(span.events[0].attributes.len(), 1);
        for (kind, description) in [
            ("404", "HTTP 404"),
            ("-32602", "JSON-RPC error -32602"),
            ("run_timeout", "the run stopped: run timeout"),
            ("tool_error", "the tool reported an error"),
            ("whatever a recording says", "failed"),
        ] {
            assert_eq!(describe(kind), description);
        }
        let mut ok = Span::new(Parent::root(), "chat m", Kind::Client);
        ok.withhold_content();
        assert_eq!(ok.error, None);
    }

    #[test]
    fn ids_differ() {
        let a = Span::new(Parent::root(), "a", Kind::Internal);
        let b = Span::new(a.as_parent(), "b", Kind::Internal);
        assert_ne!(a.span_id, b.span_id);
        assert_eq!(a.trace_id, b.trace_id);
        assert_eq!(b.parent_span_id, Some(a.span_id));
    }
}
