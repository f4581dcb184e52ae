//! minijinja templates compiled once per spec. A string leaf that is exactly one `{{ expr }}`
//! keeps the expression's JSON type (a number argument stays a number); any other templated
//! string renders as text.
//!
//! Rendering is bounded in time and memory (issue 12): each template's cost is bounded when it
//! is compiled (`cost`), and one that may cost more than `MEMORY_BUDGET`/`TIME_BUDGET` with the
//! context at hand renders in a limited child process instead (`isolated`).

mod context;
mod cost;
pub mod isolated;
mod output;
mod simple;

use context::Data;
pub(crate) use context::{CallParts, Ctx, Shared};
use output::{json_formatter, urlencode};
pub(crate) use simple::Root;

use serde_json::Value;
use std::collections::HashMap;

/// Bounds the instructions a template can run (loops, huge ranges).
const FUEL: u64 = 200_000;
/// Display bytes (see `cost`) a template may build at once and read in all while rendering in
/// process; a template that could exceed either renders in a child process.
const MEMORY_BUDGET: f64 = (16 << 20) as f64;
const TIME_BUDGET: f64 = (256 << 20) as f64;
/// Names of templates made by `add_expr`, whose printed value is written as JSON.
const EXPR_PREFIX: char = 'j';
/// A rendered string larger than this is an error, not an observation to carry around.
pub(crate) const MAX_RENDERED_BYTES: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TemplateId(pub String);

/// Where a syntax error is inside a template: 1-based line, 1-based column in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TemplatePos {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum TValue {
    Literal(Value),
    Text(TemplateId),
    Expr(TemplateId),
    Array(Vec<TValue>),
    Object(Vec<(String, TValue)>),
}

/// Maps by template id, looked up two or three times for every rendered value: foldhash (the
/// hasher `serve`'s session maps use too) for a fraction of SipHash's cost. The ids are toolrun's
/// own (`t12`, `e3`), never text from a spec or a caller.
type ById<V> = foldhash::HashMap<String, V>;

pub(crate) struct Templates {
    env: minijinja::Environment<'static>,
    /// Each template's bound, by name.
    costs: ById<cost::Cost>,
    /// Templates without template syntax: rendered by returning their text, with no context.
    plain: foldhash::HashSet<String>,
    /// Templates that are exactly `{{ args.NAME }}`, by id: they pass an argument through, so
    /// one the call left out renders as null (an HTTP query parameter or header is then left
    /// out) instead of failing like every other undefined value.
    passthrough: ById<String>,
    /// Text templates that put one argument or secret into fixed text, by id (see `simple`).
    simple: ById<simple::Simple>,
    count: usize,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

/// Is `text` a template at all? Plain strings skip the template engine entirely.
pub(crate) fn is_template(text: &str) -> bool {
    text.contains("{{") || text.contains("{%") || text.contains("{#")
}

/// `{{ expr }}` alone (whitespace aside) → `Some(expr)`.
pub(crate) fn single_expression(text: &str) -> Option<&str> {
    let t = text.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    if inner.contains("{{") || inner.contains("}}") || inner.contains("{%") {
        return None;
    }
    Some(inner.trim_start_matches('-').trim_end_matches('-').trim())
}

impl Templates {
    pub(crate) fn new() -> Templates {
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
        // `debug()` prints the whole context: every secret of every tool, in whatever the
        // template renders (a query string bound for another host). A template reaches only what
        // it names; `check` says so where one is written (see `cost::analyse`).
        env.remove_global("debug");
        Templates {
            env,
            costs: Default::default(),
            plain: Default::default(),
            passthrough: Default::default(),
            simple: Default::default(),
            count: 0,
        }
    }

    /// Adds a template; a syntax error comes back with its 1-based line inside the template.
    /// Adds a template; a syntax error comes back with its (line, column) inside the template,
    /// both 1-based, the column in characters.
    pub(crate) fn add(
        &mut self,
        source: &str,
    ) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.add_named('t', source)
    }

