//! `toolrun import openapi`: one `kind: http` tool per operation of an OpenAPI 3.0 or 3.1
//! document. The output is a spec that `toolrun check` accepts as printed: names providers take,
//! every `args.*` a property of the input schema, hosts written in the URL, secrets declared.
//! This module reads documents and writes YAML text; it never reaches into the compiler.

mod resolve;

use resolve::Resolver;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

pub(crate) struct Options {
    pub(crate) include: Vec<String>,
    pub(crate) exclude: Vec<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) tools_only: bool,
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The document (YAML or JSON text) as a spec, or a message saying what is wrong.
pub(crate) fn import(text: &str, opts: &Options) -> Result<String, String> {
    let doc = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(_) => crate::specfile::yaml::parse(text)
            .map_err(|d| {
                let first = d.first().map(|d| d.message.clone()).unwrap_or_default();
                format!("the document is neither JSON nor YAML: {first}")
            })?
            .to_json(),
    };
    let version = doc.get("openapi").and_then(Value::as_str).unwrap_or("");
    if !(version.starts_with("3.0") || version.starts_with("3.1")) {
        return Err(match doc.get("swagger") {
            Some(_) => "this is a Swagger 2.0 document; convert it to OpenAPI 3 first".into(),
            None => format!(
                "not an OpenAPI 3.0 or 3.1 document (`openapi: {}`)",
                if version.is_empty() {
                    "missing"
                } else {
                    version
                }
            ),
        });
    }
    let paths = doc
        .get("paths")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if paths.is_empty() {
        let webhooks = doc
            .get("webhooks")
            .and_then(Value::as_object)
            .map_or(0, Map::len);
        return Err(if webhooks > 0 {
            format!("the document has no paths, only {webhooks} webhook(s): webhooks are requests the API sends to you, not operations to call, so there is nothing to import")
        } else {
            "the document has no paths: there is no operation to import".into()
        });
    }
    let base = base_url(&doc, opts)?;
    let resolver = Resolver::new(&doc);
    let mut used_names = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let mut tools = String::new();
    // Webhooks are requests the API makes, not operations to call: only `paths` are imported.
    for (path, item) in &paths {
        let item = resolver.shallow(item);
        for method in METHODS {
            let Some(op) = item.get(method) else {
                continue;
            };
            let op = resolver.shallow(op);
            if !selected(opts, path, method, op) {
                continue;
            }
            let tool = operation(&resolver, &base, path, method, item, op, &mut used_names)?;
            for s in &tool.secrets {
                secrets.insert(s.clone());
            }
            tools.push_str(&tool.yaml);
        }
    }
    if tools.is_empty() {
        return Err("no operation was selected; check --include/--exclude".into());
    }
    if opts.tools_only {
        return Ok(format!("tools:\n{tools}"));
    }
    let title = doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("imported_api");
    let mut out = format!(
        "# Imported from an OpenAPI {version} document by `toolrun import openapi`.\nversion: 1\nname: {}\n",
        yaml_str(&identifier(title, 64))
    );
    if let Some(d) = doc.pointer("/info/description").and_then(Value::as_str) {
        out.push_str(&format!("description: {}\n", yaml_str(d.trim())));
    }
    out.push_str("\ntools:\n");
    out.push_str(&tools);
    if !secrets.is_empty() {
        let list: Vec<&str> = secrets.iter().map(String::as_str).collect();
        out.push_str(&format!("\nsecrets: [{}]\n", list.join(", ")));
    }
    let limit = crate::specfile::MAX_SPEC_BYTES;
    if out.len() as u64 > limit {
        return Err(format!(
            "the spec would be {} bytes, more than `check` reads ({limit}); import part of the API with --include or --exclude",
            out.len()
        ));
    }
    Ok(out)
}

