//! `calculator`: arithmetic by a hand-written recursive-descent parser.
//!
//! The expression is data, never code: there is no `eval`, no variables, and every input
//! is bounded in length and nesting so a hostile expression cannot exhaust the stack.

use super::{clean_number, closest, round_significant, Args, BuiltinContext, BuiltinError};
use serde_json::{json, Value};

const MAX_CHARS: usize = 10_000;
const MAX_DEPTH: usize = 200;

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "maxLength": MAX_CHARS,
                "description": "Arithmetic expression, e.g. `(178.15 - 150) * 100` or `round(sqrt(2) * 10, 2)`. \
                    Operators: + - * / and % (remainder, sign of the left operand), ^ or ** (power, \
                    right-associative, binds tighter than unary minus: -2^2 = -4), parentheses. \
                    Numbers: 12, 0.5, .5, 1.5e-3. Constants: pi, e, tau. Functions: sqrt, abs, \
                    round(x) or round(x, digits), floor, ceil, trunc, min(a, b, ...), max(a, b, ...), \
                    log(x) (base 10) or log(x, base), ln, log2, exp, sin, cos, tan, asin, acos, atan \
                    (angles in radians). No variables; write multiplication explicitly (2*pi, not 2pi). \
                    The result is a plain JSON number, rounded to 12 significant digits."
            }
        },
        "required": ["expression"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, _ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let expression = args.req_str("expression")?;
    let value = evaluate(expression)?;
    clean_number(value).ok_or_else(|| BuiltinError::execution("the result is not a finite number"))
}

/// Evaluates `input`; errors carry 1-based character columns.
pub(crate) fn evaluate(input: &str) -> Result<f64, BuiltinError> {
    let chars = input.chars().count();
    if chars > MAX_CHARS {
        return Err(BuiltinError::invalid(format!(
            "expression is too long ({chars} characters; the limit is {MAX_CHARS})"
        )));
    }
    let tokens = lex(input)?;
    if tokens.len() == 1 {
        return Err(BuiltinError::invalid("expression is empty"));
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    let next = parser.peek();
    if next.kind != Kind::End {
        let hint = match next.kind {
            Kind::Num(_) | Kind::Ident(_) | Kind::LParen => {
                " (missing an operator? write multiplication explicitly, e.g. `2*pi`)"
            }
            _ => "",
        };
        return Err(unexpected(next, hint));
    }
    Ok(value)
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Num(f64),
    Ident(String),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Pow,
    LParen,
    RParen,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    /// 1-based character column, which is what a person counts, not a byte offset.
    col: usize,
    text: String,
}

fn lex(input: &str) -> Result<Vec<Token>, BuiltinError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            if i < chars.len() && chars[i] == '.' {
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
            }
            // Only an exponent with digits belongs to the number; `2e` alone stays `2`, `e`.
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    while j < chars.len() && chars[j].is_ascii_digit() {
                        j += 1;
                    }
                    i = j;
                }
            }
            let text: String = chars[start..i].iter().collect();
            let value: f64 = text.parse().map_err(|_| {
                BuiltinError::invalid(format!("malformed number `{text}` at column {col}"))
            })?;
            if !value.is_finite() {
                return Err(BuiltinError::invalid(format!(
                    "number `{text}` at column {col} is too large"
                )));
            }
            tokens.push(Token {
                kind: Kind::Num(value),
                col,
                text,
            });
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            tokens.push(Token {
                kind: Kind::Ident(text.to_lowercase()),
                col,
                text,
            });
            continue;
        }
        let (kind, len) = match c {
            '+' => (Kind::Plus, 1),
            // U+2212 is what word processors and many models emit for minus.
            '-' | '\u{2212}' => (Kind::Minus, 1),
            '*' if chars.get(i + 1) == Some(&'*') => (Kind::Pow, 2),
            '*' | '×' => (Kind::Star, 1),
            '/' | '÷' => (Kind::Slash, 1),
            '%' => (Kind::Percent, 1),
            '^' => (Kind::Pow, 1),
            '(' => (Kind::LParen, 1),
            ')' => (Kind::RParen, 1),
            ',' => (Kind::Comma, 1),
            _ => {
                return Err(BuiltinError::invalid(format!(
                    "unexpected character `{c}` at column {col}"
                )))
            }
        };
        tokens.push(Token {
            kind,
            col,
            text: chars[i..i + len].iter().collect(),
        });
        i += len;
    }
    tokens.push(Token {
        kind: Kind::End,
        col: chars.len() + 1,
        text: String::new(),
    });
    Ok(tokens)
}

