//! minijinja templates compiled once per spec. A string leaf that is exactly one `{{ expr }}`
//! keeps the expression's JSON type (a number argument stays a number); any other templated
//! string renders as text.

use serde_json::Value;

/// Bounds the work a hostile template (loops, huge ranges) can make a run do.
const FUEL: u64 = 200_000;
/// Names of templates made by `add_expr`, whose printed value is written as JSON.
const EXPR_PREFIX: char = 'j';
/// A rendered string larger than this is an error, not an observation to carry around.
pub const MAX_RENDERED_BYTES: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TemplateId(pub String);

/// Where a syntax error is inside a template: 1-based line, 1-based column in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplatePos {
    pub line: usize,
    pub column: usize,
}

#[derive(Clone, Debug)]
pub enum TValue {
    Literal(Value),
    Text(TemplateId),
    Expr(TemplateId),
    Array(Vec<TValue>),
    Object(Vec<(String, TValue)>),
}

pub struct Templates {
    env: minijinja::Environment<'static>,
    /// Templates without template syntax: rendered by returning their text, with no context.
    plain: std::collections::HashSet<String>,
    /// Templates that are exactly `{{ args.NAME }}`, by id: they pass an argument through, so
    /// one the call left out renders as null (an HTTP query parameter or header is then left
    /// out) instead of failing like every other undefined value.
    passthrough: std::collections::HashMap<String, String>,
    count: usize,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

/// Is `text` a template at all? Plain strings skip the template engine entirely.
pub fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// `{{ expr }}` alone (whitespace aside) → `Some(expr)`.
pub fn single_expression(text: &str) -> Option<&str> {
    let t = text.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    if inner.contains("{{") || inner.contains("}}") || inner.contains("{%") {
        return None;
    }
    Some(inner.trim_start_matches('-').trim_end_matches('-').trim())
}

impl Templates {
    pub fn new() -> Templates {
        let mut env = minijinja::Environment::new();
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(64);
        // A typo (`{{ last.reslt }}`) must fail loudly instead of rendering as nothing; `{% if
        // last.error %}` and `| default(..)` still work on values that may be absent.
        env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
        env.set_formatter(json_formatter);
        // Undefined values remember the expression that made them, so the error names it
        // (`last.reslt` is undefined) in every build profile alike.
        env.set_debug(true);
        env.add_filter("urlencode", urlencode);
        Templates {
            env,
            plain: Default::default(),
            passthrough: Default::default(),
            count: 0,
        }
    }

    /// Adds a template; a syntax error comes back with its 1-based line inside the template.
    /// Adds a template; a syntax error comes back with its (line, column) inside the template,
    /// both 1-based, the column in characters.
    pub fn add(&mut self, source: &str) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.add_named('t', source)
    }

    fn add_named(
        &mut self,
        prefix: char,
        source: &str,
    ) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.count += 1;
        let id = TemplateId(format!("{prefix}{}", self.count));
        self.env
            .add_template_owned(id.0.clone(), source.to_string())
            .map_err(|e| {
                let pos = e.line().map(|line| {
                    let column = e
                        .range()
                        .and_then(|r| source.get(..r.start))
                        .map(|before| before.rsplit('\n').next().unwrap_or("").chars().count() + 1)
                        .unwrap_or(1);
                    TemplatePos { line, column }
                });
                (e.detail().unwrap_or(&e.kind().to_string()).to_string(), pos)
            })?;
        if !is_template(source) {
            self.plain.insert(id.0.clone());
        }
        if let Some(name) = single_expression(source)
            .and_then(|e| e.strip_prefix("args."))
            .filter(|n| {
                !n.is_empty()
                    && !n.starts_with(|c: char| c.is_ascii_digit())
                    && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        {
            self.passthrough.insert(id.0.clone(), name.to_string());
        }
        Ok(id)
    }

    pub fn is_plain(&self, id: &TemplateId) -> bool {
        self.plain.contains(&id.0)
    }

    /// Does rendering this value read the context at all? Callers skip building one when not:
    /// serialising every result so far for a literal answer is most of a scripted step's cost.
    pub fn needs_context(&self, tv: &TValue) -> bool {
        match tv {
            TValue::Literal(_) => false,
            TValue::Text(id) => !self.is_plain(id),
            TValue::Expr(_) => true,
            TValue::Array(items) => items.iter().any(|i| self.needs_context(i)),
            TValue::Object(entries) => entries.iter().any(|(_, v)| self.needs_context(v)),
        }
    }

    /// For `{{ expr }}` leaves: the formatter prints the value of an `EXPR_PREFIX` template as
    /// JSON so its type survives. Printing (rather than a `tojson` filter) keeps strict undefined
    /// checks: a filter would serialise an undefined value as `null`.
    pub fn add_expr(&mut self, expr: &str) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.add_named(EXPR_PREFIX, &format!("{{{{ {expr} }}}}"))
    }