    fn add_named(
        &mut self,
        prefix: char,
        source: &str,
    ) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.count += 1;
        let id = TemplateId(format!("{prefix}{}", self.count));
        // Before minijinja compiles it: compiling folds constants, which may itself be the
        // attack (`{{ 'x' * 100000000 }}`).
        let cost = cost::analyse(source).map_err(|e| (e, None))?;
        self.costs.insert(id.0.clone(), cost);
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
        // Expression leaves print JSON, not text.
        if let Some(simple) = Some(prefix)
            .filter(|p| *p != EXPR_PREFIX)
            .and_then(|_| simple::Simple::parse(source))
        {
            self.simple.insert(id.0.clone(), simple);
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

    pub(crate) fn is_plain(&self, id: &TemplateId) -> bool {
        self.plain.contains(&id.0)
    }

    /// Does rendering this value read the context at all? Callers skip building one when not:
    /// serialising every result so far for a literal answer is most of a scripted step's cost.
    pub(crate) fn needs_context(&self, tv: &TValue) -> bool {
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
    pub(crate) fn add_expr(
        &mut self,
        expr: &str,
    ) -> Result<TemplateId, (String, Option<TemplatePos>)> {
        self.add_named(EXPR_PREFIX, &format!("{{{{ {expr} }}}}"))
    }

    fn source_of(&self, name: &str) -> Option<String> {
        self.env
            .get_template(name)
            .ok()
            .map(|t| t.source().to_string())
    }

    /// Adds a template under a given name, as the parent named it (the isolated renderer).
    fn add_raw(&mut self, name: &str, source: &str) -> Result<(), String> {
        self.env
            .add_template_owned(name.to_string(), source.to_string())
            .map_err(|e| describe_error(e).message)
    }

    /// The secrets the templates `ids` name, sorted, each once. A call's context holds only
    /// these: a template that reads the whole map (`{{ secrets }}`, a loop over it,
    /// `secrets[args.which]`) finds no other secret there, even where `check` was not run (it
    /// reports E046).
    pub(crate) fn secrets_named<'i>(
        &self,
        ids: impl IntoIterator<Item = &'i TemplateId>,
    ) -> Vec<String> {
        let mut names = std::collections::BTreeSet::new();
        for id in ids {
            names.extend(self.secret_reads(id).0);
        }
        names.into_iter().collect()
    }

    /// What a template reads of `secrets`: the names it spells (`secrets.NAME`, or a constant
    /// `secrets["NAME"]`), and whether it reads the map itself (anything else).
    pub(crate) fn secret_reads(&self, id: &TemplateId) -> (Vec<String>, bool) {
        // Only a template that spells `secrets` can read one: no other is parsed again.
        let Some(source) = self.source_of(&id.0).filter(|s| s.contains("secrets")) else {
            return (Vec::new(), false);
        };
        let spelled = simple::constant_subscripts_as_fields(&source);
        let vars = match self.env.template_from_str(&spelled) {
            Ok(t) => t.undeclared_variables(true).into_iter().collect(),
            Err(_) => self.variables(id),
        };
        let mut names = Vec::new();
        let mut whole = false;
        for var in vars {
            match var.strip_prefix("secrets") {
                Some("") => whole = true,
                Some(field) => {
                    if let Some(name) = field.strip_prefix('.') {
                        names.push(name.split('.').next().unwrap_or(name).to_string());
                    }
                }
                None => {}
            }
        }
        names.sort();
        names.dedup();
        (names, whole)
    }

    /// Variables a template reads, dotted (`args.city`, `secrets.KEY`, `last`).
    pub(crate) fn variables(&self, id: &TemplateId) -> Vec<String> {
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
    /// Takes the value: a literal part (a mock's result can be a mapping of megabytes) moves
    /// into the template value instead of being copied.
    pub(crate) fn compile_value(
        &mut self,
        value: Value,
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
        value: Value,
        pointer: String,
        errors: &mut Vec<(String, String, Option<TemplatePos>)>,
    ) -> TValue {
        if !contains_template(&value) {
            return TValue::Literal(value);
        }
        match value {
            Value::String(s) => {
                let result = match single_expression(&s) {
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
                    None => self.add(&s).map(TValue::Text),
                };
                result.unwrap_or_else(|(msg, line)| {
                    errors.push((pointer, msg, line));
                    TValue::Literal(Value::Null)
                })
            }
            Value::Array(items) => TValue::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| self.compile_at(v, format!("{pointer}/{i}"), errors))
                    .collect(),
            ),
            Value::Object(map) => TValue::Object(
                map.into_iter()
                    .map(|(k, v)| {
                        let p = format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1"));
                        let tv = self.compile_at(v, p, errors);
                        (k, tv)
                    })
                    .collect(),
            ),
            other => TValue::Literal(other),
        }
    }

