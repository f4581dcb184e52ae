//! Where a URL template's scheme and host come from (issue 12 §2).
//!
//! Arguments are percent-encoded before a URL is rendered, so a value can never add a `/`, `?`,
//! `#`, `@` or `:`. Encoding cannot stop a value from *being* part of the host, though
//! (`http://{{ args.host }}/x`), so the part of the template that decides the scheme, host and
//! port (its *origin*: everything up to the first literal `/`, `?` or `#` after `://`) may read
//! only secrets. The one exception is a URL that is a single argument as a whole, the web-fetch
//! pattern, which is parsed and held to an explicit allow-list on every call and redirect.

use crate::registry::{HostRule, UrlOrigin};

/// What the origin of a URL template is made of.
#[derive(Debug, PartialEq)]
pub(super) enum Shape {
    /// No template in the origin: the host is written in the spec (`None`: not a valid host).
    Literal(Option<HostRule>),
    /// `{{ secrets.BASE }}/items`: these secrets decide the origin.
    Secrets(Vec<String>),
    /// `{{ args.url }}` and nothing else.
    WholeArgument,
    /// A template in the origin reads something a caller controls; the text of that tag.
    FromInput(String),
}

impl Shape {
    pub(super) fn origin(&self) -> Option<UrlOrigin> {
        match self {
            Shape::Literal(rule) => Some(UrlOrigin::Literal(rule.clone())),
            Shape::Secrets(names) => Some(UrlOrigin::Secrets(names.clone())),
            Shape::WholeArgument => Some(UrlOrigin::WholeArgument),
            Shape::FromInput(_) => None,
        }
    }
}

/// Template roots a caller controls in an HTTP tool (`secrets` is the spec author's).
const INPUT_ROOTS: &[&str] = &["args", "query"];

pub(super) fn shape(source: &str) -> Shape {
    if let Some(expr) = crate::templates::single_expression(source) {
        if is_plain_argument(expr) {
            return Shape::WholeArgument;
        }
    }
    let mut secrets = Vec::new();
    let mut seen_separator = false;
    let mut any_tag = false;
    for piece in pieces(source) {
        match piece {
            Piece::Literal(text) => {
                let mut rest = text;
                if !seen_separator {
                    if let Some(i) = rest.find("://") {
                        seen_separator = true;
                        rest = &rest[i + 3..];
                    } else if !any_tag {
                        // A literal start without `://` is not a URL; E021 reports it.
                        if rest.contains(['/', '?', '#']) {
                            break;
                        }
                        continue;
                    }
                }
                if rest.contains(['/', '?', '#']) {
                    break;
                }
            }
            Piece::Tag(tag) => {
                any_tag = true;
                if reads_input(tag) {
                    return Shape::FromInput(tag.to_string());
                }
                secrets.extend(secret_names(tag));
            }
        }
    }
    if any_tag {
        secrets.sort();
        secrets.dedup();
        return Shape::Secrets(secrets);
    }
    Shape::Literal(literal_host(source))
}

