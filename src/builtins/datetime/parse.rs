//! Reading what a model writes: moments (RFC 3339, civil forms, Unix seconds, offsets) and
//! amounts of time (`3d`, `-2h30m`, `1y 2mo`).

use super::{
    instant, now, Zone, MAX_MS, MIN_MS, MONTHS, MS_PER_DAY, MS_PER_HOUR, MS_PER_MIN, MS_PER_SEC,
};
use crate::builtins::{BuiltinContext, BuiltinError};
use jiff::civil::{Date, DateTime};
use regex::Regex;
use std::sync::LazyLock;

/// Minutes east of UTC.
pub(super) fn parse_offset(text: &str) -> Option<i32> {
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

/// Reads a moment; values without their own offset are local times in `zone`.
pub(super) fn parse_moment(
    text: &str,
    zone: &Zone,
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
    // The regex guarantees digit-only groups of at most four digits, so these parses cannot
    // fail and every value fits the narrow integers jiff takes.
    let num = |i: usize| -> i16 {
        caps.get(i)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0)
    };
    let bad = |what: String| BuiltinError::invalid(format!("`{key}` `{text}`: {what}"));
    let civil = civil_fields(
        [num(1), num(2), num(3), num(4), num(5), num(6)],
        caps.get(7).map(|m| m.as_str()),
        &bad,
    )?;
    let own;
    let zone = match caps.get(8) {
        Some(m) => {
            let minutes = parse_offset(m.as_str())
                .ok_or_else(|| bad(format!("offset `{}` is out of range", m.as_str())))?;
            own = Zone::Fixed(minutes * 60);
            &own
        }
        None => zone,
    };
    match instant(civil, zone) {
        Some(ms) if (MIN_MS..=MAX_MS).contains(&ms) => Ok(ms),
        _ => Err(bad(
            "the instant falls outside years 0000-9999 in UTC".into()
        )),
    }
}

/// Year, month, day, hour, minute, second and the fraction's digits as a civil date and time,
/// or a message that names the field that is wrong.
pub(super) fn civil_fields(
    [year, month, day, hour, minute, second]: [i16; 6],
    fraction: Option<&str>,
    bad: &dyn Fn(String) -> BuiltinError,
) -> Result<DateTime, BuiltinError> {
    if !(1..=12).contains(&month) {
        return Err(bad(format!("month {month:02} does not exist (use 01-12)")));
    }
    let first = Date::new(year, month as i8, 1)
        .map_err(|e| bad(format!("{year:04}-{month:02} is not a valid month: {e}")))?;
    let dim = i16::from(first.days_in_month());
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
    // Digits past milliseconds are truncated: the tool works at millisecond precision.
    let milli: i32 = fraction.map_or(0, |digits| {
        let padded: String = digits.chars().chain("00".chars()).take(3).collect();
        padded.parse().unwrap_or(0)
    });
    DateTime::new(
        year,
        month as i8,
        day as i8,
        hour as i8,
        minute as i8,
        second as i8,
        milli * 1_000_000,
    )
    .map_err(|e| bad(e.to_string()))
}

pub(super) fn parse_unix_seconds(text: &str) -> Option<i64> {
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

/// A duration split the way people mean it: calendar months and days, then exact milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Amount {
    pub(super) months: i64,
    pub(super) days: i64,
    pub(super) ms: i64,
}

pub(super) fn parse_amount(text: &str) -> Result<Amount, BuiltinError> {
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
            days: -a.days,
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
    let mut months = 0_i64;
    let mut days = 0.0_f64;
    let mut ms = 0.0_f64;
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
        let number: f64 = caps[1].parse().map_err(|_| bad("malformed number"))?;
        let calendar = |per: i64| -> Result<i64, BuiltinError> {
            if number.fract() != 0.0 {
                return Err(bad("years and months must be whole numbers"));
            }
            Ok(number as i64 * per)
        };
        match caps[2].to_ascii_lowercase().as_str() {
            "y" | "yr" | "yrs" | "year" | "years" => months += calendar(12)?,
            "mo" | "mon" | "month" | "months" => months += calendar(1)?,
            "w" | "wk" | "wks" | "week" | "weeks" => days += number * 7.0,
            "d" | "day" | "days" => days += number,
            unit => {
                let per = match unit {
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
                ms += number * per as f64;
            }
        }
        // Beyond ten thousand years nothing can land inside the supported range anyway.
        if months.abs() > 12 * 10_000 || days * MS_PER_DAY as f64 + ms > (MAX_MS - MIN_MS) as f64 {
            return Err(BuiltinError::execution(format!(
                "`amount` `{text}` is larger than the supported range of years 0000-9999"
            )));
        }
        rest = &rest[caps[0].len()..];
    }
    // Whole days move the calendar; a fraction of a day has no calendar meaning, so such a
    // total counts as exact 24-hour days.
    let (days, ms) = if days.fract() == 0.0 {
        (days as i64, ms)
    } else {
        (0, ms + days * MS_PER_DAY as f64)
    };
    Ok(Amount {
        months,
        days,
        ms: ms.round() as i64,
    })
}
