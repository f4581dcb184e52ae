//! Templates that put one argument or secret into fixed text (`Bearer {{ secrets.KEY }}`,
//! `id-{{ args.id }}`), as most HTTP tools' headers and query parameters do: rendered by joining
//! the text and the value, without the template engine or a context converted for it. For a
//! string value that is exactly what minijinja prints; any other value (or none) is left to it,
//! with its errors.

/// Where the value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Root {
    Args,
    Secrets,
}

#[derive(Debug)]
pub(super) struct Simple {
    prefix: String,
    pub(super) root: Root,
    pub(super) name: String,
    suffix: String,
}

impl Simple {
    /// `source` as one, if it is one: text without braces or line breaks (minijinja drops a
    /// final line break) around one `{{ args.NAME }}` or `{{ secrets.NAME }}` without
    /// whitespace control.
    pub(super) fn parse(source: &str) -> Option<Simple> {
        let (prefix, rest) = source.split_once("{{")?;
        let (inner, suffix) = rest.split_once("}}")?;
        let literal = |t: &str| !t.contains(['{', '}', '\n', '\r']);
        if !literal(prefix) || !literal(suffix) {
            return None;
        }
        let inner = inner.trim_matches([' ', '\t']);
        let (root, name) = match (inner.strip_prefix("args."), inner.strip_prefix("secrets.")) {
            (Some(name), _) => (Root::Args, name),
            (_, Some(name)) => (Root::Secrets, name),
            _ => return None,
        };
        let identifier = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        identifier.then(|| Simple {
            prefix: prefix.to_string(),
            root,
            name: name.to_string(),
            suffix: suffix.to_string(),
        })
    }

    /// The text with `value` in its place, within the output cap.
    pub(super) fn render(&self, value: &str) -> Option<String> {
        self.fits(value)
            .then(|| [&self.prefix, value, &self.suffix].concat())
    }

    /// Whether the text with `value` in its place is within the output cap.
    pub(super) fn fits(&self, value: &str) -> bool {
        self.prefix.len() + value.len() + self.suffix.len() <= super::MAX_RENDERED_BYTES
    }
}

/// `source` with each constant subscript of `secrets` (`secrets["NAME"]`, `secrets['NAME']`)
/// spelled as a field (`secrets.NAME`): the same read, which minijinja lists by name only in
/// the field form.
pub(crate) fn constant_subscripts_as_fields(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(at) = rest.find("secrets") {
        let (before, from) = rest.split_at(at + "secrets".len());
        out.push_str(before);
        rest = from;
        let inner = from.trim_start();
        let Some(quoted) = inner.strip_prefix('[').map(str::trim_start) else {
            continue;
        };
        let Some(quote) = quoted.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let name: &str = {
            let body = &quoted[1..];
            let len = body
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(body.len());
            &body[..len]
        };
        let after = &quoted[1 + name.len()..];
        let Some(tail) = after
            .strip_prefix(quote)
            .map(str::trim_start)
            .and_then(|t| t.strip_prefix(']'))
        else {
            continue;
        };
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        out.push('.');
        out.push_str(name);
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::{Root, Simple};

    #[test]
    fn only_one_value_in_plain_text_is_simple() {
        let s = Simple::parse("Bearer {{ secrets.API_KEY }}").unwrap();
        assert_eq!((s.root, s.name.as_str()), (Root::Secrets, "API_KEY"));
        assert_eq!(s.render("k").as_deref(), Some("Bearer k"));
        let s = Simple::parse("id-{{args.n}}!").unwrap();
        assert_eq!(s.render("7").as_deref(), Some("id-7!"));
        for not in [
            "{{ args.a }}{{ args.b }}",
            "{{- secrets.K }}",
            "{{ secrets.K -}}",
            "{{ args.a | upper }}",
            "{{ args.a.b }}",
            "{{ args.1 }}",
            "{{ query }}",
            "{% if x %}{{ args.a }}{% endif %}",
            "x\n{{ args.a }}",
            "{{ args.a }}\n",
            "{# c #}{{ args.a }}",
            "{{ last.result }}",
        ] {
            assert!(Simple::parse(not).is_none(), "{not}");
        }
    }
}