    /// Every template inside a template value, for checks on the variables they read.
    pub(crate) fn ids_of<'a>(&self, tv: &'a TValue, out: &mut Vec<&'a TemplateId>) {
        self.each_id(tv, &mut |id| out.push(id));
    }

    fn each_id<'a>(&self, tv: &'a TValue, f: &mut dyn FnMut(&'a TemplateId)) {
        match tv {
            TValue::Literal(_) => {}
            TValue::Text(id) | TValue::Expr(id) => f(id),
            TValue::Array(items) => items.iter().for_each(|i| self.each_id(i, f)),
            TValue::Object(entries) => entries.iter().for_each(|(_, v)| self.each_id(v, f)),
        }
    }

    /// Does rendering `name` over `ctx` need a child process? When its bound with this
    /// context's sizes is over budget, or it has no bound.
    fn needs_isolation(&self, name: &str, ctx: &Ctx<'_>) -> bool {
        match self.costs.get(name) {
            None => false,
            Some(cost::Cost::Unbounded(_)) => true,
            Some(cost::Cost::Bounded { memory, time }) => {
                let mut size = |root: &str| ctx.root_size(root);
                let memory = memory.eval(&mut size);
                memory > MEMORY_BUDGET || memory + time.eval(&mut size) > TIME_BUDGET
            }
        }
    }

    pub(crate) async fn render_text(
        &self,
        id: &TemplateId,
        ctx: &Ctx<'_>,
    ) -> Result<String, RenderError> {
        if let Some(text) = self.simple_text(&id.0, ctx) {
            return Ok(text);
        }
        if !self.needs_isolation(&id.0, ctx) {
            return self.render_here(&id.0, ctx);
        }
        let mut done = isolated::render_many(self, &[id.0.as_str()], ctx).await?;
        done.remove(&id.0)
            .unwrap_or_else(|| Err(RenderError::other("the template renderer gave no result")))
    }

    /// Renders in this process; only for templates whose bound allows it, or in the child.
    fn render_here(&self, name: &str, ctx: &Ctx<'_>) -> Result<String, RenderError> {
        // A simple template has a `{{`, so it is not plain: looked up first, it spares the
        // others their lookups.
        if let Some(text) = self.simple_text(name, ctx) {
            return Ok(text);
        }
        let template = self
            .env
            .get_template(name)
            .map_err(|e| RenderError::other(e.to_string()))?;
        if self.plain.contains(name) {
            return Ok(template.source().to_string());
        }
        if let Some(arg) = self.passed_through(name, ctx) {
            let expr = name.starts_with(EXPR_PREFIX);
            return Ok(match arg {
                None if expr => "null".to_string(),
                None => String::new(),
                Some(s) if expr => Value::String(s.to_string()).to_string(),
                Some(s) => s.to_string(),
            });
        }
        let ctx = ctx.value();
        if let Some(arg) = self.passthrough.get(name) {
            let absent = ctx
                .get_attr("args")
                .and_then(|args| args.get_attr(arg))
                .map_or(true, |v| v.is_undefined());
            if absent {
                let expr = name.starts_with(EXPR_PREFIX);
                return Ok(if expr { "null" } else { "" }.to_string());
            }
        }
        // Fuel bounds instructions, not bytes: `{% for i in range(100) %}{{ big }}{% endfor %}`
        // is cheap in fuel and huge in output. The writer stops the render at the limit instead
        // of checking the length of a string that was already built.
        let mut out = CappedWriter::default();
        let rendered = template.render_captured_to(ctx, &mut out).map(drop);
        if out.exceeded {
            return Err(RenderError::limit(format!(
                "template rendered more than the {MAX_RENDERED_BYTES} bytes allowed"
            )));
        }
        rendered.map_err(describe_error)?;
        // minijinja writes whole UTF-8 strings; the lossy conversion only avoids a panic path.
        Ok(match String::from_utf8(out.buf) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// What a template that puts one argument or secret into fixed text renders, when that
    /// value is a string at hand (see `simple`).
    fn simple_text(&self, name: &str, ctx: &Ctx<'_>) -> Option<String> {
        let simple = self.simple.get(name)?;
        simple.render(ctx.string(simple.root, &simple.name)?)
    }

    /// `simple_text(name, ctx).is_some()`, without rendering it.
    fn is_simple(&self, name: &str, ctx: &Ctx<'_>) -> bool {
        self.simple.get(name).is_some_and(|simple| {
            ctx.string(simple.root, &simple.name)
                .is_some_and(|value| simple.fits(value))
        })
    }

    /// The argument a `{{ args.NAME }}` template prints, read straight from the JSON context
    /// when it is a string (`Some(Some(text))`) or left out (`Some(None)`), without converting
    /// the context for minijinja: most HTTP tools' query parameters and headers are such
    /// templates. Other values, and URL contexts (which encode every string), are minijinja's
    /// to print (`None`).
    fn passed_through<'c>(&self, name: &str, ctx: &Ctx<'c>) -> Option<Option<&'c str>> {
        let arg = self.passthrough.get(name)?;
        let args = match (&ctx.data, ctx.raw_secrets) {
            (Data::Json(data), None) => data.get("args"),
            (Data::Call { args, .. }, None) => Some(*args),
            _ => None,
        };
        let Some(Value::Object(args)) = args else {
            return None;
        };
        match args.get(arg.as_str()) {
            None => Some(None),
            // Within the output cap however it is escaped (six bytes a character at most).
            Some(Value::String(s)) if s.len() <= (MAX_RENDERED_BYTES - 2) / 6 => {
                Some(Some(s.as_str()))
            }
            Some(_) => None,
        }
    }

    /// Renders a template value. Templates that need a child process render first, all in one.
    pub(crate) async fn render(&self, tv: &TValue, ctx: &Ctx<'_>) -> Result<Value, RenderError> {
        // Most values (a query parameter, a header) have no template to isolate: nothing is
        // collected or allocated for them.
        let mut isolate: Vec<&str> = Vec::new();
        self.each_id(tv, &mut |id| {
            let name = id.0.as_str();
            if !self.is_simple(name, ctx) && self.needs_isolation(name, ctx) {
                isolate.push(name);
            }
        });
        let mut done = if isolate.is_empty() {
            HashMap::new()
        } else {
            isolated::render_many(self, &isolate, ctx).await?
        };
        self.build(tv, ctx, &mut done)
    }

    fn build(
        &self,
        tv: &TValue,
        ctx: &Ctx<'_>,
        done: &mut HashMap<String, Result<String, RenderError>>,
    ) -> Result<Value, RenderError> {
        if let TValue::Expr(id) = tv {
            // The argument itself: no JSON text printed to be parsed back.
            let isolated = !done.is_empty() && done.contains_key(&id.0);
            if let (false, Some(arg)) = (isolated, self.passed_through(&id.0, ctx)) {
                return Ok(arg.map_or(Value::Null, |s| Value::String(s.to_string())));
            }
        }
        let mut text = |id: &TemplateId| {
            match done.is_empty() {
                false => done.remove(&id.0),
                true => None,
            }
            .unwrap_or_else(|| self.render_here(&id.0, ctx))
        };
        Ok(match tv {
            TValue::Literal(v) => v.clone(),
            TValue::Text(id) => Value::String(text(id)?),
            TValue::Expr(id) => serde_json::from_str(&text(id)?).unwrap_or(Value::Null),
            TValue::Array(_) | TValue::Object(_) => return self.build_nested(tv, ctx, done),
        })
    }

    fn build_nested(
        &self,
        tv: &TValue,
        ctx: &Ctx<'_>,
        done: &mut HashMap<String, Result<String, RenderError>>,
    ) -> Result<Value, RenderError> {
        Ok(match tv {
            TValue::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| self.build(i, ctx, done))
                    .collect::<Result<_, _>>()?,
            ),
            TValue::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.build(v, ctx, done)?)))
                    .collect::<Result<_, RenderError>>()?,
            ),
            leaf => self.build(leaf, ctx, done)?,
        })
    }
}

