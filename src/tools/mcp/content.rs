//! What an MCP `tools/call` result becomes, whatever transport brought it: the observation the
//! model reads, the images a provider can take natively, and every content item kept as the
//! server sent it (for the trace and templates), with binary data masked and capped after
//! decoding.

use crate::models::Image;
use crate::redact::Redactor;
use crate::tools::{ErrorKind, ToolError};
use base64::Engine as _;
use serde_json::{json, Map, Value};

/// Most bytes of one binary item (image, audio, resource blob) kept, counted after base64
/// decoding: the whole reply is already capped, this bounds one item in traces and requests.
pub(crate) const BLOB_CAP: usize = 1 << 20;

/// Image types both Anthropic and OpenAI-compatible APIs accept.
const MODEL_IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// A result taken apart.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Content {
    /// What the model reads: `structuredContent` when the server gives it; else the text, each
    /// embedded text resource verbatim, a placeholder naming every other item's type and size.
    pub(crate) observation: Value,
    /// Images the model can be shown as images (see `crate::models`).
    pub(crate) images: Vec<Image>,
    /// `{content, structuredContent}` as sent, blobs masked and capped; `None` for a result of
    /// text alone (the observation already says everything).
    pub(crate) kept: Option<Value>,
}

/// A result; `isError: true` is a tool error carrying the server's text.
pub(crate) fn take(
    server: &str,
    remote: &str,
    result: &Value,
    redactor: &Redactor,
) -> Result<Content, ToolError> {
    let mut items: Vec<Value> = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut images = Vec::new();
    let mut lines = Vec::new();
    let mut only_text = true;
    for item in &mut items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("?");
        only_text &= kind == "text";
        lines.push(line(item, redactor, &mut images));
    }
    let text = lines.join("\n");
    let structured = result.get("structuredContent").filter(|s| !s.is_null());
    let kept = (!only_text || structured.is_some()).then(|| {
        let mut kept = Map::new();
        kept.insert("content".into(), Value::Array(items.clone()));
        if let Some(s) = structured {
            kept.insert("structuredContent".into(), s.clone());
        }
        Value::Object(kept)
    });
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.trim().is_empty() {
            format!("`{remote}` reported an error without a message")
        } else {
            text
        };
        let mut details = Map::new();
        details.insert("server".into(), json!(server));
        details.insert("tool".into(), json!(remote));
        if let Some(s) = structured {
            details.insert("structuredContent".into(), s.clone());
        }
        return Err(
            ToolError::new(ErrorKind::ExecutionError, message).with_details(Value::Object(details))
        );
    }
    let observation = match structured {
        Some(s) => s.clone(),
        None => single_json(&items).unwrap_or(Value::String(text)),
    };
    Ok(Content {
        observation,
        images,
        kept,
    })
}

/// Servers without an output schema often send their JSON as text: kept JSON, so templates can
/// read into it (`{{ last.result.hits }}`).
fn single_json(items: &[Value]) -> Option<Value> {
    let [item] = items else { return None };
    item.get("text")
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .filter(|v| v.is_object() || v.is_array())
}

/// One item as the model reads it; its binary data (if any) is masked and capped in place, and
/// an image a model can see is added to `images`.
fn line(item: &mut Value, redactor: &Redactor, images: &mut Vec<Image>) -> String {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let str_at = |item: &Value, p: &str| item.pointer(p).and_then(Value::as_str).map(String::from);
    match kind.as_str() {
        "text" => str_at(item, "/text").unwrap_or_default(),
        "image" | "audio" => {
            let mime = str_at(item, "/mimeType").unwrap_or_default();
            let blob = capped(item, "data", redactor);
            if kind == "image" && !blob.cut && MODEL_IMAGES.contains(&mime.as_str()) {
                if let Some(data) = item.get("data").and_then(Value::as_str) {
                    images.push(Image {
                        mime: mime.clone(),
                        data: data.to_string(),
                    });
                }
            }
            format!("[{kind} {mime}, {}]", blob.size())
        }
        "resource" => {
            let uri = str_at(item, "/resource/uri").unwrap_or_default();
            if let Some(text) = str_at(item, "/resource/text") {
                return text;
            }
            let mime = str_at(item, "/resource/mimeType").unwrap_or_default();
            let size = match item.get_mut("resource") {
                Some(r) => capped(r, "blob", redactor).size(),
                None => "no data".into(),
            };
            format!("[resource {mime} {uri}, {size}]").replace("  ", " ")
        }
        "resource_link" => {
            let uri = str_at(item, "/uri").unwrap_or_default();
            let name = str_at(item, "/name").unwrap_or_default();
            let mime = str_at(item, "/mimeType").unwrap_or_default();
            format!("[resource_link {name} {uri} {mime}]")
                .replace("  ", " ")
                .replace(" ]", "]")
        }
        other => format!("[{other} content]"),
    }
}

