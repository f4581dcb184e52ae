//! `datetime`: calendar arithmetic on the proleptic Gregorian calendar with fixed UTC
//! offsets. "Now" comes from [`BuiltinContext`], never the system clock, so recorded runs
//! replay identically. Named time zones (and their DST rules) are deliberately out of
//! scope: they would need a tz database whose version would leak into replays.

use super::{clean_number, Args, BuiltinContext, BuiltinError};
use regex::Regex;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::sync::LazyLock;

pub(super) const SUMMARY: &str =
    "Date and time utilities: current time, parsing, adding durations, formatting and differences (UTC or fixed offsets).";

const MS_PER_SEC: i64 = 1_000;
const MS_PER_MIN: i64 = 60 * MS_PER_SEC;
const MS_PER_HOUR: i64 = 60 * MS_PER_MIN;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;
/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: what four-digit RFC 3339 years allow.
const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;
const MAX_FORMAT_CHARS: usize = 500;

const OPERATIONS: &[&str] = &["now", "parse", "add", "format", "diff"];
const OPTIONAL: &[&str] = &["value", "other", "amount", "format", "timezone_offset"];

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "operation": {
                "type": "string",
                "enum": OPERATIONS,
                "description": "`now`: the current time. `parse`: read `value`. `add`: `value` plus `amount`. \
                    `format`: render `value` with `format`. `diff`: the time from `value` to `other`. \
                    now/parse/add/format return a moment object: {iso (RFC 3339), unix (seconds), \
                    unix_ms, date (YYYY-MM-DD), time (HH:MM:SS), weekday (e.g. Thursday), day_of_year, \
                    leap_year, offset (+HH:MM), formatted (only when `format` is given)}. \
                    diff returns {seconds, minutes, hours, days, weeks (from `value` to `other`, positive \
                    when `other` is later), human (the same span as an `amount` string, e.g. \"-1d 2h\"), \
                    from, to (RFC 3339)}."
            },
            "value": {
                "type": "string",
                "description": "The date/time to work on (default: now). ISO 8601 / RFC 3339: `2024-02-29`, \
                    `2024-02-29T12:00`, `2024-02-29T12:00:00Z`, `2024-02-29 12:00:00.250+02:00`; or `now`; \
                    or `@` followed by Unix seconds, e.g. `@1709208000`. A value without an offset is read \
                    in `timezone_offset` (default UTC)."
            },
            "other": {
                "type": "string",
                "description": "For `diff` (required there): the second date/time, same forms as `value`."
            },
            "amount": {
                "type": "string",
                "description": "For `add` (required there): a duration such as `3d`, `-2h30m`, `90s`, `1w`, \
                    `1.5h`, `2y 3mo`. Units: y (years), mo (months), w, d, h, m (minutes), s, ms. A leading \
                    `-` negates the whole amount. Years and months are calendar-aware (Jan 31 + 1mo = \
                    last day of February) and must be whole numbers."
            },
            "format": {
                "type": "string",
                "maxLength": MAX_FORMAT_CHARS,
                "description": "strftime-style pattern adding a `formatted` field (required for `format`). \
                    %Y year, %y 2-digit year, %m month, %d day, %e space-padded day, %H hour (24h), \
                    %I hour (12h), %p AM/PM, %M minute, %S second, %j day of year, %a Thu, %A Thursday, \
                    %b Feb, %B February, %u weekday 1-7 (Monday=1), %Z UTC or +HH:MM, %z +HHMM, \
                    %s Unix seconds, %F = %Y-%m-%d, %T = %H:%M:%S, %% a percent sign."
            },
            "timezone_offset": {
                "type": "string",
                "description": "Fixed UTC offset for output and for reading values without one, e.g. `+02:00`, \
                    `-05:30`, `+0530`, `Z` (default: UTC). Named zones such as Europe/Paris are not supported."
            }
        },
        "required": ["operation"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let operation = args.req_str("operation")?;
    let offset = match args.opt_str("timezone_offset")? {
        Some(text) => parse_offset(text).ok_or_else(|| {
            BuiltinError::invalid(format!(
                "`timezone_offset` `{text}` is not a UTC offset; use a form like `+02:00`, `-05:30` or `Z`"
            ))
        })?,
        None => 0,
    };
    let format = args.opt_str("format")?;
    if let Some(f) = format {
        if f.chars().count() > MAX_FORMAT_CHARS {
            return Err(BuiltinError::invalid(format!(
                "`format` is longer than {MAX_FORMAT_CHARS} characters"
            )));
        }
    }
    let value = |key: &str| -> Result<i64, BuiltinError> {
        match args.opt_str(key)? {
            Some(text) => parse_moment(text, offset, ctx, key),
            None => now(ctx),
        }
    };
    match operation {
        "now" => {
            args.only_for("now", &["format", "timezone_offset"], OPTIONAL)?;
            moment(now(ctx)?, offset, format)
        }
        "parse" => {
            args.only_for("parse", &["value", "format", "timezone_offset"], OPTIONAL)?;
            let text = args.req_str("value")?;
            moment(parse_moment(text, offset, ctx, "value")?, offset, format)
        }
        "format" => {
            args.only_for("format", &["value", "format", "timezone_offset"], OPTIONAL)?;
            let format = args.req_str("format")?;
            moment(value("value")?, offset, Some(format))
        }
        "add" => {
            args.only_for(
                "add",
                &["value", "amount", "format", "timezone_offset"],
                OPTIONAL,
            )?;
            let amount = parse_amount(args.req_str("amount")?)?;
            let start = value("value")?;
            moment(add(start, &amount, offset)?, offset, format)
        }
        "diff" => {
            args.only_for("diff", &["value", "other", "timezone_offset"], OPTIONAL)?;
            let from = value("value")?;
            let to_text = args.req_str("other")?;
            let to = parse_moment(to_text, offset, ctx, "other")?;
            diff(from, to, offset)
        }
        other => Err(BuiltinError::invalid(format!(
            "unknown operation `{other}`{}; use one of: {}",
            super::did_you_mean(other, OPERATIONS.iter().copied()),
            OPERATIONS.join(", ")
        ))),
    }
}