    /// The text a template was compiled from (HTTP tools read the literal host of a URL).
    pub fn source(&self, id: &TemplateId) -> Option<String> {
        self.env
            .get_template(&id.0)
            .ok()
            .map(|t| t.source().to_string())
    }

    /// Variables a template reads, dotted (`args.city`, `secrets.KEY`, `last`).
    pub fn variables(&self, id: &TemplateId) -> Vec<String> {
        let mut vars: Vec<String> = match self.env.get_template(&id.0) {
            // Global functions (`range`, `dict`, ...) are not variables a spec must provide.
            Ok(t) => t
                .undeclared_variables(true)
                .into_iter()
                .filter(|v| {
                    let root = v.split('.').next().unwrap_or(v);
                    !self.env.globals().any(|(name, _)| name == root)
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        vars.sort();
        vars
    }

    /// Compiles a YAML value into a template value; every string leaf with template syntax
    /// becomes a template. Errors carry the JSON Pointer of the leaf and the line inside it.
    pub fn compile_value(
        &mut self,
        value: &Value,
    ) -> Result<TValue, Vec<(String, String, Option<TemplatePos>)>> {
        let mut errors = Vec::new();
        let tv = self.compile_at(value, String::new(), &mut errors);
        if errors.is_empty() {
            Ok(tv)
        } else {
            Err(errors)
        }
    }

    fn compile_at(
        &mut self,
        value: &Value,
        pointer: String,
        errors: &mut Vec<(String, String, Option<TemplatePos>)>,
    ) -> TValue {
        match value {
            Value::String(s) if is_template(s) => {
                let result = match single_expression(s) {
                    // The wrapper `{{ expr }}` shifts columns: map them back to `s`.
                    Some(expr) => self.add_expr(expr).map(TValue::Expr).map_err(|(msg, pos)| {
                        let start = s.find(expr).map(|b| s[..b].chars().count()).unwrap_or(0);
                        let pos =
                            pos.filter(|p| p.line == 1 && p.column > 3)
                                .map(|p| TemplatePos {
                                    line: 1,
                                    column: p.column - 3 + start,
                                });
                        (msg, pos)
                    }),
                    None => self.add(s).map(TValue::Text),
                };
                result.unwrap_or_else(|(msg, line)| {
                    errors.push((pointer, msg, line));
                    TValue::Literal(Value::Null)
                })
            }
            Value::Array(items) if contains_template(value) => TValue::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.compile_at(v, format!("{pointer}/{i}"), errors))
                    .collect(),
            ),
            Value::Object(map) if contains_template(value) => TValue::Object(
                map.iter()
                    .map(|(k, v)| {
                        let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                        (k.clone(), self.compile_at(v, p, errors))
                    })
                    .collect(),
            ),
            other => TValue::Literal(other.clone()),
        }
    }

    /// Every template inside a template value, for checks on the variables they read.
    pub fn ids_of<'a>(&self, tv: &'a TValue, out: &mut Vec<&'a TemplateId>) {
        match tv {
            TValue::Literal(_) => {}
            TValue::Text(id) | TValue::Expr(id) => out.push(id),
            TValue::Array(items) => items.iter().for_each(|i| self.ids_of(i, out)),
            TValue::Object(entries) => entries.iter().for_each(|(_, v)| self.ids_of(v, out)),
        }
    }

