//! How values leave a template: printed as JSON, and `urlencode` that never encodes twice.

use super::EXPR_PREFIX;

/// minijinja's `urlencode`, except that a *safe* string passes through unchanged. HTTP tools
/// render URLs with every value already percent-encoded and marked safe (so a value can never
/// add a `/`, `?` or `&`); without this, `{{ args.city | urlencode }}` would encode it twice.
/// Values are only ever marked safe there, so everywhere else this is the builtin filter.
pub(super) fn urlencode(value: &minijinja::Value) -> Result<minijinja::Value, minijinja::Error> {
    if value.is_safe() && value.as_str().is_some() {
        return Ok(value.clone());
    }
    if value.kind() == minijinja::value::ValueKind::Map {
        let mut out = String::new();
        for key in value.try_iter()? {
            let v = value.get_item(&key)?;
            if v.is_none() || v.is_undefined() {
                continue;
            }
            if !out.is_empty() {
                out.push('&');
            }
            out.push_str(&minijinja::filters::urlencode(&key)?);
            out.push('=');
            out.push_str(urlencode(&v)?.as_str().unwrap_or_default());
        }
        return Ok(minijinja::Value::from(out));
    }
    minijinja::filters::urlencode(value).map(minijinja::Value::from)
}

/// Values print as JSON (what a model, an API or a person reading a trace expects), not as
/// minijinja's Python-style `{'date': ...}`, `True` or `none`; strings print as themselves in
/// text. In an expression leaf (`EXPR_PREFIX`) everything is JSON, strings quoted, so the
/// rendered text parses back into the value with its type.
pub(super) fn json_formatter(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    use minijinja::value::ValueKind;
    let as_json = match value.kind() {
        ValueKind::Undefined => false,
        ValueKind::String => state.name().starts_with(EXPR_PREFIX),
        _ => true,
    };
    if !as_json {
        return minijinja::escape_formatter(out, state, value);
    }
    let json = serde_json::to_string(value).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::BadSerialization, e.to_string())
    })?;
    out.write_str(&json).map_err(minijinja::Error::from)
}