fn now(ctx: &BuiltinContext) -> Result<i64, BuiltinError> {
    if (MIN_MS..=MAX_MS).contains(&ctx.now_unix_ms) {
        Ok(ctx.now_unix_ms)
    } else {
        Err(BuiltinError::execution(
            "the current time supplied by the runtime is outside years 0000-9999",
        ))
    }
}

// ---- civil calendar -------------------------------------------------------------------

pub(crate) fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`): shifting the year to start
/// in March puts the leap day last, so every 400-year era has the same shape.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`].
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    milli: u32,
}

impl Civil {
    /// Local wall-clock time at `offset_min` east of UTC.
    fn at(unix_ms: i64, offset_min: i32) -> Civil {
        let local = unix_ms + i64::from(offset_min) * MS_PER_MIN;
        let (year, month, day) = civil_from_days(local.div_euclid(MS_PER_DAY));
        let rem = local.rem_euclid(MS_PER_DAY);
        Civil {
            year,
            month,
            day,
            hour: (rem / MS_PER_HOUR) as u32,
            minute: (rem % MS_PER_HOUR / MS_PER_MIN) as u32,
            second: (rem % MS_PER_MIN / MS_PER_SEC) as u32,
            milli: (rem % MS_PER_SEC) as u32,
        }
    }

    fn to_unix_ms(self, offset_min: i32) -> i64 {
        days_from_civil(self.year, self.month, self.day) * MS_PER_DAY
            + i64::from(self.hour) * MS_PER_HOUR
            + i64::from(self.minute) * MS_PER_MIN
            + i64::from(self.second) * MS_PER_SEC
            + i64::from(self.milli)
            - i64::from(offset_min) * MS_PER_MIN
    }

    fn days(self) -> i64 {
        days_from_civil(self.year, self.month, self.day)
    }

    /// 0 = Monday; 1970-01-01 was a Thursday.
    fn weekday(self) -> usize {
        (self.days() + 3).rem_euclid(7) as usize
    }

    fn day_of_year(self) -> i64 {
        self.days() - days_from_civil(self.year, 1, 1) + 1
    }
}

// ---- parsing --------------------------------------------------------------------------

/// Minutes east of UTC.
fn parse_offset(text: &str) -> Option<i32> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("utc") || t.eq_ignore_ascii_case("gmt")
    {
        return Some(0);
    }
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^([+-])([0-9]{2})(?::?([0-9]{2}))?$").expect("static regex"));
    let caps = RE.captures(t)?;
    let hours: i32 = caps[2].parse().ok()?;
    let minutes: i32 = caps.get(3).map_or(Some(0), |m| m.as_str().parse().ok())?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    let total = hours * 60 + minutes;
    Some(if &caps[1] == "-" { -total } else { total })
}

fn format_offset(offset_min: i32, colon: bool) -> String {
    let sign = if offset_min < 0 { '-' } else { '+' };
    let abs = offset_min.unsigned_abs();
    let sep = if colon { ":" } else { "" };
    format!("{sign}{:02}{sep}{:02}", abs / 60, abs % 60)
}

