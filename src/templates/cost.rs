//! A static upper bound on what rendering a template can allocate and do (issue 12 §4).
//!
//! Fuel caps minijinja's instructions, not bytes: `{% set b = a ~ a %}` repeated 40 times is a
//! few hundred instructions and a terabyte of text, and a render on the single-threaded runtime
//! cannot be interrupted. So every template is analysed once, when it is compiled, into a bound
//! `c + Σ k·size(root)` over the sizes of the context's top-level values (`args`, `results`,
//! ...). At render time the bound is evaluated with the real sizes: a template under
//! `WORK_BUDGET` renders in process; anything else (and any construct the analysis does not
//! model) renders in a child process with hard memory, CPU and wall-clock limits
//! (`super::isolated`).
//!
//! Sizes are in "display bytes": an upper bound on a value's text as `~` or `{{ }}` prints it
//! and on its JSON, so strings count 6 bytes per byte (escapes) and numbers 330 (the longest
//! float printed without an exponent). Two bounds come out: *memory*, every value an operation
//! builds (loop bodies once, for their largest item: what an iteration builds is dropped before
//! the next), and *time*, every byte built, read, compared or sorted, each iteration counted.
//! Emitting is neither: the output writer refuses text past `MAX_RENDERED_BYTES`, so a render
//! prints at most that much whatever its loops, and the instructions themselves are capped by
//! fuel.

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt};
use std::collections::{HashMap, HashSet};

/// Every loop iteration costs at least one unit of fuel, so no body runs more often than this.
const MAX_ITERATIONS: f64 = super::FUEL as f64;
/// Display bytes of a number: `1e300` prints as 301 digits.
pub(super) const NUMBER_SIZE: f64 = 330.0;
/// Constant expressions are folded by minijinja while it compiles, before any render limit
/// applies (`'x' * 100000000` would allocate 100 MB in `check`): their sizes are capped here.
/// In display bytes: about a megabyte of text.
pub(super) const MAX_CONSTANT_BYTES: f64 = (8 << 20) as f64;
/// Estimated largest `range()` (minijinja refuses more elements).
const MAX_RANGE: f64 = 100_000.0;

/// `c + Σ k·size(root)`: an upper bound, in display bytes, linear in the sizes of the context's
/// top-level values.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Bound {
    pub c: f64,
    pub roots: Vec<(String, f64)>,
}

impl Bound {
    fn constant(c: f64) -> Bound {
        Bound {
            c,
            roots: Vec::new(),
        }
    }

    fn root(name: &str) -> Bound {
        Bound {
            c: 0.0,
            roots: vec![(name.to_string(), 1.0)],
        }
    }

    fn is_constant(&self) -> bool {
        self.roots.is_empty()
    }

    fn plus(&self, other: &Bound) -> Bound {
        self.plus_scaled(other, 1.0)
    }

    fn plus_scaled(&self, other: &Bound, k: f64) -> Bound {
        let mut out = self.clone();
        out.c += other.c * k;
        for (name, w) in &other.roots {
            match out.roots.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v += w * k,
                None => out.roots.push((name.clone(), w * k)),
            }
        }
        out
    }

    fn scaled(&self, k: f64) -> Bound {
        Bound::default().plus_scaled(self, k)
    }

    /// Component-wise maximum: at least either.
    fn max(&self, other: &Bound) -> Bound {
        let mut out = self.clone();
        out.c = out.c.max(other.c);
        for (name, w) in &other.roots {
            match out.roots.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = v.max(*w),
                None => out.roots.push((name.clone(), *w)),
            }
        }
        out
    }

    /// At most either: the constant one when there is one.
    fn min(&self, other: &Bound) -> Bound {
        if other.is_constant() && !self.is_constant() {
            other.clone()
        } else {
            self.clone()
        }
    }

    /// A product stays linear only when one side is a constant.
    fn times(&self, other: &Bound) -> Option<Bound> {
        if self.is_constant() {
            Some(other.scaled(self.c))
        } else if other.is_constant() {
            Some(self.scaled(other.c))
        } else {
            None
        }
    }

    /// The coefficient of `name`, and the bound without it.
    fn split(&self, name: &str) -> (f64, Bound) {
        let mut rest = self.clone();
        let k = match rest.roots.iter().position(|(n, _)| n == name) {
            Some(i) => rest.roots.remove(i).1,
            None => 0.0,
        };
        (k, rest)
    }

    fn substitute(&self, name: &str, by: &Bound) -> Bound {
        let (k, rest) = self.split(name);
        rest.plus_scaled(by, k)
    }

    pub(super) fn eval(&self, size_of: &mut dyn FnMut(&str) -> f64) -> f64 {
        self.roots
            .iter()
            .fold(self.c, |acc, (name, k)| acc + k * size_of(name))
    }
}

