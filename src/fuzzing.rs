//! The bodies of the fuzz targets in `fuzz/`, in the library so the targets and the stable
//! regression tests (`tests/fuzz_regressions.rs`) exercise exactly the same code.
//! Every function must return normally for any input; a panic is a bug.

use crate::events::Events;
use crate::net::Transport;
use crate::redact::Secrets;
use crate::registry::{Registry, ToolKind};
use crate::tools::{http, mock, ToolEnv};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::OnceLock;

/// Any UTF-8 text as a spec: compiling it and rendering its diagnostics.
pub fn spec_compile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let source = crate::specfile::Source::new("fuzz.yaml", text);
    // A folder that does not exist: a `file:` table is looked up, but never found.
    let compiled =
        crate::compile::compile(&source, Path::new("/nonexistent-toolrun-fuzz/spec.yaml"));
    // Spans come from the parser; rendering a snippet under them must cope with any of them.
    for d in &compiled.diagnostics {
        let _ = crate::diag::render_human(d, Some(source.lines()));
        let _ = crate::diag::render_github(d);
    }
    let _ = crate::diag::to_json(&compiled.diagnostics);
}

/// Any text as an OpenAPI document: importing it never panics, and whatever it imports is a spec
/// `toolrun check` accepts (issue 25 §9: names, URLs and headers a document chooses cannot make
/// the importer write a spec with errors). Imported with and without a pinned `--base-url`.
pub fn openapi_import(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for base_url in [None, Some("https://api.example.com/v1")] {
        let opts = crate::openapi::Options {
            include: Vec::new(),
            exclude: Vec::new(),
            base_url: base_url.map(str::to_string),
            tools_only: false,
        };
        let Ok(spec) = crate::openapi::import(text, &opts) else {
            continue;
        };
        let source = crate::specfile::Source::new("imported.yaml", &spec);
        let compiled = crate::compile::compile(
            &source,
            Path::new("/nonexistent-toolrun-fuzz/imported.yaml"),
        );
        let errors: Vec<String> = compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| crate::diag::render_human(d, Some(source.lines())))
            .collect();
        assert!(
            errors.is_empty(),
            "an imported spec fails check:\n{}\n--- the spec:\n{spec}",
            errors.join("\n")
        );
    }
}

/// Provider replies, as a hostile or broken server might send them. The first byte picks how the
/// rest is used: as a whole JSON reply, or as the parts a model controls (tool-call arguments,
/// tool names, text) inside an otherwise well-formed reply, which reaches deeper than random JSON.
pub fn model_response(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    // Up to the first NUL: a name; after it: arguments, input or text.
    let (name, body) = text.split_once('\0').unwrap_or(("lookup", text));
    let reply: Value = match mode % 4 {
        0 => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return,
        },
        1 => json!({
            "choices": [{
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": name, "arguments": body } }]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": 1, "completion_tokens": 1 }
        }),
        2 => {
            let input: Value = serde_json::from_str(body).unwrap_or(Value::String(body.into()));
            json!({
                "type": "message",
                "role": "assistant",
                "content": [
                    { "type": "text", "text": name },
                    { "type": "tool_use", "id": "toolu_1", "name": name, "input": input }
                ],
                "stop_reason": "tool_use",
                "usage": { "input_tokens": 1, "output_tokens": 1 }
            })
        }
        _ => {
            json!({ "choices": [{ "message": { "role": "assistant", "content": body }, "finish_reason": name }] })
        }
    };
    let _ = crate::models::openai::parse_response(&reply, 1);
    let _ = crate::models::anthropic::parse_response(&reply, 1);
}

/// The calculator on any expression a model might send.
pub fn calculator(data: &[u8]) {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let ctx = crate::builtins::BuiltinContext { now_unix_ms: 0 };
    let _ = crate::builtins::call("calculator", &json!({ "expression": expression }), &ctx);
}

/// The registry of `src/fuzz_templates.yaml` (beside this file, so the published crate has it): a mock tool and an HTTP tool whose templates
/// read every kind of argument.
pub(crate) fn templates_registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let source =
            crate::specfile::Source::new("templates.yaml", include_str!("fuzz_templates.yaml"));
        let compiled = crate::compile::compile(&source, Path::new("templates.yaml"));
        match compiled.registry {
            Some(r) => r,
            None => panic!("the harness spec must compile: {:?}", compiled.diagnostics),
        }
    })
}

/// Tool code is async (a template may render in a child process); the harness drives it on
/// one runtime per thread.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    thread_local! {
        static RUNTIME: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok();
    }
    RUNTIME.with(|rt| match rt {
        Some(rt) => rt.block_on(f),
        None => panic!("the fuzz harness needs a tokio runtime"),
    })
}