/// Why a render failed. `limit` marks a bound (fuel, output size, a child's memory or CPU
/// limit): callers report those as `limit_exceeded`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RenderError {
    pub(crate) message: String,
    pub(crate) limit: bool,
}

impl RenderError {
    pub(crate) fn limit(message: impl Into<String>) -> RenderError {
        RenderError {
            message: message.into(),
            limit: true,
        }
    }

    pub(crate) fn other(message: impl Into<String>) -> RenderError {
        RenderError {
            message: message.into(),
            limit: false,
        }
    }
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
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

fn describe_error(e: minijinja::Error) -> RenderError {
    let message = match e.kind() {
        minijinja::ErrorKind::OutOfFuel => {
            return RenderError::limit("template did too much work (loop or range too large)")
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
    };
    RenderError::other(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::live::testing::block_on;
    use serde_json::json;

    fn text(t: &Templates, id: &TemplateId, data: &Value) -> Result<String, String> {
        block_on(t.render_text(id, &Ctx::new(data))).map_err(|e| e.message)
    }

    fn render(t: &Templates, tv: &TValue, data: &Value) -> Result<Value, String> {
        block_on(t.render(tv, &Ctx::new(data))).map_err(|e| e.message)
    }

    #[test]
    fn single_expressions_keep_their_type() {
        let mut t = Templates::new();
        let tv = t
            .compile_value(json!({"n": "{{ args.n }}", "s": "id-{{ args.n }}", "k": 3}))
            .unwrap();
        let out = render(&t, &tv, &json!({"args": {"n": 5}})).unwrap();
        assert_eq!(out, json!({"n": 5, "s": "id-5", "k": 3}));
    }

    /// Issue 36 §2: what a template reads of `secrets`, as `check` and a call's context see it.
    #[test]
    fn secret_reads_are_names_or_the_whole_map() {
        let mut t = Templates::new();
        let mut reads = |source: &str| {
            let id = t.add(source).unwrap();
            t.secret_reads(&id)
        };
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            reads("Bearer {{ secrets.B }} {{ secrets.A }}"),
            (names(&["A", "B"]), false)
        );
        assert_eq!(
            reads("{{ secrets['A'] }}/{{ secrets [ \"B\" ] }}"),
            (names(&["A", "B"]), false)
        );
        assert_eq!(reads("no secrets here: {{ args.x }}"), (names(&[]), false));
        for whole in [
            "{{ secrets }}",
            "{{ secrets | items }}",
            "{% for k in secrets %}{{ k }}{% endfor %}",
            "{{ secrets[args.k] }}",
            "{% set s = secrets %}{{ s.A }}",
        ] {
            assert!(reads(whole).1, "{whole}");
        }
        assert_eq!(reads("{{ secrets.A }}{{ secrets }}"), (names(&["A"]), true));
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
        assert!(text(&t, &id, &json!({}))
            .unwrap_err()
            .contains("too much work"));
    }

    #[test]
    fn output_is_capped_while_rendering() {
        let mut t = Templates::new();
        let id = t
            .add("{% set mb = 'x' * 1000000 %}{% for i in range(1000) %}{{ mb }}{% endfor %}")
            .unwrap();
        let err = text(&t, &id, &json!({})).unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }

    #[test]
    fn undefined_values_are_errors_but_can_be_tested_and_defaulted() {
        let mut t = Templates::new();
        let ctx = json!({"last": {"result": 1}, "args": {}});
        for source in ["{{ last.reslt }}", "x {{ args.units }} y", "{{ nothing }}"] {
            let tv = t.compile_value(json!(source)).unwrap();
            let err = render(&t, &tv, &ctx).unwrap_err();
            assert!(err.contains("is undefined"), "{source}: {err}");
            assert!(err.contains("default("), "{source}: {err}");
        }
        let tv = t
            .compile_value(json!({
                "a": "{{ args.units | default('metric') }}",
                "b": "{% if last.error %}bad{% else %}{{ last.result }}{% endif %}",
                "c": "{{ args.units is defined }}",
            }))
            .unwrap();
        assert_eq!(
            render(&t, &tv, &ctx).unwrap(),
            json!({"a": "metric", "b": "1", "c": false})
        );
    }

    #[test]
    fn an_argument_passed_through_alone_is_null_when_left_out() {
        let mut t = Templates::new();
        let tv = t
            .compile_value(json!({"q": "{{ args.q }}", "h": "{{args.q}}", "x": "x{{ args.q }}"}))
            .unwrap();
        let err = render(&t, &tv, &json!({"args": {}})).unwrap_err();
        assert!(err.contains("`args.q` is undefined"), "{err}");
        let tv = t
            .compile_value(json!({"q": "{{ args.q }}", "n": " {{ args.n }} "}))
            .unwrap();
        assert_eq!(
            render(&t, &tv, &json!({"args": {"n": 2}})).unwrap(),
            json!({"q": null, "n": 2})
        );
        let id = t.add("{{ args.q }}").unwrap();
        assert_eq!(text(&t, &id, &json!({"args": {}})).unwrap(), "");
    }

    #[test]
    fn one_value_in_fixed_text_renders_as_the_engine_renders_it() {
        let mut t = Templates::new();
        let bearer = t.add("Bearer {{ secrets.KEY }}").unwrap();
        let id = t.add("id-{{ args.n }}.").unwrap();
        let data = json!({"args": {"n": "a&b<c>"}, "secrets": {"KEY": "k \"1\""}});
        assert_eq!(text(&t, &bearer, &data).unwrap(), "Bearer k \"1\"");
        assert_eq!(text(&t, &id, &data).unwrap(), "id-a&b<c>.");
        // Not a string, or not there: the engine's output and errors.
        let data = json!({"args": {"n": 5}, "secrets": {}});
        assert_eq!(text(&t, &id, &data).unwrap(), "id-5.");
        assert!(text(&t, &bearer, &data).unwrap_err().contains("undefined"));
        let data = json!({"args": {}});
        assert!(text(&t, &id, &data)
            .unwrap_err()
            .contains("`args.n` is undefined"));
    }

    #[test]
    fn objects_and_arrays_render_as_json() {
        let mut t = Templates::new();
        let id = t
            .add("{{ r }} and {{ r.items }} and {{ r.name }} {{ r.n }} {{ r.ok }} {{ r.no }}")
            .unwrap();
        let ctx = json!({"r": {"date": "2030-01-02", "items": [1, "two", null], "name": "Ann", "n": 1.5, "ok": true, "no": null}});
        assert_eq!(
            text(&t, &id, &ctx).unwrap(),
            r#"{"date":"2030-01-02","items":[1,"two",null],"name":"Ann","n":1.5,"ok":true,"no":null} and [1,"two",null] and Ann 1.5 true null"#
        );
    }

    /// Would this template render in a child process over `data`?
    fn isolated(source: &str, data: &Value) -> bool {
        let mut t = Templates::new();
        let id = t.add(source).unwrap();
        t.needs_isolation(&id.0, &Ctx::new(data))
    }

    #[test]
    fn ordinary_templates_render_in_process() {
        // 56 KB of escape-heavy text: a query far longer than people type.
        let big: String = "é\"<x>".repeat(8_000);
        let results: Vec<Value> = (0..200)
            .map(|i| json!({"name": "t", "result": {"id": i, "title": "x"}, "status": "ok"}))
            .collect();
        let data = json!({"args": {"city": big, "n": 3}, "query": big, "results": results,
            "last": {"result": [{"title": "a", "id": 1}]}});
        for source in [
            "{{ args.city }}",
            "Bearer {{ secrets.KEY }}",
            "{{ query | upper | replace('WHAT IS THE PRICE OF ', '') | replace('?', '') }}",
            "{% for o in last.result %}{{ o.title }} ({{ o.id }}){% if not loop.last %}, {% endif %}{% endfor %}.",
            "{% for r in results %}{{ r.id }}={{ r.status }} {% if r.status == 'ok' %}{{ r.name | upper }}{% endif %}{% endfor %}",
            "{% for i in range(300) %}event {{ i }}: parcel scanned at hub; {% endfor %}",
            "{% if last.error %}bad{% else %}{{ last.result | tojson }}{% endif %}",
            "{{ args.units | default('metric') }} {{ args.city | urlencode }} {{ results | length }}",
            "{% set name = args.city | lower %}{{ name ~ '!' }}",
            "{{ (results | map(attribute='id') | list) if false else 1 }}x",
        ] {
            let isolated = isolated(source, &data);
            if source.contains("map(") {
                assert!(isolated, "unmodelled filters render in a child: {source}");
            } else {
                assert!(!isolated, "{source}");
            }
        }
    }

    #[test]
    fn templates_that_can_grow_without_bound_render_in_a_child() {
        let data = json!({"args": {"s": "ab"}});
        let mut doubling = String::from("{% set a0 = args.s %}");
        for i in 1..40 {
            doubling.push_str(&format!("{{% set a{i} = a{p} ~ a{p} %}}", p = i - 1));
        }
        doubling.push_str("{{ a39 | length }}");
        for source in [
            doubling.as_str(),
            "{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}",
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            "{% set x %}{% for i in range(99999) %}{{ args.s }}{% endfor %}{% endset %}{{ x }}",
            "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}",
            "{{ args.s * args.n }}",
            "{{ args.s | center(1000000000) }}",
            "{% for i in range(100000) %}{% if (args.s ~ args.s) == '' %}{% endif %}{% endfor %}",
        ] {
            let data = if source.contains("range(100000)") {
                json!({"args": {"s": "x".repeat(100_000)}})
            } else {
                data.clone()
            };
            assert!(isolated(source, &data), "{source}");
        }
    }

    #[test]
    fn huge_constants_are_refused_before_compiling() {
        let mut t = Templates::new();
        for source in [
            "{{ 'x' * 100000000 }}",
            "{{ ('x' * 900000 ~ 'y' * 900000) ~ args.s }}",
        ] {
            let (msg, _) = t.add(source).unwrap_err();
            assert!(msg.contains("megabyte"), "{source}: {msg}");
        }
        assert!(t.add("{{ '-' * 80 }}").is_ok());
    }

    #[test]
    fn syntax_errors_have_a_line() {
        let mut t = Templates::new();
        let (_, pos) = t.add("ok\n{{ broken ").unwrap_err();
        assert_eq!(pos.map(|p| p.line), Some(2));
    }
}