/// What the analysis found.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Cost {
    /// At most `memory` display bytes alive at once and `time` bytes read or written in all,
    /// whatever the context holds.
    Bounded { memory: Bound, time: Bound },
    /// A construct whose cost the analysis does not bound (why, for tests and debugging).
    Unbounded(String),
}

/// Analyses a template. `Err` is a compile error: a constant minijinja would fold into too
/// large a value while compiling.
pub(super) fn analyse(source: &str) -> Result<Cost, String> {
    let Ok(tree) = minijinja::machinery::parse(source, "<template>", Default::default()) else {
        // minijinja reports the syntax error itself when the template is added.
        return Ok(Cost::Unbounded("does not parse".into()));
    };
    let mut a = Analysis::default();
    a.scopes.push(HashMap::new());
    match a.stmt(&tree) {
        Ok(()) => {
            // Every operation takes fuel, so constant-sized work adds up to at most the largest
            // step times the fuel, however the loops nest.
            let constant = a.constant_time.min(MAX_ITERATIONS * a.largest_step);
            Ok(Cost::Bounded {
                memory: a.memory,
                time: a.time.plus(&Bound::constant(constant)),
            })
        }
        Err(Stop::Constant) => Err("a constant expression here builds about a megabyte of text or more while the template is compiled; build large text from arguments at run time instead".to_string()),
        Err(Stop::Unbounded(why)) => Ok(Cost::Unbounded(why)),
        Err(Stop::Refused(why)) => Err(why),
    }
}

enum Stop {
    Constant,
    Unbounded(String),
    /// A construct no template may use, whatever its cost.
    Refused(String),
}

/// What `debug()` (minijinja's dump of the whole context) is refused with.
const NO_DEBUG: &str = "`debug()` is not available in templates: it would print every value the template can see, the secrets of every tool included; name the values you need instead, e.g. `{{ args.city }}`";

fn unbounded<T>(why: impl Into<String>) -> Result<T, Stop> {
    Err(Stop::Unbounded(why.into()))
}

/// A value an expression can produce: its size bound, the bound of each item when iterated,
/// and whether minijinja folds it while compiling.
struct Ex {
    size: Bound,
    item: Option<Bound>,
    folded: bool,
}

impl Ex {
    fn new(size: Bound) -> Ex {
        Ex {
            size,
            item: None,
            folded: false,
        }
    }

    fn folded(size: Bound, folded: bool) -> Ex {
        Ex {
            size,
            item: None,
            folded,
        }
    }
}

#[derive(Default)]
struct Analysis<'s> {
    /// Values alive at once: what each step allocates, summed (temporaries included).
    memory: Bound,
    /// Bytes read and written that depend on the context, every iteration counted.
    time: Bound,
    /// Constant-sized work, each step counted as often as its loops can run it.
    constant_time: f64,
    largest_step: f64,
    /// How often the current point can run (enclosing loop counts, at most the fuel).
    runs: f64,
    scopes: Vec<HashMap<&'s str, Bound>>,
    /// Names assigned inside the bodies of the loops around the current point.
    loop_assigned: Vec<HashSet<&'s str>>,
    /// Variables read by the expression being analysed (for `set` inside loops).
    reads: Vec<&'s str>,
    /// Loops seen, to name each loop's item.
    loops: usize,
    folded_bytes: f64,
}

