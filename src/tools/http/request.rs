//! Building the request a call sends: the URL rendered so that no value changes its structure,
//! the query, headers and body from templates.

use super::{short, USER_AGENT};
use crate::net::HttpRequest;
use crate::registry::{HttpTool, UrlOrigin};
use crate::templates;
use crate::tools::{ErrorKind, ToolEnv, ToolError};
use serde_json::{json, Value};

pub(super) fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorKind::InvalidArguments, message)
}

/// Renders the request a call would send, without sending it. Public so the template fuzz target
/// can check that no argument value changes a URL's host or path structure.
pub(crate) async fn prepare(
    http: &HttpTool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<HttpRequest, ToolError> {
    prepare_parsed(http, args, env).await.map(|(req, _)| req)
}

/// [`prepare`], with the URL parsed: the call checks its host and sends it without parsing the
/// text again.
pub(super) async fn prepare_parsed(
    http: &HttpTool,
    args: &Value,
    env: &ToolEnv<'_>,
) -> Result<(HttpRequest, url::Url), ToolError> {
    let templates = &env.registry.templates;
    // Made only for a template that reads more than an argument passed through.
    let data = std::sync::OnceLock::new();
    // Only the secrets the tool's templates name: `{{ secrets }}` or a loop over the map must
    // not send every declared secret (another tool's key) to this tool's host.
    let named = |name: &str| http.secrets.iter().any(|s| s == name);
    let whole = || {
        data.get_or_init(|| {
            json!({ "args": args, "secrets": env.secrets.as_json_of(&named), "query": env.query })
        })
    };
    let secret = |name: &str| env.secrets.get(name).filter(|_| named(name));
    let parts = templates::CallParts {
        args,
        secret: &secret,
        whole: &whole,
    };
    let plain = templates::Ctx::call(parts);

    let mut url = parsed_url(http, parts, env).await?;
    if !http.query.is_empty() {
        let mut pairs: Vec<(&str, String)> = Vec::with_capacity(http.query.len());
        for (key, tv) in &http.query {
            let v = templates
                .render(tv, &plain)
                .await
                .map_err(|e| render_error(&format!("query parameter `{key}`"), e))?;
            query_values(v, &mut |s| pairs.push((key, s)));
        }
        if !pairs.is_empty() {
            // The serializer form-encodes each key and value: a value cannot start a new pair.
            url.query_pairs_mut().extend_pairs(pairs);
        }
    }

    // Room for the ones added below (content type, accept, user agent): no regrowing.
    let mut headers: Vec<(String, String)> = Vec::with_capacity(http.headers.len() + 3);
    for (name, id) in &http.headers {
        let value = templates
            .render_text(id, &plain)
            .await
            .map_err(|e| render_error(&format!("header `{name}`"), e))?;
        // An unset optional argument leaves a header out, as it does a query parameter: an
        // empty `X-Trace:` would tell the server something the caller never said.
        if value.trim().is_empty() {
            continue;
        }
        // A line break in a header value would smuggle a header (or a second request) in.
        if reqwest::header::HeaderValue::from_str(&value).is_err() {
            return Err(invalid(format!(
                "header `{name}` would contain a line break or control character; pass plain text"
            )));
        }
        headers.push((name.clone(), value));
    }

    let mut body = None;
    let mut content_type = None;
    if let Some(tv) = &http.body {
        let v = templates
            .render(tv, &plain)
            .await
            .map_err(|e| render_error("the request body", e))?;
        body = Some(serde_json::to_vec(&v).unwrap_or_default());
        content_type = Some("application/json");
    } else if let Some(id) = &http.body_text {
        body = Some(
            templates
                .render_text(id, &plain)
                .await
                .map_err(|e| render_error("the request body", e))?
                .into_bytes(),
        );
        content_type = Some("text/plain; charset=utf-8");
    }
    let has = |headers: &[(String, String)], name: &str| {
        headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
    };
    if let Some(ct) = content_type {
        if !has(&headers, "content-type") {
            headers.push(("Content-Type".into(), ct.into()));
        }
    }
    if !has(&headers, "accept") {
        headers.push((
            "Accept".into(),
            "application/json, text/*;q=0.9, */*;q=0.5".into(),
        ));
    }
    if !has(&headers, "user-agent") {
        headers.push(("User-Agent".into(), USER_AGENT.into()));
    }
    let req = HttpRequest {
        method: http.method.clone(),
        url: url.as_str().to_string(),
        headers,
        body,
    };
    Ok((req, url))
}

/// The URL the call goes to, rendered and parsed, http or https.
async fn parsed_url<'a>(
    http: &'a HttpTool,
    parts: templates::CallParts<'a>,
    env: &ToolEnv<'_>,
) -> Result<url::Url, ToolError> {
    let url = match http.literal_url.get() {
        Some(url) => url.clone(),
        None => {
            let text = build_url(http, parts, env).await?;
            let url = url::Url::parse(text.trim()).map_err(|e| {
                invalid(format!(
                    "the URL `{}` is not valid ({e}); check the arguments that go into it",
                    short(&text, &env.secrets.redactor())
                ))
            })?;
            // A URL written without templates is the same on every call: parsed once.
            if env.registry.templates.is_plain(&http.url)
                && matches!(url.scheme(), "http" | "https")
            {
                let _ = http.literal_url.set(url.clone());
            }
            url
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(
            ErrorKind::Denied,
            format!(
                "only http and https URLs may be called, not `{}:`",
                url.scheme()
            ),
        ));
    }
    Ok(url)
}