/// `args.url`, `args["url"]`: one argument, no filter, no expression around it.
fn is_plain_argument(expr: &str) -> bool {
    let e = expr.trim();
    let name = if let Some(rest) = e.strip_prefix("args.") {
        rest
    } else if let Some(rest) = e.strip_prefix("args[") {
        rest.strip_suffix(']')
            .map(|q| q.trim_matches(['"', '\'']))
            .unwrap_or("")
    } else {
        return false;
    };
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

enum Piece<'a> {
    Literal(&'a str),
    Tag(&'a str),
}

/// The template split into literal text and `{{ }}` / `{% %}` / `{# #}` tags, in order.
fn pieces(source: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(start) = ["{{", "{%", "{#"]
        .iter()
        .filter_map(|open| rest.find(open))
        .min()
    {
        if start > 0 {
            out.push(Piece::Literal(&rest[..start]));
        }
        let close = match &rest[start..start + 2] {
            "{{" => "}}",
            "{%" => "%}",
            _ => "#}",
        };
        let end = rest[start + 2..]
            .find(close)
            .map(|i| start + 2 + i + 2)
            .unwrap_or(rest.len());
        out.push(Piece::Tag(&rest[start..end]));
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        out.push(Piece::Literal(rest));
    }
    out
}

/// Identifiers in a tag, outside string literals, that are not attributes (`x.args` is not
/// `args`).
fn roots(tag: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = tag.as_bytes();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == b'\\' {
                i += 1;
            } else if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if b == b'"' || b == b'\'' {
            quote = Some(b);
            i += 1;
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let before = tag[..start].trim_end();
            if !before.ends_with('.') {
                out.push(&tag[start..i]);
            }
            continue;
        }
        i += 1;
    }
    out
}

fn reads_input(tag: &str) -> bool {
    roots(tag).iter().any(|r| INPUT_ROOTS.contains(r))
}

/// `secrets.NAME` and `secrets["NAME"]` in a tag.
fn secret_names(tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in tag.match_indices("secrets") {
        let after = tag[i + "secrets".len()..].trim_start();
        let name = if let Some(rest) = after.strip_prefix('.') {
            rest.trim_start()
        } else if let Some(rest) = after.strip_prefix('[') {
            rest.trim_start().trim_start_matches(['"', '\''])
        } else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// The host part of a URL template, or `None` when a template decides it.
pub(super) fn literal_host(url: &str) -> Option<HostRule> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if crate::templates::is_template(authority) || crate::templates::is_template(scheme) {
        return None;
    }
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    let rule = super::parse_host_rule(authority)?;
    Some(HostRule {
        host: rule.host,
        port: Some(rule.port.unwrap_or(default_port)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str, port: u16) -> Shape {
        Shape::Literal(Some(HostRule {
            host: h.into(),
            port: Some(port),
        }))
    }

    #[test]
    fn literal_origins_keep_their_host() {
        assert_eq!(
            shape("https://api.example.com/v1/{{ args.id }}"),
            host("api.example.com", 443)
        );
        assert_eq!(
            shape("http://127.0.0.1:8080?q={{ args.q }}"),
            host("127.0.0.1", 8080)
        );
        assert_eq!(shape("https://a.test"), host("a.test", 443));
    }

    #[test]
    fn arguments_in_the_origin_are_refused() {
        for t in [
            "http://{{ args.host }}/x",
            "http://127.0.0.1:{{ args.port }}/x",
            "https://api.example.com{{ args.path }}",
            "{{ args.base }}/x",
            "{{ secrets.BASE }}{{ args.id }}",
            "{% if args.x %}https://a/{% else %}https://b/{% endif %}",
            "{{ args['url'] | trim }}",
            "https://{{ query }}.test/",
            "{{ secrets.SCHEME }}://{{ args.h }}/x",
        ] {
            assert!(matches!(shape(t), Shape::FromInput(_)), "{t}");
        }
    }

    #[test]
    fn secrets_may_decide_the_origin() {
        assert_eq!(
            shape("{{ secrets.BASE }}/items/{{ args.id }}"),
            Shape::Secrets(vec!["BASE".into()])
        );
        assert_eq!(
            shape("{{ secrets.SCHEME }}://{{ secrets['HOST'] }}/x?{{ args.q }}"),
            Shape::Secrets(vec!["HOST".into(), "SCHEME".into()])
        );
        assert_eq!(
            shape("https://{{ secrets.HOST }}/{{ args.x }}"),
            Shape::Secrets(vec!["HOST".into()])
        );
    }

    #[test]
    fn a_whole_argument_is_its_own_shape() {
        assert_eq!(shape("{{ args.url }}"), Shape::WholeArgument);
        assert_eq!(shape(" {{- args[\"url\"] -}} "), Shape::WholeArgument);
        // Strings and attributes named like a root are not reads of it.
        assert_eq!(
            shape("https://{{ secrets.H }}/{{ 'args' }}"),
            Shape::Secrets(vec!["H".into()])
        );
    }
}