/// Reads a moment; values without their own offset are taken to be in `default_offset`.
fn parse_moment(
    text: &str,
    default_offset: i32,
    ctx: &BuiltinContext,
    key: &str,
) -> Result<i64, BuiltinError> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("now") {
        return now(ctx);
    }
    if let Some(secs) = t.strip_prefix('@') {
        return parse_unix_seconds(secs).ok_or_else(|| {
            BuiltinError::invalid(format!(
                "`{key}` `{text}`: after `@` expected Unix seconds within years 0000-9999, e.g. `@1709208000`"
            ))
        });
    }
    static RE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[Tt ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]{1,9}))?)?\s*([Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?)?$",
        )
        .expect("static regex")
    });
    let Some(caps) = RE.captures(t) else {
        return Err(BuiltinError::invalid(format!(
            "`{key}` `{text}` is not a recognised date/time; use ISO 8601 / RFC 3339 such as \
             `2024-02-29`, `2024-02-29T12:00:00Z` or `2024-02-29T14:00:00+02:00`, or `now`, or `@<unix seconds>`"
        )));
    };
    // The regex guarantees digit-only groups of bounded length, so these parses cannot fail.
    let num = |i: usize| -> u32 {
        caps.get(i)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0)
    };
    let year = i64::from(num(1));
    let (month, day, hour, minute, second) = (num(2), num(3), num(4), num(5), num(6));
    let bad = |what: String| BuiltinError::invalid(format!("`{key}` `{text}`: {what}"));
    if !(1..=12).contains(&month) {
        return Err(bad(format!("month {month:02} does not exist (use 01-12)")));
    }
    let dim = days_in_month(year, month);
    if day < 1 || day > dim {
        let why = if month == 2 && day == 29 {
            format!("{year:04} is not a leap year, so February has 28 days")
        } else {
            format!("{} {year:04} has {dim} days", MONTHS[month as usize - 1])
        };
        return Err(bad(format!(
            "{year:04}-{month:02}-{day:02} is not a valid date ({why})"
        )));
    }
    if hour > 23 {
        return Err(bad(format!("hour {hour:02} is out of range (00-23)")));
    }
    if minute > 59 {
        return Err(bad(format!("minute {minute:02} is out of range (00-59)")));
    }
    if second > 59 {
        return Err(bad(format!(
            "second {second:02} is out of range (00-59; leap seconds are not supported)"
        )));
    }
    let milli = caps.get(7).map_or(0, |m| {
        // Digits past milliseconds are truncated: the tool works at millisecond precision.
        let digits: String = m.as_str().chars().chain("00".chars()).take(3).collect();
        digits.parse().unwrap_or(0)
    });
    let offset = match caps.get(8) {
        Some(m) => parse_offset(m.as_str())
            .ok_or_else(|| bad(format!("offset `{}` is out of range", m.as_str())))?,
        None => default_offset,
    };
    let civil = Civil {
        year,
        month,
        day,
        hour,
        minute,
        second,
        milli,
    };
    let ms = civil.to_unix_ms(offset);
    if !(MIN_MS..=MAX_MS).contains(&ms) {
        return Err(bad(
            "the instant falls outside years 0000-9999 in UTC".into()
        ));
    }
    Ok(ms)
}

fn parse_unix_seconds(text: &str) -> Option<i64> {
    static RE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[+-]?[0-9]{1,15}(\.[0-9]{1,9})?$").expect("static regex"));
    if !RE.is_match(text.trim()) {
        return None;
    }
    let secs: f64 = text.trim().parse().ok()?;
    let ms = (secs * 1000.0).round();
    // 15 integer digits keep `ms` far inside i64 before this range check.
    (MIN_MS as f64..=MAX_MS as f64)
        .contains(&ms)
        .then_some(ms as i64)
}

/// A duration split the way people mean it: calendar months, then exact milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Amount {
    months: i64,
    ms: i64,
}

fn parse_amount(text: &str) -> Result<Amount, BuiltinError> {
    let bad = |why: &str| {
        BuiltinError::invalid(format!(
            "`amount` `{text}`: {why}; use forms like `3d`, `-2h30m`, `90s`, `1w`, `1y 2mo`"
        ))
    };
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad("it is empty"));
    }
    let (negative, body) = if let Some(rest) = trimmed.strip_prefix(['-', '\u{2212}']) {
        (true, rest)
    } else {
        (false, trimmed.strip_prefix('+').unwrap_or(trimmed))
    };
    let a = parse_amount_body(body, &bad)?;
    Ok(if negative {
        Amount {
            months: -a.months,
            ms: -a.ms,
        }
    } else {
        a
    })
}

fn parse_amount_body(
    text: &str,
    bad: &dyn Fn(&str) -> BuiltinError,
) -> Result<Amount, BuiltinError> {
    static PART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*([a-zA-Z]+)\s*,?").expect("static regex")
    });
    let mut rest = text;
    let mut total = Amount::default();
    let mut ms_f = 0.0_f64;
    if rest.trim().is_empty() {
        return Err(bad("it has no number and unit"));
    }
    while !rest.trim().is_empty() {
        let Some(caps) = PART.captures(rest) else {
            let shown = rest.trim();
            return Err(if shown.starts_with(['-', '+']) {
                bad("only a leading sign is allowed; it applies to the whole amount")
            } else {
                bad(&format!("cannot read `{shown}`"))
            });
        };
        let number_text = &caps[1];
        let number: f64 = number_text.parse().map_err(|_| bad("malformed number"))?;
        let unit = caps[2].to_ascii_lowercase();
        let calendar = |per: i64| -> Result<i64, BuiltinError> {
            if number.fract() != 0.0 {
                return Err(bad("years and months must be whole numbers"));
            }
            Ok(number as i64 * per)
        };
        match unit.as_str() {
            "y" | "yr" | "yrs" | "year" | "years" => total.months += calendar(12)?,
            "mo" | "mon" | "month" | "months" => total.months += calendar(1)?,
            _ => {
                let per = match unit.as_str() {
                    "w" | "wk" | "wks" | "week" | "weeks" => 7 * MS_PER_DAY,
                    "d" | "day" | "days" => MS_PER_DAY,
                    "h" | "hr" | "hrs" | "hour" | "hours" => MS_PER_HOUR,
                    "m" | "min" | "mins" | "minute" | "minutes" => MS_PER_MIN,
                    "s" | "sec" | "secs" | "second" | "seconds" => MS_PER_SEC,
                    "ms" | "msec" | "millisecond" | "milliseconds" => 1,
                    _ => {
                        return Err(bad(&format!(
                            "unknown unit `{}` (use y, mo, w, d, h, m, s or ms)",
                            &caps[2]
                        )))
                    }
                };
                ms_f += number * per as f64;
            }
        }
        // Beyond ten thousand years nothing can land inside the supported range anyway.
        if total.months.abs() > 12 * 10_000 || ms_f > (MAX_MS - MIN_MS) as f64 {
            return Err(BuiltinError::execution(format!(
                "`amount` `{text}` is larger than the supported range of years 0000-9999"
            )));
        }
        rest = &rest[caps[0].len()..];
    }
    total.ms = ms_f.round() as i64;
    Ok(total)
}