const CONSTANTS: &[(&str, f64)] = &[
    ("pi", std::f64::consts::PI),
    ("π", std::f64::consts::PI),
    ("e", std::f64::consts::E),
    ("tau", std::f64::consts::TAU),
];

/// (name, minimum arguments, maximum arguments; `None` = variadic)
const FUNCTIONS: &[(&str, usize, Option<usize>)] = &[
    ("abs", 1, Some(1)),
    ("acos", 1, Some(1)),
    ("asin", 1, Some(1)),
    ("atan", 1, Some(1)),
    ("ceil", 1, Some(1)),
    ("cos", 1, Some(1)),
    ("exp", 1, Some(1)),
    ("floor", 1, Some(1)),
    ("ln", 1, Some(1)),
    ("log", 1, Some(2)),
    ("log2", 1, Some(1)),
    ("log10", 1, Some(1)),
    ("max", 1, None),
    ("min", 1, None),
    ("round", 1, Some(2)),
    ("sin", 1, Some(1)),
    ("sqrt", 1, Some(1)),
    ("tan", 1, Some(1)),
    ("trunc", 1, Some(1)),
];

fn constant(name: &str) -> Option<f64> {
    CONSTANTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn function(name: &str) -> Option<(usize, Option<usize>)> {
    FUNCTIONS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, lo, hi)| (*lo, *hi))
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

fn unexpected(tok: &Token, hint: &str) -> BuiltinError {
    if tok.kind == Kind::End {
        BuiltinError::invalid(format!(
            "unexpected end of expression at column {}{hint}",
            tok.col
        ))
    } else {
        BuiltinError::invalid(format!(
            "unexpected `{}` at column {}{hint}",
            tok.text, tok.col
        ))
    }
}

/// Numbers inside messages use the same noise-free spelling as results.
fn show(x: f64) -> String {
    clean_number(x).map_or_else(|| x.to_string(), |v| v.to_string())
}

#[cold]
#[inline(never)]
fn not_finite(value: f64, what: &str, col: usize) -> BuiltinError {
    if value.is_nan() {
        BuiltinError::execution(format!("{what} at column {col} has no real-number result"))
    } else {
        BuiltinError::execution(format!(
            "{what} at column {col} overflows (the result is too large to represent)"
        ))
    }
}