fn base_url(doc: &Value, opts: &Options) -> Result<String, String> {
    if let Some(b) = &opts.base_url {
        return Ok(b.trim_end_matches('/').to_string());
    }
    let server = doc.pointer("/servers/0");
    let mut url = server
        .and_then(|s| s.get("url"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(vars) = server
        .and_then(|s| s.get("variables"))
        .and_then(Value::as_object)
    {
        for (name, var) in vars {
            let default = var.get("default").and_then(Value::as_str).unwrap_or("");
            url = url.replace(&format!("{{{name}}}"), default);
        }
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "the document's first server is `{}`, not an absolute http(s) URL; pass --base-url https://host/path",
            if url.is_empty() { "missing" } else { &url }
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// A path key is glued onto the base URL, so it must only add to the base's path: starting with
/// `/` (a key of `?q=1` or `#frag` starts elsewhere), with no template syntax of its own, and
/// leaving the scheme, host and port as they are (`.attacker.example/collect`, `@evil.example/x`
/// and `:8443/x` would not). A query after the path (`/responses?beta=true`) stays.
fn pinned_path(base: &str, path: &str) -> Result<(), String> {
    let refuse = |why: &str| {
        Err(format!(
            "path `{}` {why}; the document must not change where `{base}` points (fix its `paths` key, or leave the operation out with --exclude)",
            path.escape_debug()
        ))
    };
    if !path.starts_with('/') {
        return refuse("does not start with `/`");
    }
    if ["{{", "}}", "{%", "%}", "{#", "#}"]
        .iter()
        .any(|t| path.contains(t))
    {
        return refuse("holds template syntax");
    }
    if path.chars().any(|c| c.is_control() || c == '\\') {
        return refuse("holds a control character or a backslash");
    }
    // Every `{param}` filled with a plain segment, the URL must keep the base's origin.
    let mut filled = String::new();
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => in_param = true,
            '}' if in_param => {
                in_param = false;
                filled.push('x');
            }
            _ if in_param => {}
            _ => filled.push(c),
        }
    }
    let origin = |u: &str| {
        url::Url::parse(u).ok().map(|u| {
            (
                u.scheme().to_string(),
                u.host_str().map(str::to_string),
                u.port_or_known_default(),
            )
        })
    };
    match (origin(base), origin(&format!("{base}{filled}"))) {
        (Some(b), Some(p)) if b == p => Ok(()),
        (None, _) => Err(format!("the base URL `{base}` is not an absolute URL")),
        _ => refuse("changes the scheme, host or port of the base URL"),
    }
}

/// `--include`/`--exclude`: an operationId, a path glob (`/pets/*`), or `tag:NAME`.
fn selected(opts: &Options, path: &str, method: &str, op: &Value) -> bool {
    let id = op.get("operationId").and_then(Value::as_str).unwrap_or("");
    let tags: Vec<&str> = op
        .get("tags")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let matches = |pattern: &String| {
        if let Some(tag) = pattern.strip_prefix("tag:") {
            tags.contains(&tag)
        } else if pattern.starts_with('/') {
            glob(pattern, path)
        } else {
            glob(pattern, id) || pattern.eq_ignore_ascii_case(&format!("{method} {path}"))
        }
    };
    (opts.include.is_empty() || opts.include.iter().any(matches))
        && !opts.exclude.iter().any(matches)
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

struct Imported {
    yaml: String,
    secrets: Vec<String>,
}

#[derive(PartialEq)]
enum Place {
    Path,
    Query,
    Header,
}

fn operation(
    resolver: &Resolver<'_>,
    base: &str,
    path: &str,
    method: &str,
    item: &Value,
    op: &Value,
    used_names: &mut BTreeSet<String>,
) -> Result<Imported, String> {
    pinned_path(base, path)?;
    let name = tool_name(op, method, path, used_names);
    let description = description(op, method, path);
    let mut shape = Shape {
        url_path: path.to_string(),
        ..Shape::default()
    };
    for p in &parameters(resolver, item, op) {
        shape.add_parameter(p);
    }
    shape.add_body(resolver, op);
    shape.add_security(resolver, op);
    let yaml = shape.tool_yaml(&name, &description, method, base);
    Ok(Imported {
        yaml,
        secrets: shape.secrets,
    })
}

/// The `operationId` (else method and path) as a tool name no other tool of the import has.
fn tool_name(op: &Value, method: &str, path: &str, used_names: &mut BTreeSet<String>) -> String {
    let raw_name = op
        .get("operationId")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{method}_{path}"));
    let mut name = identifier(&raw_name, 64);
    let mut n = 2;
    while used_names.contains(&name) {
        name = format!("{}_{n}", identifier(&raw_name, 60));
        n += 1;
    }
    used_names.insert(name.clone());
    name
}

fn description(op: &Value, method: &str, path: &str) -> String {
    let summary = op.get("summary").and_then(Value::as_str).map(str::trim);
    let long = op.get("description").and_then(Value::as_str).map(str::trim);
    let description = match (summary, long) {
        (Some(s), Some(d)) if !s.is_empty() && !d.is_empty() && s != d => format!("{s}. {d}"),
        (Some(s), _) if !s.is_empty() => s.to_string(),
        (_, Some(d)) if !d.is_empty() => d.to_string(),
        _ => format!("{} {path}", method.to_uppercase()),
    };
    // Long descriptions cost tokens on every request; the first part says what the tool does.
    description.chars().take(1000).collect()
}

/// Path-level parameters apply unless the operation redefines them (same name and place).
fn parameters(resolver: &Resolver<'_>, item: &Value, op: &Value) -> Vec<Value> {
    let mut params: Vec<Value> = Vec::new();
    for list in [op.get("parameters"), item.get("parameters")] {
        for p in list.and_then(Value::as_array).into_iter().flatten() {
            let p = resolver.resolve(p);
            let key = (p.get("name").cloned(), p.get("in").cloned());
            if !params
                .iter()
                .any(|q| (q.get("name").cloned(), q.get("in").cloned()) == key)
            {
                params.push(p);
            }
        }
    }
    params
}

/// What an operation's tool takes and sends, filled from its parameters, body and security.
#[derive(Default)]
struct Shape {
    properties: Map<String, Value>,
    required: Vec<Value>,
    /// The path with `{param}` replaced by argument templates.
    url_path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<String>,
    /// Argument names given out so far.
    taken: BTreeSet<String>,
    secrets: Vec<String>,
    /// Parameters left out, and why: written as comments above the tool.
    notes: Vec<String>,
}

impl Shape {
    fn add_parameter(&mut self, p: &Value) {
        let pname = p.get("name").and_then(Value::as_str).unwrap_or("");
        let place = match p.get("in").and_then(Value::as_str) {
            Some("path") => Place::Path,
            Some("query") => Place::Query,
            Some("header") => Place::Header,
            // Cookies carry sessions, not arguments a model should choose.
            _ => return,
        };
        if pname.is_empty()
            || (place == Place::Header
                && ["accept", "content-type", "authorization"]
                    .contains(&pname.to_ascii_lowercase().as_str()))
        {
            return;
        }
        if place == Place::Header {
            if let Some((why, _)) = crate::compile::refused_header(pname) {
                self.notes.push(format!(
                    "header parameter {} left out: it {why}",
                    yaml_str(pname)
                ));
                return;
            }
        }
        let mut arg = identifier(pname, 64);
        if self.taken.contains(&arg) {
            let prefix = match place {
                Place::Path => "path",
                Place::Query => "query",
                Place::Header => "header",
            };
            arg = identifier(&format!("{prefix}_{pname}"), 64);
        }
        // `a-b`, `a_b` and `a.b` are one identifier: later ones get a number, so no two
        // parameters share an argument (or a `required` entry).
        let stem: String = arg.chars().take(58).collect();
        let mut n = 2;
        while self.taken.contains(&arg) {
            arg = format!("{stem}_{n}");
            n += 1;
        }
        self.taken.insert(arg.clone());
        let mut schema = p.get("schema").cloned().unwrap_or_else(|| json!({}));
        if let (Value::Object(s), Some(d)) =
            (&mut schema, p.get("description").and_then(Value::as_str))
        {
            s.entry("description").or_insert_with(|| json!(d.trim()));
        }
        self.properties.insert(arg.clone(), schema);
        let is_required = place == Place::Path || p.get("required") == Some(&Value::Bool(true));
        if is_required {
            self.required.push(json!(arg));
        }
        let expr = format!("{{{{ args.{arg} }}}}");
        match place {
            Place::Path => self.url_path = self.url_path.replace(&format!("{{{pname}}}"), &expr),
            Place::Query => self.query.push((pname.to_string(), expr)),
            Place::Header => self.headers.push((pname.to_string(), expr)),
        }
    }

    /// A JSON request body becomes one argument, `body` (unless a parameter took that name).
    fn add_body(&mut self, resolver: &Resolver<'_>, op: &Value) {
        let Some(rb) = op.get("requestBody") else {
            return;
        };
        let rb = resolver.resolve(rb);
        let json_media = rb.get("content").and_then(Value::as_object).and_then(|c| {
            c.iter()
                .find(|(k, _)| k.starts_with("application/json") || k.ends_with("+json"))
                .map(|(_, v)| v.clone())
        });
        let Some(media) = json_media else {
            return;
        };
        let mut arg = "body".to_string();
        while self.taken.contains(&arg) {
            arg = format!("request_{arg}");
        }
        let mut schema = media.get("schema").cloned().unwrap_or_else(|| json!({}));
        if let (Value::Object(s), Some(d)) =
            (&mut schema, rb.get("description").and_then(Value::as_str))
        {
            s.entry("description").or_insert_with(|| json!(d.trim()));
        }
        self.properties.insert(arg.clone(), schema);
        if rb.get("required") == Some(&Value::Bool(true)) {
            self.required.push(json!(arg));
        }
        self.body = Some(format!("{{{{ args.{arg} }}}}"));
    }

    /// The first security requirement (the operation's, else the document's): each scheme a
    /// secret, sent where the scheme says.
    fn add_security(&mut self, resolver: &Resolver<'_>, op: &Value) {
        let doc = resolver.doc();
        let requirement = op
            .get("security")
            .or_else(|| doc.get("security"))
            .and_then(Value::as_array)
            .and_then(|alternatives| alternatives.first())
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for scheme_name in requirement.keys() {
            let Some(scheme) = doc
                .pointer(&format!(
                    "/components/securitySchemes/{}",
                    pointer_escape(scheme_name)
                ))
                .map(|s| resolver.resolve(s))
            else {
                continue;
            };
            let secret = secret_name(scheme_name);
            if self.add_credential(&scheme, &format!("{{{{ secrets.{secret} }}}}")) {
                self.secrets.push(secret);
            }
        }
    }

    /// Sends `value` as the security scheme says; false for a scheme it cannot send.
    fn add_credential(&mut self, scheme: &Value, value: &str) -> bool {
        match scheme.get("type").and_then(Value::as_str) {
            Some("apiKey") => {
                let key = scheme
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("X-API-Key");
                match scheme.get("in").and_then(Value::as_str) {
                    Some("query") => self.query.push((key.to_string(), value.to_string())),
                    Some("header") => self.headers.push((key.to_string(), value.to_string())),
                    _ => return false,
                }
            }
            Some("http") => {
                match scheme
                    .get("scheme")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase)
                    .as_deref()
                {
                    // The secret holds base64 of `user:password`, as the header carries it.
                    Some("basic") => self
                        .headers
                        .push(("Authorization".into(), format!("Basic {value}"))),
                    _ => self
                        .headers
                        .push(("Authorization".into(), format!("Bearer {value}"))),
                }
            }
            Some("oauth2") | Some("openIdConnect") => self
                .headers
                .push(("Authorization".into(), format!("Bearer {value}"))),
            _ => return false,
        }
        true
    }

    /// The tool's entry under `tools:`.
    fn tool_yaml(&self, name: &str, description: &str, method: &str, base: &str) -> String {
        let upper = method.to_uppercase();
        let mut input = json!({
            "type": "object",
            "properties": self.properties,
            "required": self.required,
            "additionalProperties": false,
        });
        if self.required.is_empty() {
            if let Value::Object(m) = &mut input {
                m.remove("required");
            }
        }
        let mut y = String::new();
        for note in &self.notes {
            y.push_str(&format!("  # {}\n", note.replace(['\r', '\n'], " ")));
        }
        y.push_str(&format!("  {name}:\n"));
        y.push_str(&format!("    description: {}\n", yaml_str(description)));
        y.push_str("    kind: http\n");
        match upper.as_str() {
            "GET" | "HEAD" | "OPTIONS" => y.push_str("    idempotent: true\n"),
            // Writes stop for a person by default; `--approve NAME` (or editing this) lets them run.
            _ => y.push_str("    side_effects: true\n"),
        }
        y.push_str(&format!("    input: {}\n", input));
        y.push_str("    request:\n");
        y.push_str(&format!("      method: {upper}\n"));
        y.push_str(&format!(
            "      url: {}\n",
            yaml_str(&format!("{base}{}", self.url_path))
        ));
        for (key, pairs) in [("query", &self.query), ("headers", &self.headers)] {
            if !pairs.is_empty() {
                y.push_str(&format!("      {key}:\n"));
                for (k, v) in pairs {
                    y.push_str(&format!("        {}: {}\n", yaml_str(k), yaml_str(v)));
                }
            }
        }
        if let Some(b) = &self.body {
            y.push_str(&format!("      body: {}\n", yaml_str(b)));
        }
        y
    }
}

fn pointer_escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// A name every provider accepts: letters, digits, `_` and `-`, at most `max` characters.
fn identifier(raw: &str, max: usize) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    let out = out.trim_matches('_');
    let mut out: String = out.chars().take(max).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out = format!("x_{out}").chars().take(max).collect();
    }
    out
}

/// `api_key` → `API_KEY`: secrets are environment variable names.
fn secret_name(scheme: &str) -> String {
    identifier(scheme, 60).to_ascii_uppercase()
}

/// A YAML scalar that reads back as exactly this string (a JSON string is valid YAML).
fn yaml_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("/pets/*", "/pets/{id}"));
        assert!(glob("*Pet*", "findPetById"));
        assert!(!glob("/pets/*", "/stores/1"));
        assert!(glob("addPet", "addPet"));
    }

    #[test]
    fn identifiers_and_secret_names() {
        assert_eq!(identifier("X-Request-ID", 64), "X_Request_ID");
        assert_eq!(identifier("page[size]", 64), "page_size");
        assert_eq!(identifier("get /pets/{id}", 64), "get_pets_id");
        assert_eq!(identifier("1st", 64), "x_1st");
        assert_eq!(secret_name("api_key"), "API_KEY");
    }
}