// ---- operations -----------------------------------------------------------------------

fn out_of_range() -> BuiltinError {
    BuiltinError::execution("the result falls outside the supported years 0000-9999")
}

fn add(start: i64, amount: &Amount, offset: i32) -> Result<i64, BuiltinError> {
    let mut ms = start;
    if amount.months != 0 {
        // Months move the local calendar date and clamp the day, so Jan 31 + 1mo is the
        // last day of February rather than spilling into March.
        let mut c = Civil::at(ms, offset);
        let index = c.year * 12 + i64::from(c.month) - 1 + amount.months;
        c.year = index.div_euclid(12);
        c.month = (index.rem_euclid(12) + 1) as u32;
        if !(0..=9999).contains(&c.year) {
            return Err(out_of_range());
        }
        c.day = c.day.min(days_in_month(c.year, c.month));
        ms = c.to_unix_ms(offset);
    }
    ms = ms.checked_add(amount.ms).ok_or_else(out_of_range)?;
    Ok(ms)
}

fn iso(ms: i64, offset: i32) -> String {
    let c = Civil::at(ms, offset);
    let mut s = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    );
    if c.milli != 0 {
        let _ = write!(s, ".{:03}", c.milli);
    }
    if offset == 0 {
        s.push('Z');
    } else {
        s.push_str(&format_offset(offset, true));
    }
    s
}

fn moment(ms: i64, offset: i32, format: Option<&str>) -> Result<Value, BuiltinError> {
    if !(MIN_MS..=MAX_MS).contains(&ms) {
        return Err(out_of_range());
    }
    let c = Civil::at(ms, offset);
    if !(0..=9999).contains(&c.year) {
        return Err(out_of_range());
    }
    let mut out = Map::new();
    out.insert("iso".into(), json!(iso(ms, offset)));
    out.insert("unix".into(), json!(ms.div_euclid(MS_PER_SEC)));
    out.insert("unix_ms".into(), json!(ms));
    out.insert(
        "date".into(),
        json!(format!("{:04}-{:02}-{:02}", c.year, c.month, c.day)),
    );
    out.insert(
        "time".into(),
        json!(format!("{:02}:{:02}:{:02}", c.hour, c.minute, c.second)),
    );
    out.insert("weekday".into(), json!(WEEKDAYS[c.weekday()]));
    out.insert("day_of_year".into(), json!(c.day_of_year()));
    out.insert("leap_year".into(), json!(is_leap(c.year)));
    out.insert("offset".into(), json!(format_offset(offset, true)));
    if let Some(f) = format {
        out.insert("formatted".into(), json!(strftime(ms, offset, f)?));
    }
    Ok(Value::Object(out))
}

fn strftime(ms: i64, offset: i32, pattern: &str) -> Result<String, BuiltinError> {
    let c = Civil::at(ms, offset);
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut chars = pattern.chars().enumerate();
    while let Some((pos, ch)) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let hour12 = match c.hour % 12 {
            0 => 12,
            h => h,
        };
        let _ = match chars.next() {
            Some((_, 'Y')) => write!(out, "{:04}", c.year),
            Some((_, 'y')) => write!(out, "{:02}", c.year % 100),
            Some((_, 'm')) => write!(out, "{:02}", c.month),
            Some((_, 'd')) => write!(out, "{:02}", c.day),
            Some((_, 'e')) => write!(out, "{:>2}", c.day),
            Some((_, 'H')) => write!(out, "{:02}", c.hour),
            Some((_, 'I')) => write!(out, "{hour12:02}"),
            Some((_, 'p')) => write!(out, "{}", if c.hour < 12 { "AM" } else { "PM" }),
            Some((_, 'M')) => write!(out, "{:02}", c.minute),
            Some((_, 'S')) => write!(out, "{:02}", c.second),
            Some((_, 'j')) => write!(out, "{:03}", c.day_of_year()),
            Some((_, 'a')) => write!(out, "{}", &WEEKDAYS[c.weekday()][..3]),
            Some((_, 'A')) => write!(out, "{}", WEEKDAYS[c.weekday()]),
            Some((_, 'u')) => write!(out, "{}", c.weekday() + 1),
            Some((_, 'b')) => write!(out, "{}", &MONTHS[c.month as usize - 1][..3]),
            Some((_, 'B')) => write!(out, "{}", MONTHS[c.month as usize - 1]),
            Some((_, 'Z')) if offset == 0 => write!(out, "UTC"),
            Some((_, 'Z')) => write!(out, "{}", format_offset(offset, true)),
            Some((_, 'z')) => write!(out, "{}", format_offset(offset, false)),
            Some((_, 's')) => write!(out, "{}", ms.div_euclid(MS_PER_SEC)),
            Some((_, 'F')) => write!(out, "{:04}-{:02}-{:02}", c.year, c.month, c.day),
            Some((_, 'T')) => write!(out, "{:02}:{:02}:{:02}", c.hour, c.minute, c.second),
            Some((_, '%')) => write!(out, "%"),
            Some((_, other)) => {
                return Err(BuiltinError::invalid(format!(
                    "`format` has unsupported directive `%{other}` at column {}; supported: \
                     %Y %y %m %d %e %H %I %p %M %S %j %a %A %u %b %B %Z %z %s %F %T %%",
                    pos + 1
                )))
            }
            None => {
                return Err(BuiltinError::invalid(
                    "`format` ends with a lone `%`; write `%%` for a percent sign",
                ))
            }
        };
    }
    Ok(out)
}