struct Blob {
    bytes: Option<usize>,
    cut: bool,
}

impl Blob {
    fn size(&self) -> String {
        match (self.bytes, self.cut) {
            (Some(n), false) => format!("{n} bytes"),
            (Some(n), true) => format!("more than {n} bytes, cut"),
            (None, _) => "not base64".into(),
        }
    }
}

/// The base64 field `key` of `item`, decoded, masked, cut at [`BLOB_CAP`] and encoded again
/// (with `"truncated": true` beside it when cut). Data that is not base64 (a masked secret
/// broke it, or the server sent something else) is masked and cut as text.
fn capped(item: &mut Value, key: &str, redactor: &Redactor) -> Blob {
    let Some(data) = item.get(key).and_then(Value::as_str) else {
        return Blob {
            bytes: None,
            cut: false,
        };
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let (encoded, bytes, cut) = match engine.decode(data.trim()) {
        Ok(raw) => {
            let (kept, cut) = redactor.cut_bytes(&raw, BLOB_CAP, false);
            let n = if cut { kept.len() } else { raw.len() };
            (engine.encode(&kept), Some(n), cut)
        }
        Err(_) => {
            let (kept, more) = redactor.shorten(data, BLOB_CAP);
            (kept, None, more > 0)
        }
    };
    item[key] = Value::String(encoded);
    if cut {
        item["truncated"] = json!(true);
    }
    Blob { bytes, cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take_ok(result: Value) -> Content {
        take("s", "t", &result, &Redactor::default()).expect("not an error")
    }

    #[test]
    fn every_item_is_kept_and_the_model_reads_text_resources_and_placeholders() {
        let png = base64::engine::general_purpose::STANDARD.encode([137u8, 80, 78, 71, 1, 2]);
        let c = take_ok(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "mimeType": "image/png", "data": png},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "demo://a", "mimeType": "text/plain", "text": "the file"}},
            {"type": "resource", "resource": {"uri": "demo://b", "mimeType": "application/pdf", "blob": "AAAAAA=="}},
            {"type": "resource_link", "uri": "demo://c", "name": "c.txt", "mimeType": "text/plain"},
        ]}));
        assert_eq!(
            c.observation,
            json!("one\n[image image/png, 6 bytes]\n[audio audio/wav, 3 bytes]\nthe file\n[resource application/pdf demo://b, 4 bytes]\n[resource_link c.txt demo://c text/plain]")
        );
        assert_eq!(c.images.len(), 1);
        assert_eq!(c.images[0].mime, "image/png");
        let kept = c.kept.expect("kept");
        assert_eq!(kept["content"].as_array().unwrap().len(), 6);
        assert_eq!(kept["content"][1]["data"], png);
    }

    #[test]
    fn text_alone_keeps_nothing_more_and_structured_content_is_the_observation() {
        let c = take_ok(json!({"content": [{"type": "text", "text": "{\"hits\": [1]}"}]}));
        assert_eq!(c.observation, json!({"hits": [1]}));
        assert_eq!(c.kept, None);
        let c = take_ok(
            json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1}}),
        );
        assert_eq!(c.observation, json!({"a": 1}));
        assert_eq!(c.kept.unwrap()["structuredContent"], json!({"a": 1}));
    }

    #[test]
    fn blobs_are_masked_and_capped_after_decoding() {
        let engine = base64::engine::general_purpose::STANDARD;
        let secret = "blob-secret-0123456789";
        let mut raw = format!("head {secret} tail").into_bytes();
        raw.resize(BLOB_CAP + 100, b'x');
        let redactor = Redactor::new([secret.to_string()]);
        let result = json!({"content": [{"type": "image", "mimeType": "image/png", "data": engine.encode(&raw)}]});
        let c = take("s", "t", &result, &redactor).unwrap();
        assert!(c.images.is_empty(), "a cut image is not shown");
        let kept = &c.kept.unwrap()["content"][0];
        assert_eq!(kept["truncated"], true);
        let back = engine.decode(kept["data"].as_str().unwrap()).unwrap();
        assert_eq!(back.len(), BLOB_CAP);
        let back = String::from_utf8_lossy(&back);
        assert!(
            !back.contains(secret) && back.starts_with("head ***"),
            "{}",
            &back[..30]
        );
        assert_eq!(
            c.observation,
            json!(format!(
                "[image image/png, more than {BLOB_CAP} bytes, cut]"
            ))
        );
    }

    #[test]
    fn errors_carry_the_servers_text() {
        let err = take(
            "s",
            "t",
            &json!({"isError": true, "content": [{"type": "text", "text": "no such note"}]}),
            &Redactor::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ExecutionError);
        assert_eq!(err.message, "no such note");
        let empty = take(
            "s",
            "t",
            &json!({"isError": true, "content": []}),
            &Redactor::default(),
        )
        .unwrap_err();
        assert!(empty.message.contains("without a message"));
    }
}