    pub fn render_text(&self, id: &TemplateId, ctx: &minijinja::Value) -> Result<String, String> {
        let template = self.env.get_template(&id.0).map_err(|e| e.to_string())?;
        if self.is_plain(id) {
            return Ok(template.source().to_string());
        }
        if let Some(name) = self.passthrough.get(&id.0) {
            let absent = ctx
                .get_attr("args")
                .and_then(|args| args.get_attr(name))
                .map_or(true, |v| v.is_undefined());
            if absent {
                let expr = id.0.starts_with(EXPR_PREFIX);
                return Ok(if expr { "null" } else { "" }.to_string());
            }
        }
        // Fuel bounds instructions, not bytes: `{% for i in range(100) %}{{ big }}{% endfor %}`
        // is cheap in fuel and huge in output. The writer stops the render at the limit instead
        // of checking the length of a string that was already built.
        let mut out = CappedWriter::default();
        let rendered = template.render_captured_to(ctx, &mut out).map(drop);
        if out.exceeded {
            return Err(format!(
                "template rendered more than the {MAX_RENDERED_BYTES} bytes allowed"
            ));
        }
        rendered.map_err(describe_error)?;
        // minijinja writes whole UTF-8 strings; the lossy conversion only avoids a panic path.
        Ok(match String::from_utf8(out.buf) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    pub fn render(&self, tv: &TValue, ctx: &minijinja::Value) -> Result<Value, String> {
        Ok(match tv {
            TValue::Literal(v) => v.clone(),
            TValue::Text(id) => Value::String(self.render_text(id, ctx)?),
            TValue::Expr(id) => {
                let json = self.render_text(id, ctx)?;
                serde_json::from_str(&json).unwrap_or(Value::Null)
            }
            TValue::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.render(i, ctx))
                    .collect::<Result<_, _>>()?,
            ),
            TValue::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.render(v, ctx)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }
}

/// minijinja's `urlencode`, except that a *safe* string passes through unchanged. HTTP tools
/// render URLs with every value already percent-encoded and marked safe (so a value can never
/// add a `/`, `?` or `&`); without this, `{{ args.city | urlencode }}` would encode it twice.
/// Values are only ever marked safe there, so everywhere else this is the builtin filter.
fn urlencode(value: &minijinja::Value) -> Result<minijinja::Value, minijinja::Error> {
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
fn json_formatter(
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

/// Collects rendered output and refuses to grow past `MAX_RENDERED_BYTES`.
#[derive(Default)]
struct CappedWriter {
    buf: Vec<u8>,
    exceeded: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > MAX_RENDERED_BYTES {
            self.exceeded = true;
            return Err(std::io::Error::other("rendered output limit"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn contains_template(v: &Value) -> bool {
    match v {
        Value::String(s) => is_template(s),
        Value::Array(items) => items.iter().any(contains_template),
        Value::Object(map) => map.values().any(contains_template),
        _ => false,
    }
}

fn describe_error(e: minijinja::Error) -> String {
    match e.kind() {
        minijinja::ErrorKind::OutOfFuel => {
            "template did too much work (loop or range too large)".to_string()
        }
        minijinja::ErrorKind::UndefinedError => format!(
            "{}; check the name, or give an optional value a fallback: `{{{{ x | default(\"...\") }}}}`",
            match e.detail() {
                Some(d) => d.to_string(),
                None => "a value the template reads is undefined".to_string(),
            }
        ),
        _ => match e.detail() {
            Some(d) => format!("{}: {d}", e.kind()),
            None => e.kind().to_string(),
        },
    }
}

pub fn context(value: &Value) -> minijinja::Value {
    minijinja::Value::from(minijinja::value::Serde(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn single_expressions_keep_their_type() {
        let mut t = Templates::new();
        let tv = t
            .compile_value(&json!({"n": "{{ args.n }}", "s": "id-{{ args.n }}", "k": 3}))
            .unwrap();
        let out = t.render(&tv, &context(&json!({"args": {"n": 5}}))).unwrap();
        assert_eq!(out, json!({"n": 5, "s": "id-5", "k": 3}));
    }

    #[test]
    fn variables_are_listed_dotted() {
        let mut t = Templates::new();
        let id = t
            .add("{{ args.city | urlencode }} {{ secrets.KEY }}")
            .unwrap();
        assert_eq!(
            t.variables(&id),
            vec!["args.city".to_string(), "secrets.KEY".to_string()]
        );
    }

    #[test]
    fn runaway_loops_run_out_of_fuel() {
        let mut t = Templates::new();
        let id = t
            .add(
                "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
            )
            .unwrap();
        assert!(t
            .render_text(&id, &context(&json!({})))
            .unwrap_err()
            .contains("too much work"));
    }

    #[test]
    fn output_is_capped_while_rendering() {
        let mut t = Templates::new();
        let id = t
            .add("{% set mb = 'x' * 1000000 %}{% for i in range(1000) %}{{ mb }}{% endfor %}")
            .unwrap();
        let err = t.render_text(&id, &context(&json!({}))).unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }

    #[test]
    fn undefined_values_are_errors_but_can_be_tested_and_defaulted() {
        let mut t = Templates::new();
        let ctx = context(&json!({"last": {"result": 1}, "args": {}}));
        for source in ["{{ last.reslt }}", "x {{ args.units }} y", "{{ nothing }}"] {
            let tv = t.compile_value(&json!(source)).unwrap();
            let err = t.render(&tv, &ctx).unwrap_err();
            assert!(err.contains("is undefined"), "{source}: {err}");
            assert!(err.contains("default("), "{source}: {err}");
        }
        let tv = t
            .compile_value(&json!({
                "a": "{{ args.units | default('metric') }}",
                "b": "{% if last.error %}bad{% else %}{{ last.result }}{% endif %}",
                "c": "{{ args.units is defined }}",
            }))
            .unwrap();
        assert_eq!(
            t.render(&tv, &ctx).unwrap(),
            json!({"a": "metric", "b": "1", "c": false})
        );
    }

    #[test]
    fn an_argument_passed_through_alone_is_null_when_left_out() {
        let mut t = Templates::new();
        let tv = t
            .compile_value(&json!({"q": "{{ args.q }}", "h": "{{args.q}}", "x": "x{{ args.q }}"}))
            .unwrap();
        let err = t.render(&tv, &context(&json!({"args": {}}))).unwrap_err();
        assert!(err.contains("`args.q` is undefined"), "{err}");
        let tv = t
            .compile_value(&json!({"q": "{{ args.q }}", "n": " {{ args.n }} "}))
            .unwrap();
        assert_eq!(
            t.render(&tv, &context(&json!({"args": {"n": 2}}))).unwrap(),
            json!({"q": null, "n": 2})
        );
        let id = t.add("{{ args.q }}").unwrap();
        assert_eq!(
            t.render_text(&id, &context(&json!({"args": {}}))).unwrap(),
            ""
        );
    }

    #[test]
    fn objects_and_arrays_render_as_json() {
        let mut t = Templates::new();
        let id = t
            .add("{{ r }} and {{ r.items }} and {{ r.name }} {{ r.n }} {{ r.ok }} {{ r.no }}")
            .unwrap();
        let ctx = context(
            &json!({"r": {"date": "2030-01-02", "items": [1, "two", null], "name": "Ann", "n": 1.5, "ok": true, "no": null}}),
        );
        assert_eq!(
            t.render_text(&id, &ctx).unwrap(),
            r#"{"date":"2030-01-02","items":[1,"two",null],"name":"Ann","n":1.5,"ok":true,"no":null} and [1,"two",null] and Ann 1.5 true null"#
        );
    }

    #[test]
    fn syntax_errors_have_a_line() {
        let mut t = Templates::new();
        let (_, pos) = t.add("ok\n{{ broken ").unwrap_err();
        assert_eq!(pos.map(|p| p.line), Some(2));
    }
}