fn diff(from: i64, to: i64, offset: i32) -> Result<Value, BuiltinError> {
    // Both ends are range-checked, so the difference cannot overflow.
    let delta = to - from;
    let secs = delta as f64 / 1000.0;
    let num = |x: f64| clean_number(x).unwrap_or(Value::Null);
    Ok(json!({
        "seconds": num(secs),
        "minutes": num(secs / 60.0),
        "hours": num(secs / 3600.0),
        "days": num(secs / 86_400.0),
        "weeks": num(secs / 604_800.0),
        "human": human(delta),
        "from": iso(from, offset),
        "to": iso(to, offset),
    }))
}

/// Formats a span as an `amount` string, so a diff can be fed straight back into `add`.
fn human(delta_ms: i64) -> String {
    if delta_ms == 0 {
        return "0s".into();
    }
    let abs = delta_ms.unsigned_abs();
    let day = MS_PER_DAY as u64;
    let hour = MS_PER_HOUR as u64;
    let min = MS_PER_MIN as u64;
    let (d, h, m) = (abs / day, abs % day / hour, abs % hour / min);
    let ms = abs % min;
    let mut parts = Vec::new();
    if d > 0 {
        parts.push(format!("{d}d"));
    }
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if ms > 0 {
        if ms % 1000 == 0 {
            parts.push(format!("{}s", ms / 1000));
        } else {
            let s = format!("{}.{:03}", ms / 1000, ms % 1000);
            parts.push(format!("{}s", s.trim_end_matches('0')));
        }
    }
    let sign = if delta_ms < 0 { "-" } else { "" };
    format!("{sign}{}", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::super::{call as call_builtin, BuiltinErrorKind};
    use super::*;

    /// 2024-02-29T12:00:00Z, a Thursday.
    const NOW: i64 = 1_709_208_000_000;

    fn run(args: Value) -> Result<Value, BuiltinError> {
        call_builtin("datetime", &args, &BuiltinContext { now_unix_ms: NOW })
    }

    fn ok(args: Value) -> Value {
        run(args.clone()).unwrap_or_else(|e| panic!("{args}: {}", e.message))
    }

    fn err(args: Value) -> BuiltinError {
        match run(args.clone()) {
            Ok(v) => panic!("{args} unexpectedly gave {v}"),
            Err(e) => e,
        }
    }

    fn invalid(args: Value) -> String {
        let e = err(args);
        assert_eq!(e.kind, BuiltinErrorKind::InvalidArguments, "{}", e.message);
        e.message
    }

    fn parse_iso(value: &str) -> String {
        ok(json!({"operation": "parse", "value": value}))["iso"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn civil_conversion_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(0, 1, 1), -719_528);
        assert_eq!(civil_from_days(-719_528), (0, 1, 1));
        let max = days_from_civil(9999, 12, 31);
        assert_eq!(civil_from_days(max), (9999, 12, 31));
        assert_eq!(MIN_MS, days_from_civil(0, 1, 1) * MS_PER_DAY);
        assert_eq!(MAX_MS, (max + 1) * MS_PER_DAY - 1);
        let mut expected = days_from_civil(0, 1, 1);
        for year in 0..=9999 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    assert_eq!(days_from_civil(year, month, day), expected);
                    assert_eq!(civil_from_days(expected), (year, month, day));
                    expected += 1;
                }
            }
        }
    }

    #[test]
    fn leap_years() {
        assert!(is_leap(2024));
        assert!(is_leap(2000));
        assert!(is_leap(0));
        assert!(!is_leap(1900));
        assert!(!is_leap(2023));
        assert!(!is_leap(2100));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(
            ok(json!({"operation": "parse", "value": "2024-12-31"}))["day_of_year"],
            366
        );
        assert_eq!(
            ok(json!({"operation": "parse", "value": "2023-12-31"}))["leap_year"],
            false
        );
    }

    #[test]
    fn now_uses_the_context_clock() {
        let v = ok(json!({"operation": "now"}));
        assert_eq!(
            v,
            json!({
                "iso": "2024-02-29T12:00:00Z",
                "unix": 1_709_208_000,
                "unix_ms": NOW,
                "date": "2024-02-29",
                "time": "12:00:00",
                "weekday": "Thursday",
                "day_of_year": 60,
                "leap_year": true,
                "offset": "+00:00"
            })
        );
        let v = ok(json!({"operation": "now", "timezone_offset": "-05:00", "format": "%H:%M %Z"}));
        assert_eq!(v["iso"], "2024-02-29T07:00:00-05:00");
        assert_eq!(v["unix"], 1_709_208_000);
        assert_eq!(v["formatted"], "07:00 -05:00");
        let e = call_builtin(
            "datetime",
            &json!({"operation": "now"}),
            &BuiltinContext {
                now_unix_ms: i64::MAX,
            },
        )
        .unwrap_err();
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
    }

    #[test]
    fn parses_iso_forms() {
        assert_eq!(parse_iso("2024-02-29"), "2024-02-29T00:00:00Z");
        assert_eq!(parse_iso("2024-02-29T12:00:00Z"), "2024-02-29T12:00:00Z");
        assert_eq!(parse_iso("2024-02-29t12:00:00z"), "2024-02-29T12:00:00Z");
        assert_eq!(parse_iso("2024-02-29 12:00"), "2024-02-29T12:00:00Z");
        assert_eq!(
            parse_iso("2024-02-29T14:00:00+02:00"),
            "2024-02-29T12:00:00Z"
        );
        assert_eq!(
            parse_iso("2024-02-29T14:00:00+0200"),
            "2024-02-29T12:00:00Z"
        );
        assert_eq!(
            parse_iso("2024-02-29T07:30:00-04:30"),
            "2024-02-29T12:00:00Z"
        );
        assert_eq!(parse_iso("2024-03-01T01:00:00+02"), "2024-02-29T23:00:00Z");
        assert_eq!(
            parse_iso("2024-02-29T12:00:00.5Z"),
            "2024-02-29T12:00:00.500Z"
        );
        assert_eq!(
            parse_iso("2024-02-29T12:00:00.123456789Z"),
            "2024-02-29T12:00:00.123Z"
        );
        assert_eq!(
            parse_iso("2024-02-29T12:00:00,25Z"),
            "2024-02-29T12:00:00.250Z"
        );
        assert_eq!(parse_iso("  now "), "2024-02-29T12:00:00Z");
        assert_eq!(parse_iso("@1709208000"), "2024-02-29T12:00:00Z");
        assert_eq!(parse_iso("@-1.5"), "1969-12-31T23:59:58.500Z");
        assert_eq!(parse_iso("1969-12-31T23:59:59Z"), "1969-12-31T23:59:59Z");
        assert_eq!(parse_iso("0000-01-01"), "0000-01-01T00:00:00Z");
        assert_eq!(
            parse_iso("9999-12-31T23:59:59.999Z"),
            "9999-12-31T23:59:59.999Z"
        );
        let v = ok(json!({"operation": "parse", "value": "1969-12-31T23:59:59.500Z"}));
        assert_eq!(v["unix"], -1, "unix seconds floor toward the past");
        assert_eq!(v["unix_ms"], -500);
    }

    #[test]
    fn naive_values_use_the_requested_offset() {
        let v = ok(
            json!({"operation": "parse", "value": "2024-02-29T12:00", "timezone_offset": "+02:00"}),
        );
        assert_eq!(v["iso"], "2024-02-29T12:00:00+02:00");
        assert_eq!(v["unix"], 1_709_200_800);
        assert_eq!(v["offset"], "+02:00");
        // An explicit offset wins; output is converted to the requested one.
        let v = ok(
            json!({"operation": "parse", "value": "2024-02-29T12:00Z", "timezone_offset": "+05:30"}),
        );
        assert_eq!(v["iso"], "2024-02-29T17:30:00+05:30");
        let v = ok(
            json!({"operation": "parse", "value": "2024-02-29T23:30Z", "timezone_offset": "+01:00"}),
        );
        assert_eq!(v["date"], "2024-03-01");
        assert_eq!(v["weekday"], "Friday");
    }

    #[test]
    fn invalid_dates_are_rejected() {
        let m = invalid(json!({"operation": "parse", "value": "2023-02-29"}));
        assert!(
            m.contains("2023-02-29 is not a valid date (2023 is not a leap year"),
            "{m}"
        );
        let m = invalid(json!({"operation": "parse", "value": "1900-02-29"}));
        assert!(m.contains("not a leap year"), "{m}");
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-04-31"}))
                .contains("April 2024 has 30 days")
        );
        assert!(invalid(json!({"operation": "parse", "value": "2024-13-01"})).contains("month 13"));
        assert!(invalid(json!({"operation": "parse", "value": "2024-00-10"})).contains("month 00"));
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-01-00"}))
                .contains("not a valid date")
        );
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-01-01T24:00"})).contains("hour 24")
        );
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-01-01T23:60"}))
                .contains("minute 60")
        );
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-01-01T23:59:60Z"}))
                .contains("leap seconds")
        );
        assert!(
            invalid(json!({"operation": "parse", "value": "2024-01-01T10:00+24:00"}))
                .contains("offset")
        );
        assert!(invalid(json!({"operation": "parse", "value": "yesterday"}))
            .contains("not a recognised"));
        assert!(invalid(json!({"operation": "parse", "value": "2024-1-1"}))
            .contains("not a recognised"));
        assert!(invalid(json!({"operation": "parse", "value": "@abc"})).contains("Unix seconds"));
        assert!(
            invalid(json!({"operation": "parse", "value": "@99999999999999"}))
                .contains("Unix seconds")
        );
        assert!(
            invalid(json!({"operation": "parse", "value": "0000-01-01T00:00:00+01:00"}))
                .contains("outside")
        );
        assert!(
            invalid(json!({"operation": "parse"})).contains("missing required argument `value`")
        );
        assert!(
            invalid(json!({"operation": "now", "timezone_offset": "Europe/Paris"}))
                .contains("not a UTC offset")
        );
    }

    #[test]
    fn add_fixed_durations() {
        let add = |amount: &str| {
            ok(json!({"operation": "add", "value": "2024-02-29T12:00:00Z", "amount": amount}))
                ["iso"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(add("3d"), "2024-03-03T12:00:00Z");
        assert_eq!(add("-2h30m"), "2024-02-29T09:30:00Z");
        assert_eq!(add("90s"), "2024-02-29T12:01:30Z");
        assert_eq!(add("1w"), "2024-03-07T12:00:00Z");
        assert_eq!(add("1.5h"), "2024-02-29T13:30:00Z");
        assert_eq!(add("2 days 3 hours"), "2024-03-02T15:00:00Z");
        assert_eq!(add("+1d, 1h"), "2024-03-01T13:00:00Z");
        assert_eq!(add("250ms"), "2024-02-29T12:00:00.250Z");
        assert_eq!(add("- 1d"), "2024-02-28T12:00:00Z");
        assert_eq!(add("−12h"), "2024-02-29T00:00:00Z");
        assert_eq!(add("-1d 1s"), "2024-02-28T11:59:59Z");
        assert_eq!(add("0s"), "2024-02-29T12:00:00Z");
        // Without `value`, `add` starts from now.
        let v = ok(json!({"operation": "add", "amount": "1d"}));
        assert_eq!(v["iso"], "2024-03-01T12:00:00Z");
        assert_eq!(v["weekday"], "Friday");
    }

    #[test]
    fn add_calendar_units() {
        let add = |value: &str, amount: &str| {
            ok(json!({"operation": "add", "value": value, "amount": amount}))["iso"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(add("2024-01-31", "1mo"), "2024-02-29T00:00:00Z");
        assert_eq!(add("2023-01-31", "1mo"), "2023-02-28T00:00:00Z");
        assert_eq!(add("2024-02-29", "1y"), "2025-02-28T00:00:00Z");
        assert_eq!(add("2024-02-29", "4y"), "2028-02-29T00:00:00Z");
        assert_eq!(add("2024-03-31", "-1mo"), "2024-02-29T00:00:00Z");
        assert_eq!(add("2024-01-15", "-2mo"), "2023-11-15T00:00:00Z");
        assert_eq!(add("2024-12-15", "1 month"), "2025-01-15T00:00:00Z");
        assert_eq!(add("2024-01-31", "1mo 1d"), "2024-03-01T00:00:00Z");
        assert_eq!(add("2024-01-01", "1y 2mo 3d 4h"), "2025-03-04T04:00:00Z");
        // Calendar units work in the requested offset's local calendar.
        let v = ok(
            json!({"operation": "add", "value": "2024-01-31T23:30:00Z", "amount": "1mo", "timezone_offset": "+01:00"}),
        );
        assert_eq!(v["iso"], "2024-03-01T00:30:00+01:00");
        assert!(
            invalid(json!({"operation": "add", "value": "2024-01-01", "amount": "1.5mo"}))
                .contains("whole numbers")
        );
    }

    #[test]
    fn add_errors() {
        let m = invalid(json!({"operation": "add", "amount": "3 fortnights"}));
        assert!(m.contains("unknown unit `fortnights`"), "{m}");
        assert!(invalid(json!({"operation": "add", "amount": ""})).contains("empty"));
        assert!(invalid(json!({"operation": "add", "amount": "-"})).contains("no number"));
        assert!(invalid(json!({"operation": "add", "amount": "3"})).contains("cannot read `3`"));
        assert!(invalid(json!({"operation": "add", "amount": "1d-2h"})).contains("leading sign"));
        assert!(invalid(json!({"operation": "add", "value": "2024-01-01"})).contains("`amount`"));
        let e = err(json!({"operation": "add", "value": "9999-12-31", "amount": "1d"}));
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
        assert!(e.message.contains("0000-9999"));
        let e = err(json!({"operation": "add", "value": "0000-01-01", "amount": "-1mo"}));
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
        let e = err(json!({"operation": "add", "amount": "999999999999w"}));
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
        let e = err(json!({"operation": "add", "amount": "99999999999y"}));
        assert_eq!(e.kind, BuiltinErrorKind::ExecutionError);
    }

    #[test]
    fn formatting() {
        let f = |format: &str| {
            ok(json!({"operation": "format", "value": "2024-02-29T15:04:05Z", "format": format}))
                ["formatted"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(f("%Y-%m-%d %H:%M:%S"), "2024-02-29 15:04:05");
        assert_eq!(f("%a %A %b %B"), "Thu Thursday Feb February");
        assert_eq!(f("day %j of %Y, %Z"), "day 060 of 2024, UTC");
        assert_eq!(f("%I:%M %p"), "03:04 PM");
        assert_eq!(f("%y|%e|%u|%z|%s"), "24|29|4|+0000|1709219045");
        assert_eq!(f("%F %T"), "2024-02-29 15:04:05");
        assert_eq!(f("100%% done ✓"), "100% done ✓");
        assert_eq!(f(""), "");
        let v = ok(
            json!({"operation": "format", "value": "2024-01-05T00:30:00Z", "format": "%e %I %p %j", "timezone_offset": "-01:00"}),
        );
        assert_eq!(v["formatted"], " 4 11 PM 004");
        let m = invalid(json!({"operation": "format", "format": "%Y %Q"}));
        assert!(m.contains("unsupported directive `%Q` at column 4"), "{m}");
        assert!(invalid(json!({"operation": "format", "format": "50%"})).contains("lone `%`"));
        assert!(invalid(json!({"operation": "format"})).contains("`format`"));
        let long = "%Y".repeat(300);
        assert!(invalid(json!({"operation": "format", "format": long})).contains("longer than"));
    }

    #[test]
    fn diff_reports_signed_spans() {
        let v = ok(
            json!({"operation": "diff", "value": "2024-02-28", "other": "2024-03-01T06:30:00Z"}),
        );
        assert_eq!(v["seconds"], 196_200);
        assert!(v["seconds"].is_i64());
        assert_eq!(v["hours"], 54.5);
        assert_eq!(v["days"], 2.27083333333);
        assert_eq!(v["human"], "2d 6h 30m");
        assert_eq!(v["from"], "2024-02-28T00:00:00Z");
        let v = ok(
            json!({"operation": "diff", "value": "2024-03-01T06:30:00Z", "other": "2024-02-28"}),
        );
        assert_eq!(v["seconds"], -196_200);
        assert_eq!(v["human"], "-2d 6h 30m");
        let v = ok(json!({"operation": "diff", "value": "2023-03-01", "other": "2024-03-01"}));
        assert_eq!(v["days"], 366);
        let v = ok(json!({"operation": "diff", "other": "2024-12-25"}));
        assert_eq!(v["days"], 299.5);
        let v = ok(
            json!({"operation": "diff", "value": "2024-01-01T00:00:00+02:00", "other": "2024-01-01T00:00:00Z"}),
        );
        assert_eq!(v["seconds"], 7200);
        let v = ok(json!({"operation": "diff", "value": "now", "other": "now"}));
        assert_eq!(v["human"], "0s");
        let v = ok(json!({"operation": "diff", "value": "@0", "other": "@90.25"}));
        assert_eq!(v["seconds"], 90.25);
        assert_eq!(v["human"], "1m 30.25s");
        assert!(invalid(json!({"operation": "diff", "value": "2024-01-01"})).contains("`other`"));
    }

    #[test]
    fn human_round_trips_through_add() {
        for (a, b) in [
            ("2024-02-28", "2024-03-01T06:30:00.5Z"),
            ("2024-03-01T06:30:00Z", "2023-02-28T00:00:01Z"),
        ] {
            let d = ok(json!({"operation": "diff", "value": a, "other": b}));
            let back = ok(json!({"operation": "add", "value": a, "amount": d["human"]}));
            assert_eq!(back["iso"], parse_iso(b));
        }
    }

    #[test]
    fn operation_and_argument_checks() {
        let m = invalid(json!({"operation": "pars", "value": "2024-01-01"}));
        assert!(m.contains("did you mean `parse`?"), "{m}");
        let m = invalid(json!({"operation": "now", "amount": "1d"}));
        assert!(m.contains("`amount` is not used by operation `now`"), "{m}");
        assert!(
            invalid(json!({"operation": "diff", "other": "now", "format": "%Y"}))
                .contains("not used")
        );
        // Explicit nulls are treated as absent.
        assert_eq!(
            ok(json!({"operation": "now", "value": null}))["unix"],
            1_709_208_000
        );
    }

    #[test]
    fn arbitrary_input_never_panics() {
        let alphabet: Vec<char> = "0123456789-+:TZ .,@ymowdhsnx%YjaAbBpuz٣".chars().collect();
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut random = |max: u64| -> String {
            let len = (next() % max) as usize;
            (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect()
        };
        for _ in 0..5_000 {
            let (value, amount, format, offset) = (random(30), random(12), random(12), random(7));
            let _ = run(json!({"operation": "parse", "value": value, "timezone_offset": offset}));
            let _ = run(
                json!({"operation": "add", "value": "2024-01-31", "amount": amount, "format": format}),
            );
            let _ = run(json!({"operation": "diff", "value": "0000-01-01", "other": value}));
        }
        // Plausible-looking dates exercise the validation paths rather than the regex.
        for _ in 0..5_000 {
            let v = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}+{:02}:{:02}",
                next() % 10_000,
                next() % 14,
                next() % 33,
                next() % 26,
                next() % 62,
                next() % 62,
                next() % 26,
                next() % 62
            );
            let _ = run(
                json!({"operation": "add", "value": v, "amount": "-13mo 1d", "timezone_offset": "-23:59"}),
            );
        }
    }

    #[test]
    fn non_ascii_digits_are_not_dates() {
        assert!(
            invalid(json!({"operation": "parse", "value": "٢٠٢٤-01-01"}))
                .contains("not a recognised")
        );
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("+02:00"), Some(120));
        assert_eq!(parse_offset("-0530"), Some(-330));
        assert_eq!(parse_offset("+02"), Some(120));
        assert_eq!(parse_offset("Z"), Some(0));
        assert_eq!(parse_offset("UTC"), Some(0));
        assert_eq!(parse_offset("-00:00"), Some(0));
        assert_eq!(parse_offset("+23:59"), Some(1439));
        assert_eq!(parse_offset("+24:00"), None);
        assert_eq!(parse_offset("+02:60"), None);
        assert_eq!(parse_offset("2"), None);
        assert_eq!(format_offset(-330, true), "-05:30");
        assert_eq!(format_offset(0, false), "+0000");
    }
}