impl<'s> Analysis<'s> {
    /// A value built: memory and time.
    fn charge(&mut self, bytes: &Bound) {
        self.memory = self.memory.plus(bytes);
        self.charge_time(bytes);
    }

    /// Bytes read (compared, searched, sorted): time only. The constant part is counted
    /// apart: loops multiply the context-dependent part when they end (`for_loop`).
    fn charge_time(&mut self, bytes: &Bound) {
        self.constant_time += bytes.c * self.runs.max(1.0);
        self.largest_step = self.largest_step.max(bytes.c);
        let mut roots = bytes.clone();
        roots.c = 0.0;
        self.time = self.time.plus(&roots);
    }

    fn lookup(&self, name: &str) -> Bound {
        self.scopes
            .iter()
            .rev()
            .find_map(|s| s.get(name).cloned())
            .unwrap_or_else(|| Bound::root(name))
    }

    /// A name set in a branch may be unset at run time, where it reads the context instead.
    fn assign(&mut self, name: &'s str, size: Bound) {
        let size = size.max(&self.lookup(name));
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name, size);
        }
    }

    fn stmts(&mut self, body: &[Stmt<'s>]) -> Result<(), Stop> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, stmt: &Stmt<'s>) -> Result<(), Stop> {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitRaw(_) => Ok(()),
            Stmt::EmitExpr(e) => {
                // The formatter prints a non-string value by serialising it first. A lookup's
                // text is bounded by the context it reads, which is already in memory.
                let value = self.expr(&e.expr)?;
                if !is_lookup(&e.expr) {
                    self.memory = self.memory.plus(&value.size);
                }
                Ok(())
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr)?;
                self.stmts(&c.true_body)?;
                self.stmts(&c.false_body)
            }
            Stmt::ForLoop(l) => self.for_loop(l),
            Stmt::Set(s) => {
                self.reads.clear();
                let value = self.expr(&s.expr)?;
                self.check_not_carried()?;
                self.bind(&s.target, value.size)
            }
            Stmt::WithBlock(w) => {
                self.scopes.push(HashMap::new());
                for (target, value) in &w.assignments {
                    self.reads.clear();
                    let value = self.expr(value)?;
                    self.check_not_carried()?;
                    self.bind(target, value.size)?;
                }
                let body = self.stmts(&w.body);
                self.scopes.pop();
                body
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled)?;
                self.stmts(&a.body)
            }
            Stmt::Do(d) => self.call(&d.call).map(drop),
            // `{% set x %}...{% endset %}` and `{% filter %}` capture output in memory, past the
            // output writer's limit; macros, includes and loop controls are not enabled.
            _ => unbounded("captured output, or a statement the analysis does not model"),
        }
    }

    /// A `set` inside a loop must not read what the loop assigns: `{% set s = s ~ s %}` would
    /// double on every iteration.
    fn check_not_carried(&self) -> Result<(), Stop> {
        let carried = self
            .reads
            .iter()
            .any(|r| self.loop_assigned.iter().any(|set| set.contains(r)));
        if carried {
            return unbounded("a value carried from one loop iteration to the next");
        }
        Ok(())
    }

    fn bind(&mut self, target: &Expr<'s>, size: Bound) -> Result<(), Stop> {
        match target {
            Expr::Var(v) => {
                self.assign(v.id, size);
                Ok(())
            }
            Expr::Tuple(t) => t.items.iter().try_for_each(|i| self.bind(i, size.clone())),
            // `{% set ns.x = ... %}` mutates a namespace across scopes and iterations.
            _ => unbounded("an assignment to an attribute"),
        }
    }

    /// A loop's body is analysed with its item as a root of its own (`#loopN`). Allocations in
    /// the body are dropped at the end of each iteration (a value carried across iterations is
    /// refused by `check_not_carried`), so memory counts the body once, for the largest item;
    /// time counts its constant part per iteration and its per-item part once over all items,
    /// whose sizes add up to at most the iterable's.
    fn for_loop(&mut self, l: &ast::ForLoop<'s>) -> Result<(), Stop> {
        if l.recursive {
            return unbounded("a recursive loop");
        }
        let iter = self.expr(&l.iter)?;
        let item = iter.item.clone().unwrap_or_else(|| iter.size.clone());
        let count = range_count(&l.iter).unwrap_or(MAX_ITERATIONS);
        let runs = self.runs;
        self.runs = (runs.max(1.0) * count).min(MAX_ITERATIONS);
        self.charge_time(&Bound::constant(64.0));
        let var = format!("#loop{}", self.loops);
        self.loops += 1;
        let outer = (
            std::mem::take(&mut self.memory),
            std::mem::take(&mut self.time),
        );
        let mut assigned = HashSet::new();
        assigned_names(&l.body, &mut assigned);
        self.loop_assigned.push(assigned);
        self.scopes.push(HashMap::new());
        let result = (|| {
            self.bind(&l.target, Bound::root(&var))?;
            self.assign("loop", Bound::root(&var).plus(&Bound::constant(64.0)));
            if let Some(f) = &l.filter_expr {
                self.expr(f)?;
            }
            self.stmts(&l.body)
        })();
        self.scopes.pop();
        self.loop_assigned.pop();
        let body_memory = std::mem::replace(&mut self.memory, outer.0);
        let body_time = std::mem::replace(&mut self.time, outer.1);
        self.runs = runs;
        result?;
        self.memory = self.memory.plus(&body_memory.substitute(&var, &item));
        let (per_item, per_iteration) = body_time.split(&var);
        self.time = self
            .time
            .plus(&per_iteration.scaled(count))
            .plus(&iter.size.scaled(per_item));
        self.stmts(&l.else_body)
    }

    fn expr(&mut self, expr: &Expr<'s>) -> Result<Ex, Stop> {
        let ex = match expr {
            Expr::Var(v) => {
                self.reads.push(v.id);
                return Ok(Ex::new(self.lookup(v.id)));
            }
            Expr::Const(c) => return Ok(Ex::folded(Bound::constant(value_size(&c.value)), true)),
            Expr::GetAttr(g) => Ex::new(self.expr(&g.expr)?.size),
            Expr::GetItem(g) => {
                let value = self.expr(&g.expr)?;
                let index = self.expr(&g.subscript_expr)?;
                // Indexing a string walks its characters.
                self.charge_time(&value.size.plus(&index.size));
                Ex::new(value.size)
            }
            Expr::Slice(s) => {
                let value = self.expr(&s.expr)?;
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part)?;
                }
                self.charge(&value.size);
                Ex::new(value.size)
            }
            Expr::UnaryOp(u) => {
                let inner = self.expr(&u.expr)?;
                Ex::folded(Bound::constant(NUMBER_SIZE), inner.folded)
            }
            Expr::BinOp(b) => self.bin_op(b)?,
            Expr::Compare(c) => {
                let mut folded = self.expr_time(&c.expr)?;
                for op in &c.ops {
                    folded &= self.expr_time(&op.expr)?;
                }
                Ex::folded(Bound::constant(5.0), folded)
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr)?;
                let yes = self.expr(&i.true_expr)?;
                let no = match &i.false_expr {
                    Some(e) => self.expr(e)?.size,
                    None => Bound::constant(0.0),
                };
                Ex::new(yes.size.max(&no))
            }
            Expr::Filter(f) => self.filter(f)?,
            Expr::Test(t) => {
                let value = self.expr(&t.expr)?;
                let args = self.args(&t.args)?;
                // Tests compare or search: time, not allocation.
                self.charge_time(&args.iter().fold(value.size, |acc, a| acc.plus(a)));
                Ex::new(Bound::constant(5.0))
            }
            Expr::Call(c) => self.call(c)?,
            Expr::List(l) => self.items(&l.items)?,
            Expr::Tuple(t) => self.items(&t.items)?,
            Expr::Map(m) => {
                let mut size = Bound::constant(2.0);
                let mut folded = true;
                for (k, v) in m.keys.iter().zip(&m.values) {
                    for e in [k, v] {
                        let item = self.expr(e)?;
                        folded &= item.folded;
                        size = size
                            .plus(&item.size.scaled(6.0))
                            .plus(&Bound::constant(4.0));
                    }
                }
                self.built(size, folded)?
            }
        };
        Ok(ex)
    }

    /// An operand that is only compared: its evaluation's cost, and whether it folds.
    fn expr_time(&mut self, e: &Expr<'s>) -> Result<bool, Stop> {
        Ok(self.expr(e)?.folded)
    }

    /// A value the operation allocates: charged as work, or, when minijinja folds it while
    /// compiling, counted against the compile-time limit instead.
    fn built(&mut self, size: Bound, folded: bool) -> Result<Ex, Stop> {
        if folded {
            self.folded_bytes += size.c;
            if self.folded_bytes > MAX_CONSTANT_BYTES || !size.is_constant() {
                return Err(Stop::Constant);
            }
        } else {
            self.charge(&size);
        }
        Ok(Ex::folded(size, folded))
    }

    fn items(&mut self, items: &[Expr<'s>]) -> Result<Ex, Stop> {
        let mut size = Bound::constant(2.0);
        let mut folded = true;
        for item in items {
            let item = self.expr(item)?;
            folded &= item.folded;
            size = size
                .plus(&item.size.scaled(6.0))
                .plus(&Bound::constant(2.0));
        }
        self.built(size, folded)
    }

    fn bin_op(&mut self, b: &ast::BinOp<'s>) -> Result<Ex, Stop> {
        let left = self.expr(&b.left)?;
        let right = self.expr(&b.right)?;
        let folded = left.folded && right.folded;
        let (l, r) = (&left.size, &right.size);
        let size = match b.op {
            BinOpKind::Concat | BinOpKind::Add => l.plus(r).plus(&Bound::constant(NUMBER_SIZE)),
            BinOpKind::Mul => {
                // Repetition: `'ab' * 3`. Only a literal count is bounded; products of two
                // context values are not linear.
                let count = const_number(&b.left).or_else(|| const_number(&b.right));
                match count {
                    Some(n) => {
                        let other = if const_number(&b.left).is_some() {
                            r
                        } else {
                            l
                        };
                        other
                            .scaled(n.abs().max(1.0))
                            .plus(&Bound::constant(NUMBER_SIZE))
                    }
                    None => return unbounded("a repetition by a computed count"),
                }
            }
            BinOpKind::ScAnd | BinOpKind::ScOr => return Ok(Ex::new(l.max(r))),
            BinOpKind::Eq
            | BinOpKind::Ne
            | BinOpKind::Lt
            | BinOpKind::Lte
            | BinOpKind::Gt
            | BinOpKind::Gte => {
                // Comparison stops at the shorter side.
                self.charge_time(&l.min(r));
                return Ok(Ex::folded(Bound::constant(5.0), folded));
            }
            BinOpKind::In => {
                self.charge_time(&l.plus(r));
                return Ok(Ex::folded(Bound::constant(5.0), folded));
            }
            BinOpKind::Sub
            | BinOpKind::Div
            | BinOpKind::FloorDiv
            | BinOpKind::Rem
            | BinOpKind::Pow => Bound::constant(NUMBER_SIZE),
        };
        self.built(size, folded)
    }

    fn args(&mut self, args: &[CallArg<'s>]) -> Result<Vec<Bound>, Stop> {
        args.iter()
            .map(|a| match a {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) => Ok(self.expr(e)?.size),
                _ => unbounded("a splatted argument"),
            })
            .collect()
    }

    fn filter(&mut self, f: &ast::Filter<'s>) -> Result<Ex, Stop> {
        let Some(input) = &f.expr else {
            return unbounded("a filter block");
        };
        let s = self.expr(input)?.size;
        let has_kwargs = f.args.iter().any(|a| !matches!(a, CallArg::Pos(_)));
        let args = self.args(&f.args)?;
        let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
        let c = Bound::constant;
        // Output size of each filter modelled; any other filter renders in isolation.
        let size = match f.name {
            "safe" | "trim" | "first" | "last" | "reverse" | "unique" | "sort" | "min" | "max"
            | "dictsort" | "items" | "list" | "split" | "lines" => {
                // Lists of pieces: every piece quoted and escaped.
                s.scaled(7.0).plus(&c(8.0))
            }
            "default" | "d" => s.max(&arg(0)),
            "length" | "count" | "int" | "float" | "abs" | "round" | "bool" | "sum" => {
                c(NUMBER_SIZE)
            }
            // Case mapping can triple a character's bytes (`ΐ` → `Ϊ́`).
            "lower" | "upper" | "title" | "capitalize" => s.scaled(3.0).plus(&c(8.0)),
            "string" => s.plus(&c(8.0)),
            // `&` → `&amp;`, `<` → `\u003c`: six bytes for one.
            "escape" | "e" => s.scaled(6.0).plus(&c(8.0)),
            "tojson" if args.is_empty() => s.scaled(6.0).plus(&c(8.0)),
            "urlencode" => s.scaled(3.0).plus(&c(8.0)),
            "join" if !has_kwargs => {
                // One separator per item, and there are no more items than bytes.
                match s.times(&arg(0)) {
                    Some(seps) => s.plus(&seps).plus(&c(8.0)),
                    None => return unbounded("`join` with a computed separator"),
                }
            }
            // Replacing with nothing never grows the text.
            "replace" if f.args.get(1).is_some_and(is_empty_string) => s.clone(),
            "replace" if !has_kwargs => {
                // At most one replacement per byte (an empty pattern matches between bytes).
                match s.plus(&c(1.0)).times(&arg(1)) {
                    Some(inserted) => s.plus(&inserted).plus(&c(8.0)),
                    None => return unbounded("`replace` with a computed replacement"),
                }
            }
            other => return unbounded(format!("the `{other}` filter")),
        };
        // Reading the input (sorting it: n·log n, and log n < 64), and the value built.
        let reads = if matches!(f.name, "sort" | "unique" | "dictsort") {
            64.0
        } else {
            2.0
        };
        self.charge_time(&s.scaled(reads));
        self.charge(&size);
        Ok(Ex::new(size))
    }

    fn call(&mut self, c: &ast::Call<'s>) -> Result<Ex, Stop> {
        let name = match &c.expr {
            Expr::Var(v) if self.scopes.iter().all(|s| !s.contains_key(v.id)) => v.id,
            _ => return unbounded("a call of a computed function or method"),
        };
        if name == "debug" {
            return Err(Stop::Refused(NO_DEBUG.to_string()));
        }
        let args = self.args(&c.args)?;
        match name {
            // Lazy: the numbers exist one at a time unless a filter lists them.
            "range" => {
                let count = range_of_call(c).unwrap_or(MAX_RANGE);
                Ok(Ex {
                    size: Bound::constant(count * NUMBER_SIZE + 2.0),
                    item: Some(Bound::constant(NUMBER_SIZE)),
                    folded: false,
                })
            }
            "dict" | "namespace" => {
                let size = args.iter().fold(Bound::constant(2.0), |acc, a| {
                    acc.plus(&a.scaled(6.0)).plus(&Bound::constant(64.0))
                });
                self.charge(&size);
                Ok(Ex::new(size))
            }
            other => unbounded(format!("a call of `{other}`")),
        }
    }
}