/// Hostile argument values through the templates of a mock result and error and of an HTTP
/// request. Rendering may fail; no value may move the request to another host, add a path
/// segment, a query parameter, a fragment or a header. Returns the mock's results for callers
/// that check more.
pub fn templates(args: &Value, query: &str) -> Vec<Value> {
    let registry = templates_registry();
    let secrets = Secrets::default();
    let transport = Transport::live();
    let events = Events::none();
    let env = ToolEnv {
        registry,
        secrets: &secrets,
        transport: &transport,
        events: &events,
        query,
        now_unix_ms: 0,
        call_id: "call_1",
        notify: None,
        session: None,
    };
    let mut results = Vec::new();
    for tool in &registry.tools {
        match &tool.kind {
            ToolKind::Mock(responses) => results.extend(
                block_on(mock::execute(responses, args, &env))
                    .ok()
                    .map(|o| o.value),
            ),
            ToolKind::Http(h) => {
                let Ok(req) = block_on(http::prepare(h, args, &env)) else {
                    continue;
                };
                let url = match url::Url::parse(&req.url) {
                    Ok(u) => u,
                    Err(e) => panic!("prepare returned an unparsable URL {:?}: {e}", req.url),
                };
                assert_eq!(url.host_str(), Some("api.example.com"), "{}", req.url);
                let segments: Vec<&str> =
                    url.path_segments().map(|s| s.collect()).unwrap_or_default();
                assert_eq!(segments.len(), 4, "{}", req.url);
                assert_eq!((segments[0], segments[2]), ("v1", "items"), "{}", req.url);
                for (key, _) in url.query_pairs() {
                    assert!(matches!(&*key, "q" | "page" | "tag"), "{}", req.url);
                }
                assert!(url.fragment().is_none(), "{}", req.url);
                assert!(
                    !req.headers
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("x-injected")),
                    "{:?}",
                    req.headers
                );
            }
            _ => {}
        }
    }
    results
}

/// Characters secrets and filler are drawn from: every one a URL, JSON, HTML or base64 encoder
/// treats specially, plus multi-byte text.
const MASKER_ALPHABET: [&str; 32] = [
    "Z", "q", "+", "8", "/", "a", "=", "b", " ", "c", "&", "d", "?", "e", "-", "f", ".", "g", "_",
    "h", "~", "i", "%", "\\", "\"", "<", ">", "'", "é", "😀", "A", "0",
];

/// The masker: a secret, and a text that holds it in any of the spellings a server or toolrun
/// produces (the data chooses which, and how each is mixed). After masking, no decoding of the
/// text (percent, `+` as space, JSON, HTML entities, base64 in either alphabet at any offset)
/// may yield the secret, and neither may a cut of the text.
pub fn masker(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let len = crate::redact::SAFE_SECRET_LEN + usize::from(len % 24);
    if rest.len() < len {
        return;
    }
    let (secret_bytes, ops) = rest.split_at(len);
    let secret: String = secret_bytes
        .iter()
        .map(|b| MASKER_ALPHABET[usize::from(b % 32)])
        .collect();
    let mut text = String::new();
    let mut ops = ops.iter().copied();
    while let Some(op) = ops.next() {
        let arg = ops.next().unwrap_or(0);
        text.push_str(&spell(&secret, op, arg));
    }
    let redactor = crate::redact::Redactor::named([("SECRET".to_string(), secret.clone())]);
    // Long texts are masked with a prefilter: it must find exactly what trying every
    // position finds, on these short texts too.
    if let Some(diff) = redactor.prefilter_differs(text.as_bytes()) {
        panic!("prefilter differs on {text:?}: {diff}");
    }
    let masked = redactor.str(&text);
    check_masked(&secret, &text, &masked);
    assert!(
        redactor.leaks(&masked).is_none(),
        "{secret:?} in {masked:?}"
    );
    let cut = usize::from(data[data.len() - 1]) * text.chars().count() / 256;
    let (kept, _) = redactor.shorten(&text, cut);
    check_masked(&secret, &text, &kept);
    let (bytes, _) = redactor.cut_bytes(text.as_bytes(), cut, false);
    check_masked(&secret, &text, &String::from_utf8_lossy(&bytes));
}

#[track_caller]
fn check_masked(secret: &str, text: &str, masked: &str) {
    for d in decodings(masked) {
        assert!(
            !d.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "secret {secret:?} survives in {masked:?} (from {text:?}) as {:?}",
            String::from_utf8_lossy(&d)
        );
    }
}

