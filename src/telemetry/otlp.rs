//! The few OTLP trace messages toolrun sends, encoded by hand: protobuf (`http/protobuf`, the
//! default) and the OTLP/JSON mapping (`http/json`). Field numbers are those of
//! `opentelemetry/proto/trace/v1/trace.proto` and `common/v1/common.proto` (OTLP 1.x).

use super::span::{Span, Value};
use std::fmt::Write as _;

/// What the service says about itself once per request.
pub(crate) struct Resource<'a> {
    pub(crate) attributes: &'a [(String, Value)],
    pub(crate) scope_version: &'a str,
}

pub(crate) const SCOPE: &str = "toolrun";

/// The semantic conventions the attribute names follow.
fn schema_url() -> String {
    format!(
        "https://opentelemetry.io/schemas/{}",
        super::SEMCONV_VERSION
    )
}

// ---- protobuf ----

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    tag(out, field, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A nested message: encoded into a scratch buffer first, since its length comes first.
fn message(out: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    body(&mut inner);
    bytes_field(out, field, &inner);
}

fn any_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Str(s) => bytes_field(out, 1, s.as_bytes()),
        Value::Bool(b) => {
            tag(out, 2, 0);
            varint(out, u64::from(*b));
        }
        Value::Int(i) => {
            tag(out, 3, 0);
            varint(out, *i as u64);
        }
        Value::Double(d) => fixed64(out, 4, d.to_bits()),
        Value::StrArray(items) => message(out, 5, |arr| {
            for s in items {
                message(arr, 1, |item| bytes_field(item, 1, s.as_bytes()));
            }
        }),
    }
}

fn key_values(out: &mut Vec<u8>, field: u32, attrs: &[(String, Value)]) {
    for (k, v) in attrs {
        message(out, field, |kv| {
            bytes_field(kv, 1, k.as_bytes());
            message(kv, 2, |val| any_value(val, v));
        });
    }
}

fn span_proto(out: &mut Vec<u8>, s: &Span) {
    bytes_field(out, 1, &s.trace_id);
    bytes_field(out, 2, &s.span_id);
    if let Some(parent) = &s.parent_span_id {
        bytes_field(out, 4, parent);
    }
    bytes_field(out, 5, s.name.as_bytes());
    tag(out, 6, 0);
    varint(out, s.kind as u64);
    fixed64(out, 7, s.start_ns);
    fixed64(out, 8, s.end_ns);
    key_values(out, 9, &s.attributes);
    for e in &s.events {
        message(out, 11, |ev| {
            fixed64(ev, 1, e.time_ns);
            bytes_field(ev, 2, e.name.as_bytes());
            key_values(ev, 3, &e.attributes);
        });
    }
    if let Some(error) = &s.error {
        message(out, 15, |st| {
            bytes_field(st, 2, error.as_bytes());
            tag(st, 3, 0);
            varint(st, 2);
        });
    }
    // flags: the W3C trace flags (sampled), as `fixed32`.
    tag(out, 16, 5);
    out.extend_from_slice(&1u32.to_le_bytes());
}

/// An `ExportTraceServiceRequest` holding one resource, one scope and `spans`.
pub(crate) fn encode_proto(resource: &Resource<'_>, spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::new();
    message(&mut out, 1, |rs| {
        message(rs, 1, |res| key_values(res, 1, resource.attributes));
        message(rs, 2, |ss| {
            message(ss, 1, |scope| {
                bytes_field(scope, 1, SCOPE.as_bytes());
                bytes_field(scope, 2, resource.scope_version.as_bytes());
            });
            for s in spans {
                message(ss, 2, |sp| span_proto(sp, s));
            }
            bytes_field(ss, 3, schema_url().as_bytes());
        });
    });
    out
}

// ---- answers ----