fn render_error(what: &str, e: templates::RenderError) -> ToolError {
    crate::tools::render_error(&format!("could not build {what}"), e)
}

/// Renders the URL template so that no value can change the URL's structure.
///
/// Every string a caller controls (arguments, the query) is percent-encoded *before* rendering,
/// with everything but the unreserved characters encoded, and marked safe so that `| urlencode`
/// leaves it alone (see `templates::urlencode`). A value therefore cannot add a path segment, a
/// query, a fragment, a port or user info wherever the template puts it. This is sounder than
/// rendering first and comparing the result with the template: with `{% if %}` and filters there
/// is no "expected structure" to compare with. `check` has already refused templates whose scheme
/// or host reads an argument (`compile::url_template`); the secrets that decide the origin
/// (`{{ secrets.BASE }}/items`) go in as they are, other secrets encoded like arguments. What
/// encoding cannot stop is a value that *is* a whole `.` or `..` segment (URL parsers resolve
/// `%2e%2e` too), so those are refused.
///
/// A URL that is one argument as a whole (`url: "{{ args.url }}"`, allowed only with an
/// explicit `allow_hosts`) is taken as it is: the allow-list check on the parsed result, on every
/// call and every redirect, is what keeps it in bounds.
async fn build_url<'a>(
    http: &'a HttpTool,
    parts: templates::CallParts<'a>,
    env: &ToolEnv<'_>,
) -> Result<String, ToolError> {
    let templates = &env.registry.templates;
    let raw_secrets: &[String] = match &http.origin {
        UrlOrigin::WholeArgument => {
            return templates
                .render_text(&http.url, &templates::Ctx::call(parts))
                .await
                .map_err(|e| render_error("the URL", e));
        }
        UrlOrigin::Secrets(names) => names,
        UrlOrigin::Literal(_) => &[],
    };
    let url = templates
        .render_text(&http.url, &templates::Ctx::url_call(parts, raw_secrets))
        .await
        .map_err(|e| render_error("the URL", e))?;
    let path_end = url.find(['?', '#']).unwrap_or(url.len());
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0).min(path_end);
    let path_start = url[after_scheme..path_end]
        .find('/')
        .map(|i| after_scheme + i)
        .unwrap_or(path_end);
    if url[path_start..path_end].split('/').any(is_dot_segment) {
        return Err(invalid("an argument would make a `.` or `..` segment in the URL path; pass a name, not a relative path"));
    }
    Ok(url)
}

/// `.` or `..`, each dot written as it is or as `%2e` in either case.
fn is_dot_segment(segment: &str) -> bool {
    let s = segment.as_bytes();
    let dot = |b: &[u8]| b == b"." || b.eq_ignore_ascii_case(b"%2e");
    dot(s) || (1..s.len()).any(|i| dot(&s[..i]) && dot(&s[i..]))
}

/// `query:` values: null leaves the parameter out, a list repeats it, objects go as JSON text.
fn query_values(v: Value, push: &mut dyn FnMut(String)) {
    match v {
        Value::Null => {}
        Value::String(s) => push(s),
        Value::Array(items) => items.into_iter().for_each(|i| query_values(i, push)),
        other => push(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_are_found_in_every_spelling_and_nothing_else() {
        // What the check was before it stopped allocating: lower-case, decode `%2e`, compare.
        let reference = |s: &str| {
            let s = s.to_ascii_lowercase().replace("%2e", ".");
            s == "." || s == ".."
        };
        let pieces = [".", "%2e", "%2E", "%", "2e", "e", "a", "..", "%2f", ""];
        for a in pieces {
            for b in pieces {
                for c in ["", "."] {
                    let segment = format!("{a}{b}{c}");
                    assert_eq!(
                        super::is_dot_segment(&segment),
                        reference(&segment),
                        "{segment:?}"
                    );
                }
            }
        }
    }
}