fn is_empty_string(arg: &CallArg<'_>) -> bool {
    matches!(arg, CallArg::Pos(Expr::Const(c)) if c.value.as_str() == Some(""))
}

fn is_lookup(e: &Expr<'_>) -> bool {
    match e {
        Expr::Var(_) | Expr::Const(_) => true,
        Expr::GetAttr(g) => is_lookup(&g.expr),
        Expr::GetItem(g) => is_lookup(&g.expr) && is_lookup(&g.subscript_expr),
        _ => false,
    }
}

/// Display bytes of a context value (see the module comment).
pub(super) fn json_size(v: &serde_json::Value) -> f64 {
    use serde_json::Value;
    match v {
        Value::Null | Value::Bool(_) => 5.0,
        Value::Number(_) => NUMBER_SIZE,
        Value::String(s) => s.len() as f64 * 6.0 + 2.0,
        Value::Array(items) => items.iter().map(|i| json_size(i) + 2.0).sum::<f64>() + 2.0,
        Value::Object(map) => map.iter().map(|(k, v)| entry_size(k, v)).sum::<f64>() + 2.0,
    }
}

/// One `key: value` entry of an object, as `json_size` counts it.
pub(super) fn entry_size(key: &str, value: &serde_json::Value) -> f64 {
    key.len() as f64 * 6.0 + json_size(value) + 6.0
}