impl Parser {
    fn peek(&self) -> &Token {
        // The lexer always ends with `End` and `advance` never moves past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    /// Consumes a token and returns its index. Indexes rather than clones keep the
    /// recursive frames small, which is what bounds stack use per nesting level.
    fn advance(&mut self) -> usize {
        let i = self.pos.min(self.tokens.len() - 1);
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        i
    }

    /// Every recursion goes through here so deep input fails cleanly instead of
    /// overflowing the stack.
    fn nested(
        &mut self,
        col: usize,
        f: fn(&mut Self) -> Result<f64, BuiltinError>,
    ) -> Result<f64, BuiltinError> {
        // The top-level expression is level 0, so exactly MAX_DEPTH nested groups still fit.
        if self.depth > MAX_DEPTH {
            return Err(too_deep(col));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn checked(&self, value: f64, op: usize) -> Result<f64, BuiltinError> {
        if value.is_finite() {
            Ok(value)
        } else {
            let tok = &self.tokens[op];
            Err(not_finite(value, &format!("`{}`", tok.text), tok.col))
        }
    }

    fn expr(&mut self) -> Result<f64, BuiltinError> {
        let col = self.peek().col;
        self.nested(col, Self::sum)
    }

    fn sum(&mut self) -> Result<f64, BuiltinError> {
        let mut value = self.term()?;
        loop {
            let add = match self.peek().kind {
                Kind::Plus => true,
                Kind::Minus => false,
                _ => return Ok(value),
            };
            let op = self.advance();
            let rhs = self.term()?;
            value = self.checked(if add { value + rhs } else { value - rhs }, op)?;
        }
    }

    fn term(&mut self) -> Result<f64, BuiltinError> {
        let mut value = self.unary()?;
        loop {
            let kind = match self.peek().kind {
                Kind::Star => Kind::Star,
                Kind::Slash => Kind::Slash,
                Kind::Percent => Kind::Percent,
                _ => return Ok(value),
            };
            let op = self.advance();
            let rhs = self.unary()?;
            if rhs == 0.0 && kind != Kind::Star {
                return Err(by_zero(kind == Kind::Slash, self.tokens[op].col));
            }
            value = match kind {
                Kind::Star => value * rhs,
                Kind::Slash => value / rhs,
                _ => value % rhs,
            };
            value = self.checked(value, op)?;
        }
    }

    fn unary(&mut self) -> Result<f64, BuiltinError> {
        let negate = match self.peek().kind {
            Kind::Minus => true,
            Kind::Plus => false,
            _ => return self.power(),
        };
        let op = self.advance();
        let col = self.tokens[op].col;
        let value = self.nested(col, Self::unary)?;
        Ok(if negate { -value } else { value })
    }

    fn power(&mut self) -> Result<f64, BuiltinError> {
        let base = self.primary()?;
        if self.peek().kind != Kind::Pow {
            return Ok(base);
        }
        let op = self.advance();
        let col = self.tokens[op].col;
        // Recursing into `unary` gives right associativity and allows `2^-1`.
        let exponent = self.nested(col, Self::unary)?;
        if base == 0.0 && exponent < 0.0 {
            return Err(BuiltinError::execution(format!(
                "zero raised to a negative power at column {col} (division by zero)"
            )));
        }
        self.checked(base.powf(exponent), op)
    }

    fn primary(&mut self) -> Result<f64, BuiltinError> {
        let i = self.advance();
        match self.tokens[i].kind {
            Kind::Num(v) => Ok(v),
            Kind::LParen => {
                let value = self.nested(self.tokens[i].col, Self::sum)?;
                self.expect_close(i)?;
                Ok(value)
            }
            Kind::Ident(_) if self.peek().kind == Kind::LParen => self.call(i),
            Kind::Ident(_) => name_value(&self.tokens[i]),
            _ => Err(unexpected(&self.tokens[i], "")),
        }
    }

    fn expect_close(&mut self, open: usize) -> Result<(), BuiltinError> {
        match self.peek().kind {
            Kind::RParen => {
                self.advance();
                Ok(())
            }
            Kind::End => Err(BuiltinError::invalid(format!(
                "missing `)` to close `(` at column {}",
                self.tokens[open].col
            ))),
            _ => Err(unexpected(self.peek(), "")),
        }
    }

    fn call(&mut self, name: usize) -> Result<f64, BuiltinError> {
        let arity = match &self.tokens[name].kind {
            Kind::Ident(n) => function(n),
            _ => None,
        };
        let Some(arity) = arity else {
            return Err(unknown_function(&self.tokens[name]));
        };
        let open = self.advance();
        // No `nested` here: each argument is an `expr`, which already counts one level.
        let mut args = Vec::new();
        if self.peek().kind != Kind::RParen {
            loop {
                args.push(self.expr()?);
                if self.peek().kind != Kind::Comma {
                    break;
                }
                self.advance();
            }
        }
        self.expect_close(open)?;
        apply(&self.tokens[name], arity, &args)
    }
}

// Error construction and function evaluation live outside the recursive methods: in debug
// builds every `format!` temporary would otherwise enlarge each recursion frame.

#[cold]
#[inline(never)]
fn too_deep(col: usize) -> BuiltinError {
    BuiltinError::invalid(format!(
        "expression nests deeper than {MAX_DEPTH} levels at column {col}"
    ))
}

#[cold]
#[inline(never)]
fn by_zero(division: bool, col: usize) -> BuiltinError {
    let what = if division { "division" } else { "modulo" };
    BuiltinError::execution(format!("{what} by zero at column {col}"))
}

#[inline(never)]
fn name_value(tok: &Token) -> Result<f64, BuiltinError> {
    let Kind::Ident(name) = &tok.kind else {
        return Err(unexpected(tok, ""));
    };
    if let Some(v) = constant(name) {
        return Ok(v);
    }
    if function(name).is_some() {
        return Err(BuiltinError::invalid(format!(
            "function `{}` at column {} needs its arguments in parentheses, e.g. `{name}(2)`",
            tok.text, tok.col
        )));
    }
    let names = CONSTANTS
        .iter()
        .map(|(n, _)| *n)
        .chain(FUNCTIONS.iter().map(|(n, _, _)| *n));
    let hint = match closest(name, names) {
        _ if name == "x" => " (write multiplication as `*`)".into(),
        Some(c) => format!("; did you mean `{c}`?"),
        None => " (variables are not supported; constants are pi, e, tau)".into(),
    };
    Err(BuiltinError::invalid(format!(
        "unknown name `{}` at column {}{hint}",
        tok.text, tok.col
    )))
}

#[cold]
#[inline(never)]
fn unknown_function(tok: &Token) -> BuiltinError {
    let (shown, col) = (&tok.text, tok.col);
    let name = shown.to_lowercase();
    if constant(&name).is_some() {
        return BuiltinError::invalid(format!(
            "`{shown}` at column {col} is a constant, not a function"
        ));
    }
    let hint = match closest(&name, FUNCTIONS.iter().map(|(n, _, _)| *n)) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => format!(
            "; available: {}",
            FUNCTIONS
                .iter()
                .map(|(n, _, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    BuiltinError::invalid(format!("unknown function `{shown}` at column {col}{hint}"))
}

#[inline(never)]
fn apply(
    tok: &Token,
    (min, max): (usize, Option<usize>),
    args: &[f64],
) -> Result<f64, BuiltinError> {
    let (shown, col) = (&tok.text, tok.col);
    let name = shown.to_lowercase();
    let n = args.len();
    if n < min || max.is_some_and(|m| n > m) {
        let expected = match (min, max) {
            (lo, Some(hi)) if lo == hi => format!("exactly {lo}"),
            (lo, Some(hi)) => format!("{lo} or {hi}"),
            (lo, None) => format!("at least {lo}"),
        };
        let noun = if expected == "exactly 1" {
            "argument"
        } else {
            "arguments"
        };
        return Err(BuiltinError::invalid(format!(
            "`{shown}` at column {col} takes {expected} {noun}, got {n}"
        )));
    }
    let x = args[0];
    let domain = |what: &str| Err(BuiltinError::execution(format!("{what} at column {col}")));
    let value = match name.as_str() {
        "abs" => x.abs(),
        "ceil" => x.ceil(),
        "floor" => x.floor(),
        "trunc" => x.trunc(),
        "exp" => x.exp(),
        "sin" => snap_trig(x, x.sin()),
        "cos" => snap_trig(1.0, x.cos()),
        "tan" => snap_trig(x, x.tan()),
        "atan" => x.atan(),
        "asin" | "acos" if !(-1.0..=1.0).contains(&x) => {
            return domain(&format!(
                "`{shown}` of {} is undefined (the domain is -1 to 1)",
                show(x)
            ))
        }
        "asin" => x.asin(),
        "acos" => x.acos(),
        "sqrt" if x < 0.0 => {
            return domain(&format!("square root of a negative number ({})", show(x)))
        }
        "sqrt" => x.sqrt(),
        "ln" | "log" | "log2" | "log10" if x <= 0.0 => {
            return domain(&format!("logarithm of a non-positive number ({})", show(x)))
        }
        "ln" => x.ln(),
        "log2" => x.log2(),
        "log10" => x.log10(),
        "log" => match args.get(1) {
            None => x.log10(),
            Some(&base) if base <= 0.0 || base == 1.0 => {
                return domain(&format!(
                    "logarithm base must be positive and not 1, got {}",
                    show(base)
                ))
            }
            Some(&base) => x.ln() / base.ln(),
        },
        "min" => args.iter().copied().fold(f64::INFINITY, f64::min),
        "max" => args.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "round" => match args.get(1) {
            None => x.round(),
            Some(&digits) => {
                if digits.fract() != 0.0 || !(-15.0..=15.0).contains(&digits) {
                    return domain(&format!(
                        "`{shown}` digits must be a whole number from -15 to 15, got {}",
                        show(digits)
                    ));
                }
                round_to(x, digits as i32)
            }
        },
        _ => unreachable_function(&name)?,
    };
    if value.is_finite() {
        Ok(value)
    } else {
        Err(not_finite(value, &format!("`{shown}`"), col))
    }
}

/// The function table and the `match` above are kept in step by a unit test; this is the
/// graceful answer should they ever drift, since builtins must not panic.
fn unreachable_function(name: &str) -> Result<f64, BuiltinError> {
    Err(BuiltinError::execution(format!(
        "function `{name}` is declared but not implemented"
    )))
}

/// `sin(pi)` is 1.2e-16 because `pi` itself is rounded; a person expects 0. A genuinely
/// tiny result only comes from a tiny argument, which is left alone.
fn snap_trig(arg: f64, result: f64) -> f64 {
    if result.abs() < 1e-15 && arg.abs() > 1e-9 {
        0.0
    } else {
        result
    }
}

/// Half away from zero at a decimal position. Scaling alone misrounds 1.005 (stored as
/// 1.00499999...), so the scaled value is first snapped to 15 significant digits.
fn round_to(x: f64, digits: i32) -> f64 {
    if digits >= 0 {
        let scale = 10f64.powi(digits);
        round_significant(x * scale, 15).round() / scale
    } else {
        let scale = 10f64.powi(-digits);
        round_significant(x / scale, 15).round() * scale
    }
}

#[cfg(test)]
// The expected outputs are deliberately the 12-digit roundings of pi, e and sqrt(2).
#[allow(clippy::approx_constant)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    fn ctx() -> BuiltinContext {
        BuiltinContext { now_unix_ms: 0 }
    }

    fn run(expr: &str) -> Result<Value, BuiltinError> {
        call_builtin("calculator", &json!({ "expression": expr }), &ctx())
    }

    fn ok(expr: &str) -> Value {
        run(expr).unwrap_or_else(|e| panic!("{expr}: {}", e.message))
    }

    fn err(expr: &str) -> BuiltinError {
        match run(expr) {
            Ok(v) => panic!("{expr} unexpectedly gave {v}"),
            Err(e) => e,
        }
    }

    fn invalid(expr: &str) -> String {
        let e = err(expr);
        assert_eq!(
            e.kind,
            BuiltinErrorKind::InvalidArguments,
            "{expr}: {}",
            e.message
        );
        e.message
    }

    fn exec(expr: &str) -> String {
        let e = err(expr);
        assert_eq!(
            e.kind,
            BuiltinErrorKind::ExecutionError,
            "{expr}: {}",
            e.message
        );
        e.message
    }

    #[test]
    fn float_noise_is_removed() {
        assert_eq!(ok("(178.15 - 150) * 100"), json!(2815));
        assert!(ok("(178.15 - 150) * 100").is_i64());
        assert_eq!(ok("0.1+0.2"), json!(0.3));
        assert_eq!(ok("1/3"), json!(0.333333333333));
        assert_eq!(ok("2/3"), json!(0.666666666667));
        assert_eq!(ok("1.1*1.1"), json!(1.21));
        assert_eq!(ok("3 * 1.1"), json!(3.3));
        assert_eq!(ok("0.3 - 0.1"), json!(0.2));
    }

    #[test]
    fn integers_and_large_numbers() {
        assert_eq!(ok("2^53 - 1"), json!(9007199254740991_i64));
        assert_eq!(ok("2^53"), json!(9.00719925474e15));
        assert_eq!(ok("1e20"), json!(1e20));
        assert_eq!(ok("-7"), json!(-7));
        assert_eq!(ok("1.5e3"), json!(1500));
        assert_eq!(ok("2.5E-1"), json!(0.25));
        assert_eq!(ok(".5 + 1."), json!(1.5));
        assert_eq!(ok("1e-20"), json!(1e-20));
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(ok("1 + 2 * 3"), json!(7));
        assert_eq!(ok("(1 + 2) * 3"), json!(9));
        assert_eq!(ok("10 - 4 - 3"), json!(3));
        assert_eq!(ok("100 / 10 / 5"), json!(2));
        assert_eq!(ok("2 ^ 3 ^ 2"), json!(512));
        assert_eq!(ok("2 ** 3 ** 2"), json!(512));
        assert_eq!(ok("(2 ^ 3) ^ 2"), json!(64));
        assert_eq!(ok("2 * 3 ^ 2"), json!(18));
        assert_eq!(ok("7 % 4 * 2"), json!(6));
        assert_eq!(ok("1 + 7 % 4"), json!(4));
        assert_eq!(ok("-7 % 3"), json!(-1));
        assert_eq!(ok("7.5 % 2"), json!(1.5));
    }

    #[test]
    fn unary_operators() {
        assert_eq!(ok("-2^2"), json!(-4));
        assert_eq!(ok("(-2)^2"), json!(4));
        assert_eq!(ok("2^-1"), json!(0.5));
        assert_eq!(ok("2^-2^2"), json!(0.0625));
        assert_eq!(ok("--3"), json!(3));
        assert_eq!(ok("+-+3"), json!(-3));
        assert_eq!(ok("3 - -3"), json!(6));
        assert_eq!(ok("-(2 + 3) * 2"), json!(-10));
        assert_eq!(ok("2 * -3"), json!(-6));
        assert_eq!(ok("-0"), json!(0));
    }

    #[test]
    fn unicode_operators() {
        assert_eq!(ok("6 × 7"), json!(42));
        assert_eq!(ok("84 ÷ 2"), json!(42));
        assert_eq!(ok("50 − 8"), json!(42));
        assert_eq!(ok("−2^2"), json!(-4));
        assert_eq!(ok("2 × π"), ok("2 * pi"));
    }

    #[test]
    fn constants_and_functions() {
        assert_eq!(ok("pi"), json!(3.14159265359));
        assert_eq!(ok("e"), json!(2.71828182846));
        assert_eq!(ok("PI * 2"), ok("tau"));
        assert_eq!(ok("sqrt(16)"), json!(4));
        assert_eq!(ok("sqrt(2)"), json!(1.41421356237));
        assert_eq!(ok("abs(-3.5)"), json!(3.5));
        assert_eq!(ok("floor(-2.5)"), json!(-3));
        assert_eq!(ok("ceil(2.1)"), json!(3));
        assert_eq!(ok("trunc(-2.7)"), json!(-2));
        assert_eq!(ok("min(3, 1, 2)"), json!(1));
        assert_eq!(ok("max(3, 1, 2, -8)"), json!(3));
        assert_eq!(ok("max(5)"), json!(5));
        assert_eq!(ok("log(1000)"), json!(3));
        assert_eq!(ok("log(8, 2)"), json!(3));
        assert_eq!(ok("log2(1024)"), json!(10));
        assert_eq!(ok("log10(0.001)"), json!(-3));
        assert_eq!(ok("ln(e^2)"), json!(2));
        assert_eq!(ok("exp(0)"), json!(1));
        assert_eq!(ok("sin(pi/2)"), json!(1));
        assert_eq!(ok("cos(pi)"), json!(-1));
        assert_eq!(ok("sin(pi)"), json!(0));
        assert_eq!(ok("cos(pi/2)"), json!(0));
        assert_eq!(ok("tan(-pi)"), json!(0));
        assert_eq!(ok("sin(1e-20)"), json!(1e-20));
        assert_eq!(ok("tan(pi/4)"), json!(1));
        assert_eq!(ok("asin(1) * 2"), ok("pi"));
        assert_eq!(ok("acos(1)"), json!(0));
        assert_eq!(ok("atan(1) * 4"), ok("pi"));
        assert_eq!(ok("Sqrt(SQRT(16))"), json!(2));
        assert_eq!(ok("max(1, min(2, 3)) + sqrt(abs(-9))"), json!(5));
    }

    #[test]
    fn rounding() {
        assert_eq!(ok("round(2.5)"), json!(3));
        assert_eq!(ok("round(-2.5)"), json!(-3));
        assert_eq!(ok("round(3.14159, 2)"), json!(3.14));
        assert_eq!(ok("round(1.005, 2)"), json!(1.01));
        assert_eq!(ok("round(2.675, 2)"), json!(2.68));
        assert_eq!(ok("round(1234.5, -2)"), json!(1200));
        assert_eq!(ok("round(1/3, 0)"), json!(0));
        assert!(exec("round(1, 2.5)").contains("whole number"));
        assert!(exec("round(1, 16)").contains("from -15 to 15"));
    }

    #[test]
    fn execution_errors_name_problem_and_column() {
        assert_eq!(exec("10 / (5 - 5)"), "division by zero at column 4");
        assert_eq!(exec("1 + 2 / 0"), "division by zero at column 7");
        assert_eq!(exec("5 % 0"), "modulo by zero at column 3");
        assert_eq!(
            exec("sqrt(-4)"),
            "square root of a negative number (-4) at column 1"
        );
        assert_eq!(
            exec("1 + sqrt(0 - 1)"),
            "square root of a negative number (-1) at column 5"
        );
        assert!(exec("ln(0)").contains("logarithm of a non-positive number (0) at column 1"));
        assert!(exec("log(-1)").contains("non-positive"));
        assert!(exec("log(8, 1)").contains("base"));
        assert!(exec("asin(2)").contains("domain"));
        assert_eq!(
            exec("10 ^ 400"),
            "`^` at column 4 overflows (the result is too large to represent)"
        );
        assert!(exec("exp(1000)").contains("`exp` at column 1 overflows"));
        assert!(exec("(-8) ^ (1/3)").contains("no real-number result"));
        assert!(exec("0 ^ -1").contains("zero raised to a negative power at column 3"));
        assert!(exec("1e308 * 10").contains("`*` at column 7 overflows"));
        assert!(exec("1e308 + 1e308").contains("`+` at column 7"));
        assert!(exec("-1e308 - 1e308").contains("`-` at column 8"));
    }

    #[test]
    fn parse_errors_name_token_and_column() {
        assert_eq!(invalid("(1 +)"), "unexpected `)` at column 5");
        assert_eq!(invalid("1 +"), "unexpected end of expression at column 4");
        assert_eq!(invalid("(1 + 2"), "missing `)` to close `(` at column 1");
        assert_eq!(invalid("1 + 2)"), "unexpected `)` at column 6");
        assert_eq!(invalid("1 $ 2"), "unexpected character `$` at column 3");
        assert_eq!(invalid(""), "expression is empty");
        assert_eq!(invalid("   "), "expression is empty");
        assert!(invalid("2 3").starts_with("unexpected `3` at column 3 (missing an operator?"));
        assert!(invalid("2pi").starts_with("unexpected `pi` at column 2"));
        assert!(invalid("2(3)").contains("missing an operator"));
        assert!(invalid("1.2.3").starts_with("unexpected `.3` at column 4"));
        assert_eq!(invalid("*3"), "unexpected `*` at column 1");
        assert_eq!(invalid("2 ** * 3"), "unexpected `*` at column 6");
        assert_eq!(invalid("1e400"), "number `1e400` at column 1 is too large");
        assert_eq!(invalid("max(1,)"), "unexpected `)` at column 7");
        assert_eq!(invalid("1, 2"), "unexpected `,` at column 2");
        // Column counts characters, not bytes.
        assert_eq!(invalid("π × )"), "unexpected `)` at column 5");
    }

    #[test]
    fn names_and_arity() {
        let m = invalid("sqr(4)");
        assert!(m.starts_with("unknown function `sqr` at column 1"), "{m}");
        assert!(m.ends_with("did you mean `sqrt`?"), "{m}");
        assert!(invalid("2 * sine(1)").contains("did you mean `sin`?"));
        assert!(invalid("banana(1)").contains("available: abs"));
        assert!(invalid("x + 1").starts_with("unknown name `x` at column 1"));
        assert!(invalid("1 + pie").contains("did you mean `pi`?"));
        assert!(invalid("pi(2)").contains("is a constant, not a function"));
        assert!(invalid("sqrt 4").contains("needs its arguments in parentheses"));
        assert_eq!(
            invalid("sqrt(1, 2)"),
            "`sqrt` at column 1 takes exactly 1 argument, got 2"
        );
        assert_eq!(
            invalid("max()"),
            "`max` at column 1 takes at least 1 arguments, got 0"
        );
        assert_eq!(
            invalid("round(1,2,3)"),
            "`round` at column 1 takes 1 or 2 arguments, got 3"
        );
    }

    #[test]
    fn arbitrary_input_never_panics() {
        // Deterministic xorshift so a failure is reproducible from the printed input.
        let alphabet: Vec<char> = "0123456789.eE+-*/%^(),  pisqrtmaxroundlog×÷−πx_$"
            .chars()
            .collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let expr: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let _ = evaluate(&expr);
        }
    }

    #[test]
    fn deepest_accepted_input_fits_a_small_stack() {
        // Tokio workers get 2 MiB; proving 1 MiB suffices leaves headroom in debug builds.
        let worst = [
            "(".repeat(200) + "1" + &")".repeat(200),
            "-".repeat(199) + "1",
            "1^".repeat(199) + "1",
            "abs(".repeat(200) + "1" + &")".repeat(200),
        ];
        let handle = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                worst
                    .iter()
                    .map(|e| evaluate(e).is_ok())
                    .collect::<Vec<_>>()
            })
            .expect("spawn");
        assert_eq!(handle.join().expect("no stack overflow"), [true; 4]);
    }

    #[test]
    fn x_as_times_gets_a_hint() {
        assert_eq!(invalid("2 x 3"), "unexpected `x` at column 3 (missing an operator? write multiplication explicitly, e.g. `2*pi`)");
        assert_eq!(
            invalid("x"),
            "unknown name `x` at column 1 (write multiplication as `*`)"
        );
    }

    #[test]
    fn every_declared_function_is_implemented() {
        for (name, min, _) in FUNCTIONS {
            let args = vec!["0.5"; *min].join(", ");
            let expr = format!("{name}({args})");
            let result = run(&expr);
            if let Err(e) = &result {
                assert!(
                    !e.message.contains("not implemented"),
                    "{expr}: {}",
                    e.message
                );
            }
        }
    }

    #[test]
    fn bounds_are_enforced_without_stack_overflow() {
        let long = "1+".repeat(5_000) + "1";
        assert!(invalid(&long).contains("too long"));
        let just_fits = "1+".repeat(4_999) + "1";
        assert_eq!(ok(&just_fits), json!(5_000));

        let limit = "(".repeat(200) + "1" + &")".repeat(200);
        assert_eq!(ok(&limit), json!(1));
        let over = "(".repeat(201) + "1" + &")".repeat(201);
        assert!(invalid(&over).contains("nests deeper than 200 levels at column 201"));
        let calls = "abs(".repeat(200) + "1" + &")".repeat(200);
        assert_eq!(ok(&calls), json!(1));
        let deep = "(".repeat(300) + "1" + &")".repeat(300);
        assert!(invalid(&deep).contains("nests deeper than 200 levels"));
        let ok_depth = "(".repeat(150) + "1" + &")".repeat(150);
        assert_eq!(ok(&ok_depth), json!(1));

        assert!(invalid(&"-".repeat(5_000)).contains("nests deeper"));
        let minus = "-".repeat(9_000) + "1";
        assert!(invalid(&minus).contains("nests deeper"));
        let tower = "2^".repeat(4_000) + "1";
        assert!(invalid(&tower).contains("nests deeper"));
        let calls = "sqrt(".repeat(1_000) + "1" + &")".repeat(1_000);
        assert!(invalid(&calls).contains("nests deeper"));
        let unclosed = "(".repeat(9_999);
        assert!(invalid(&unclosed).contains("nests deeper"));
    }
}