/// A protobuf message's fields as (number, value), in order; `None` when it is malformed.
/// Only what toolrun reads is kept: varints and length-delimited fields.
fn fields(mut buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    fn read_varint(buf: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = buf.split_first()?;
            *buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = read_varint(&mut buf)?;
        let field = match key & 7 {
            0 => Field::Varint(read_varint(&mut buf)?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                buf = buf.get(n..)?;
                Field::Other
            }
            2 => {
                let len = usize::try_from(read_varint(&mut buf)?).ok()?;
                let bytes = buf.get(..len)?;
                buf = &buf[len..];
                Field::Bytes(bytes)
            }
            _ => return None,
        };
        out.push((key >> 3, field));
    }
    Some(out)
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

/// The last occurrence of a string field, as protobuf reads a repeated singular field.
fn string_field(fields: &[(u64, Field<'_>)], number: u64) -> Option<String> {
    fields.iter().rev().find_map(|(n, f)| match f {
        Field::Bytes(b) if *n == number => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    })
}

/// `ExportTraceServiceResponse.partial_success` (field 1): `rejected_spans` (1, int64) and
/// `error_message` (2).
pub(crate) fn decode_partial_success(body: &[u8]) -> Option<(i64, String)> {
    let response = fields(body)?;
    let partial = response.iter().rev().find_map(|(n, f)| match f {
        Field::Bytes(b) if *n == 1 => Some(*b),
        _ => None,
    })?;
    let partial = fields(partial)?;
    let rejected = partial.iter().rev().find_map(|(n, f)| match f {
        Field::Varint(v) if *n == 1 => Some(*v as i64),
        _ => None,
    });
    Some((
        rejected.unwrap_or(0),
        string_field(&partial, 2).unwrap_or_default(),
    ))
}

/// `google.rpc.Status.message` (field 2), which a failure's body carries.
pub(crate) fn decode_status_message(body: &[u8]) -> Option<String> {
    string_field(&fields(body)?, 2)
}

// ---- OTLP/JSON ----

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn json_value(v: &Value) -> serde_json::Value {
    use serde_json::json;
    match v {
        Value::Str(s) => json!({ "stringValue": s }),
        Value::Bool(b) => json!({ "boolValue": b }),
        // 64-bit integers are strings in the protobuf JSON mapping.
        Value::Int(i) => json!({ "intValue": i.to_string() }),
        Value::Double(d) => json!({ "doubleValue": d }),
        Value::StrArray(items) => {
            let values: Vec<_> = items.iter().map(|s| json!({ "stringValue": s })).collect();
            json!({ "arrayValue": { "values": values } })
        }
    }
}

fn json_attrs(attrs: &[(String, Value)]) -> serde_json::Value {
    attrs
        .iter()
        .map(|(k, v)| serde_json::json!({ "key": k, "value": json_value(v) }))
        .collect()
}

fn span_json(s: &Span) -> serde_json::Value {
    let mut span = serde_json::json!({
        "traceId": hex(&s.trace_id),
        "spanId": hex(&s.span_id),
        "name": s.name,
        "kind": s.kind as u8,
        "startTimeUnixNano": s.start_ns.to_string(),
        "endTimeUnixNano": s.end_ns.to_string(),
        "attributes": json_attrs(&s.attributes),
        "flags": 1,
    });
    if let Some(parent) = &s.parent_span_id {
        span["parentSpanId"] = hex(parent).into();
    }
    if !s.events.is_empty() {
        span["events"] = s
            .events
            .iter()
            .map(|e| {
                serde_json::json!({
                    "timeUnixNano": e.time_ns.to_string(),
                    "name": e.name,
                    "attributes": json_attrs(&e.attributes),
                })
            })
            .collect();
    }
    if let Some(error) = &s.error {
        span["status"] = serde_json::json!({ "code": 2, "message": error });
    }
    span
}

pub(crate) fn encode_json(resource: &Resource<'_>, spans: &[Span]) -> Vec<u8> {
    let body = serde_json::json!({
        "resourceSpans": [{
            "resource": { "attributes": json_attrs(resource.attributes) },
            "scopeSpans": [{
                "scope": { "name": SCOPE, "version": resource.scope_version },
                "spans": spans.iter().map(span_json).collect::<Vec<_>>(),
                "schemaUrl": schema_url(),
            }],
        }],
    });
    body.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, 1);
        assert_eq!(out, [1]);
    }

    #[test]
    fn json_follows_the_otlp_json_mapping() {
        use crate::telemetry::span::{Kind, Parent, Span};
        let parent =
            Parent::from_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                .unwrap();
        let mut span = Span::new(parent, "chat m", Kind::Client);
        span.timed(1_000_000_000, 2.5);
        span.set("gen_ai.usage.input_tokens", 12i64).set(
            "gen_ai.response.finish_reasons",
            Value::StrArray(vec!["stop".into()]),
        );
        span.error = Some("boom".into());
        let attrs = [("service.name".to_string(), Value::from("toolrun"))];
        let resource = Resource {
            attributes: &attrs,
            scope_version: "0.1.0",
        };
        let body: serde_json::Value =
            serde_json::from_slice(&encode_json(&resource, &[span])).unwrap();
        let rs = &body["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"][0]["value"]["stringValue"],
            "toolrun"
        );
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s["parentSpanId"], "00f067aa0ba902b7");
        assert_eq!(s["kind"], 3);
        assert_eq!(s["startTimeUnixNano"], "1000000000");
        assert_eq!(s["endTimeUnixNano"], "1002500000");
        assert_eq!(s["attributes"][0]["value"]["intValue"], "12");
        assert_eq!(
            s["attributes"][1]["value"]["arrayValue"]["values"][0]["stringValue"],
            "stop"
        );
        assert_eq!(s["status"]["code"], 2);
        assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "toolrun");
    }

    #[test]
    fn answers_decode_from_what_the_encoder_writes() {
        let mut partial = Vec::new();
        tag(&mut partial, 1, 0);
        varint(&mut partial, 7);
        bytes_field(&mut partial, 2, b"dropped");
        let mut body = Vec::new();
        bytes_field(&mut body, 1, &partial);
        assert_eq!(decode_partial_success(&body), Some((7, "dropped".into())));
        assert_eq!(decode_partial_success(&[]), None);
        assert_eq!(decode_partial_success(&body[..body.len() - 1]), None);
        let mut status = Vec::new();
        fixed64(&mut status, 9, 0);
        bytes_field(&mut status, 2, b"no");
        assert_eq!(decode_status_message(&status), Some("no".into()));
    }

    #[test]
    fn a_negative_int_is_ten_bytes_twos_complement() {
        let mut out = Vec::new();
        any_value(&mut out, &Value::Int(-1));
        assert_eq!(out.len(), 1 + 10);
        assert_eq!(out[0], 3 << 3);
    }
}