/// The number of iterations of `range(...)` with literal arguments.
fn range_count(iter: &Expr<'_>) -> Option<f64> {
    match iter {
        Expr::Call(c) => range_of_call(c),
        _ => None,
    }
}

fn range_of_call(c: &ast::Call<'_>) -> Option<f64> {
    let Expr::Var(v) = &c.expr else { return None };
    if v.id != "range" {
        return None;
    }
    let nums: Option<Vec<f64>> = c
        .args
        .iter()
        .map(|a| match a {
            CallArg::Pos(e) => const_number(e),
            _ => None,
        })
        .collect();
    let n = match nums?.as_slice() {
        [stop] => *stop,
        [start, stop] => stop - start,
        [start, stop, step] if *step != 0.0 => ((stop - start) / step).ceil(),
        _ => return None,
    };
    Some(n.clamp(0.0, MAX_RANGE))
}

fn const_number(e: &Expr<'_>) -> Option<f64> {
    match e {
        Expr::Const(c) => c.value.as_i64().map(|n| n as f64),
        _ => None,
    }
}

/// Display bytes of a literal.
fn value_size(v: &minijinja::Value) -> f64 {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::String => v.as_str().map_or(0, str::len) as f64 * 6.0 + 2.0,
        ValueKind::Seq => v.try_iter().map_or(2.0, |items| {
            items.fold(2.0, |acc, item| acc + value_size(&item) + 2.0)
        }),
        ValueKind::Map => v.try_iter().map_or(2.0, |keys| {
            keys.fold(2.0, |acc, key| {
                let value = v.get_item(&key).map_or(0.0, |x| value_size(&x));
                acc + value_size(&key) + value + 4.0
            })
        }),
        _ => NUMBER_SIZE,
    }
}

/// Names a loop body assigns, in it or in loops inside it.
fn assigned_names<'s>(body: &[Stmt<'s>], out: &mut HashSet<&'s str>) {
    fn targets<'s>(e: &Expr<'s>, out: &mut HashSet<&'s str>) {
        match e {
            Expr::Var(v) => {
                out.insert(v.id);
            }
            Expr::Tuple(t) => t.items.iter().for_each(|i| targets(i, out)),
            _ => {}
        }
    }
    for stmt in body {
        match stmt {
            Stmt::Set(s) => targets(&s.target, out),
            Stmt::ForLoop(l) => assigned_names(&l.body, out),
            Stmt::IfCond(c) => {
                assigned_names(&c.true_body, out);
                assigned_names(&c.false_body, out);
            }
            Stmt::WithBlock(w) => assigned_names(&w.body, out),
            Stmt::AutoEscape(a) => assigned_names(&a.body, out),
            _ => {}
        }
    }
}