/// One spelling of `secret` (or filler), chosen by `op`; `arg`'s bits pick the details.
fn spell(secret: &str, op: u8, arg: u8) -> String {
    let bit = |i: usize| arg & (1 << (i % 8)) != 0;
    match op % 9 {
        0 => MASKER_ALPHABET[usize::from(arg % 32)].to_string(),
        1 => secret.to_string(),
        // Percent-encoded: the characters whose bit is set, in either hex case, `+` for space.
        2 => {
            let mut out = String::new();
            for (i, c) in secret.chars().enumerate() {
                if c == ' ' && !bit(i) {
                    out.push('+');
                } else if bit(i) || !c.is_ascii() {
                    let mut buf = [0; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&if bit(i + 3) {
                            format!("%{b:02x}")
                        } else {
                            format!("%{b:02X}")
                        });
                    }
                } else {
                    out.push(c);
                }
            }
            out
        }
        // JSON-escaped: as serde writes it, `\/`, or `\u` escapes for the set bits.
        3 => {
            let mut out = String::new();
            for (i, c) in secret.chars().enumerate() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '/' if bit(i) => out.push_str("\\/"),
                    c if bit(i + 1) => {
                        let mut buf = [0u16; 2];
                        for u in c.encode_utf16(&mut buf) {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out
        }
        // Base64 of the secret or of `user:secret`, either alphabet, padded or not, sometimes
        // escaped again on its way (`\/` in JSON, `%2B` in a URL).
        4..=6 => {
            let prefix = ["", "u:", "us:", "user:"][usize::from(arg % 4)];
            let raw = format!("{prefix}{secret}");
            let mut b = crate::redact::base64(raw.as_bytes(), bit(2));
            if bit(3) {
                while b.len() % 4 != 0 {
                    b.push('=');
                }
            }
            match op % 9 {
                5 => b.replace('/', "\\/"),
                6 => b
                    .replace('+', "%2B")
                    .replace('/', "%2f")
                    .replace('=', "%3D"),
                _ => b,
            }
        }
        // HTML entities for the characters whose bit is set.
        7 => secret
            .chars()
            .enumerate()
            .map(|(i, c)| match c {
                '&' if bit(i) => "&amp;".to_string(),
                '<' if bit(i) => "&lt;".to_string(),
                '"' if bit(i) => "&quot;".to_string(),
                c if bit(i + 2) => format!("&#{};", u32::from(c)),
                c => c.to_string(),
            })
            .collect(),
        // A prefix of the secret: the rest of the text decides whether it becomes whole.
        _ => secret
            .chars()
            .take(usize::from(arg) % secret.chars().count())
            .collect(),
    }
}

/// Every way the masker's contract says a reader may decode a text: as is, percent-decoded
/// (`+` as a space or as itself), JSON-unescaped, HTML-unescaped, and each of those with every
/// run of base64 characters decoded at each of the four offsets, in both alphabets.
pub fn decodings(text: &str) -> Vec<Vec<u8>> {
    let plain = text.as_bytes().to_vec();
    let percent = |plus_is_space: bool| {
        let mut out = Vec::new();
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b[i],
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            ) {
                (b'%', Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                (b'+', _, _) if plus_is_space => out.push(b' '),
                (c, _, _) => out.push(c),
            }
            i += 1;
        }
        out
    };
    let json = serde_json::from_str::<String>(&format!("\"{text}\""))
        .map(String::into_bytes)
        .unwrap_or_else(|_| lenient_json_unescape(text));
    let html = html_unescape(text);
    let mut all = vec![plain, percent(true), percent(false), json, html];
    let mut decoded = Vec::new();
    for d in &all {
        decoded.extend(base64_runs(d));
    }
    all.extend(decoded);
    all
}

/// JSON escapes decoded one by one (a text that is not a valid JSON string as a whole still has
/// valid escapes in it).
fn lenient_json_unescape(text: &str) -> Vec<u8> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let decoded = (2..=12)
            .rev()
            .filter(|&n| tail.is_char_boundary(n.min(tail.len())) && n <= tail.len())
            .find_map(|n| {
                serde_json::from_str::<String>(&format!("\"{}\"", &tail[..n]))
                    .ok()
                    .map(|s| (s, n))
            });
        match decoded {
            Some((s, n)) => {
                out.push_str(&s);
                rest = &tail[n..];
            }
            None => {
                out.push('\\');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out.into_bytes()
}

fn html_unescape(text: &str) -> Vec<u8> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let entity = tail.find(';').filter(|&e| e <= 10).and_then(|e| {
            let c = match &tail[1..e] {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                n => n
                    .strip_prefix("#x")
                    .or_else(|| n.strip_prefix("#X"))
                    .map(|h| u32::from_str_radix(h, 16).ok())
                    .unwrap_or_else(|| n.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            };
            c.map(|c| (c, e))
        });
        match entity {
            Some((c, e)) => {
                out.push(c);
                rest = &tail[e + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out.into_bytes()
}

/// Each maximal run of base64 characters, decoded from each of its first four positions.
fn base64_runs(bytes: &[u8]) -> Vec<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    for run in bytes.split(|&c| value(c).is_none()) {
        for start in 0..4.min(run.len()) {
            let mut decoded = Vec::new();
            for q in run[start..].chunks(4) {
                let n = q.iter().enumerate().fold(0u32, |acc, (i, &c)| {
                    acc | value(c).unwrap_or(0) << (18 - 6 * i)
                });
                let full = q.len() * 6 / 8;
                decoded.extend_from_slice(&n.to_be_bytes()[1..1 + full]);
            }
            out.push(decoded);
        }
    }
    out
}
