//! `datetime`: dates and times in UTC, a fixed UTC offset or an IANA time zone with its
//! daylight-saving rules, on jiff's calendar. "Now" comes from [`BuiltinContext`], never the
//! system clock, and zone rules come from the tz database compiled into toolrun (jiff's bundle,
//! its version pinned by Cargo.lock), never the host's: a recorded run replays identically on
//! every machine. The work here is reading the forms a model writes and explaining mistakes.

mod parse;

use super::{clean_number, Args, BuiltinContext, BuiltinError};
use jiff::civil::DateTime;
use jiff::fmt::strtime;
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::{SignedDuration, Span, Timestamp, Unit};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::sync::LazyLock;

use parse::{parse_amount, parse_moment, parse_offset, Amount};

const MS_PER_SEC: i64 = 1_000;
const MS_PER_MIN: i64 = 60 * MS_PER_SEC;
const MS_PER_HOUR: i64 = 60 * MS_PER_MIN;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;
/// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: what four-digit RFC 3339 years allow.
const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;
const MAX_FORMAT_CHARS: usize = 500;

const OPERATIONS: &[&str] = &["now", "parse", "add", "format", "diff"];
const OPTIONAL: &[&str] = &[
    "value",
    "other",
    "amount",
    "format",
    "timezone",
    "timezone_offset",
];
/// The `format` directives this tool documents; jiff knows more, but the schema promises these.
const DIRECTIVES: &str = "YymdeHIpMSjaAubBZzsFT%";

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
                    leap_year, offset (+HH:MM), formatted (only when `format` is given); with `timezone` \
                    also timezone (its name), abbreviation (e.g. CEST) and dst (daylight saving time in \
                    effect)}. diff returns {seconds, minutes, hours, days, weeks (from `value` to `other`, \
                    positive when `other` is later), human (the same span as an `amount` string, e.g. \
                    \"-1d 2h\"), from, to (RFC 3339)}."
            },
            "value": {
                "type": "string",
                "description": "The date/time to work on (default: now). ISO 8601 / RFC 3339: `2024-02-29`, \
                    `2024-02-29T12:00`, `2024-02-29T12:00:00Z`, `2024-02-29 12:00:00.250+02:00`; or `now`; \
                    or `@` followed by Unix seconds, e.g. `@1709208000`. A value without an offset is read \
                    in `timezone` or `timezone_offset` (default UTC); a local time that a daylight-saving \
                    change skips (02:30 on the night clocks go forward) is read as the time after the gap \
                    (03:30), and one it repeats as its first occurrence."
            },
            "other": {
                "type": "string",
                "description": "For `diff` (required there): the second date/time, same forms as `value`."
            },
            "amount": {
                "type": "string",
                "description": "For `add` (required there): a duration such as `3d`, `-2h30m`, `90s`, `1w`, \
                    `1.5h`, `2y 3mo`. Units: y (years), mo (months), w, d, h, m (minutes), s, ms. A leading \
                    `-` negates the whole amount. Years, months and whole days and weeks are calendar-aware \
                    (Jan 31 + 1mo = last day of February; in a `timezone`, 1d across a daylight-saving \
                    change keeps the wall-clock time, so it can be 23 or 25 hours); h, m, s, ms and \
                    fractional days are exact. Years and months must be whole numbers."
            },
            "format": {
                "type": "string",
                "maxLength": MAX_FORMAT_CHARS,
                "description": "strftime-style pattern adding a `formatted` field (required for `format`). \
                    %Y year, %y 2-digit year, %m month, %d day, %e space-padded day, %H hour (24h), \
                    %I hour (12h), %p AM/PM, %M minute, %S second, %j day of year, %a Thu, %A Thursday, \
                    %b Feb, %B February, %u weekday 1-7 (Monday=1), %Z UTC, +HH:MM or the zone's \
                    abbreviation (CEST), %z +HHMM, %s Unix seconds, %F = %Y-%m-%d, %T = %H:%M:%S, \
                    %% a percent sign."
            },
            "timezone": {
                "type": "string",
                "description": "An IANA time zone, e.g. `Europe/Paris`, `America/New_York`, `Asia/Kolkata`, \
                    `UTC`: results are shown in it and values without an offset are read in it, with its \
                    daylight-saving rules. Not together with `timezone_offset`."
            },
            "timezone_offset": {
                "type": "string",
                "description": "Fixed UTC offset for output and for reading values without one, e.g. `+02:00`, \
                    `-05:30`, `+0530`, `Z` (default: UTC). For a place with daylight saving time use \
                    `timezone` instead."
            }
        },
        "required": ["operation"],
        "additionalProperties": false
    })
}

pub(super) fn call(args: &Args<'_>, ctx: &BuiltinContext) -> Result<Value, BuiltinError> {
    let operation = args.req_str("operation")?;
    let zone = zone(args)?;
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
            Some(text) => parse_moment(text, &zone, ctx, key),
            None => now(ctx),
        }
    };
    let allowed = |own: &[&'static str]| -> Vec<&'static str> {
        own.iter()
            .copied()
            .chain(["timezone", "timezone_offset"])
            .collect()
    };
    match operation {
        "now" => {
            args.only_for("now", &allowed(&["format"]), OPTIONAL)?;
            moment(now(ctx)?, &zone, format)
        }
        "parse" => {
            args.only_for("parse", &allowed(&["value", "format"]), OPTIONAL)?;
            let text = args.req_str("value")?;
            moment(parse_moment(text, &zone, ctx, "value")?, &zone, format)
        }
        "format" => {
            args.only_for("format", &allowed(&["value", "format"]), OPTIONAL)?;
            let format = args.req_str("format")?;
            moment(value("value")?, &zone, Some(format))
        }
        "add" => {
            args.only_for("add", &allowed(&["value", "amount", "format"]), OPTIONAL)?;
            let amount = parse_amount(args.req_str("amount")?)?;
            let start = value("value")?;
            moment(add(start, &amount, &zone)?, &zone, format)
        }
        "diff" => {
            args.only_for("diff", &allowed(&["value", "other"]), OPTIONAL)?;
            let from = value("value")?;
            let to_text = args.req_str("other")?;
            let to = parse_moment(to_text, &zone, ctx, "other")?;
            diff(from, to, &zone)
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

/// `--now` / `TOOLRUN_NOW` (RFC 3339) fix the built-ins' clock; otherwise the system clock.
pub(crate) fn now_unix_ms(fixed: Option<&str>) -> Result<i64, String> {
    now_unix_ms_given(fixed_clock(fixed).as_deref())
}

/// The text that fixes the clock: `--now`, else a non-empty `TOOLRUN_NOW`, else none. Read once
/// by whoever reads the clock often (a server, every call): the environment lookup costs more
/// than the clock.
pub(crate) fn fixed_clock(now: Option<&str>) -> Option<String> {
    now.map(str::to_string)
        .or_else(|| std::env::var("TOOLRUN_NOW").ok().filter(|s| !s.is_empty()))
}

/// The clock `fixed` (from [`fixed_clock`]) gives now; the system clock without it.
pub(crate) fn now_unix_ms_given(fixed: Option<&str>) -> Result<i64, String> {
    let system = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    match fixed {
        None => Ok(system),
        Some(t) => parse_clock(t, system),
    }
}

/// `--now`, `TOOLRUN_NOW` and a test's `now:`: the forms `value` takes, read in UTC, with `now`
/// meaning `system_now_ms`.
pub(crate) fn parse_clock(text: &str, system_now_ms: i64) -> Result<i64, String> {
    let ctx = BuiltinContext {
        now_unix_ms: system_now_ms,
    };
    parse_moment(text, &Zone::UTC, &ctx, "value")
        .map_err(|e| format!("invalid time `{text}`: {}", e.message))
}

/// `2026-11-23T09:30:00Z` (milliseconds when there are any): the instant as RFC 3339 in UTC.
pub(crate) fn rfc3339_utc(unix_ms: i64) -> Option<String> {
    Some(iso(&at(unix_ms, &Zone::UTC).ok()?))
}

// ---- zones ----------------------------------------------------------------------------

/// Where results are shown and values without an offset are read.
enum Zone {
    /// Seconds east of UTC.
    Fixed(i32),
    /// An IANA zone, with the name the database spells it with.
    Named { tz: TimeZone, name: String },
}

impl Zone {
    const UTC: Zone = Zone::Fixed(0);
}

fn zone(args: &Args<'_>) -> Result<Zone, BuiltinError> {
    match (args.opt_str("timezone")?, args.opt_str("timezone_offset")?) {
        (Some(_), Some(_)) => Err(BuiltinError::invalid(
            "give either `timezone` (a named zone such as `Europe/Paris`) or `timezone_offset` \
             (a fixed offset such as `+02:00`), not both",
        )),
        (Some(name), None) => named_zone(name),
        (None, Some(text)) => {
            let minutes = parse_offset(text).ok_or_else(|| {
                BuiltinError::invalid(format!(
                    "`timezone_offset` `{text}` is not a UTC offset; use a form like `+02:00`, `-05:30` \
                     or `Z` (for a named zone such as `Europe/Paris`, use `timezone`)"
                ))
            })?;
            Ok(Zone::Fixed(minutes * 60))
        }
        (None, None) => Ok(Zone::UTC),
    }
}

/// The zone database compiled into toolrun, not the host's `/usr/share/zoneinfo` (nor `TZDIR`):
/// hosts carry different tzdata versions, or none, and a fixture recorded on one machine must
/// replay the same on another.
fn tzdb() -> &'static TimeZoneDatabase {
    static DB: LazyLock<TimeZoneDatabase> = LazyLock::new(TimeZoneDatabase::bundled);
    &DB
}

fn named_zone(name: &str) -> Result<Zone, BuiltinError> {
    let wanted = name.trim();
    if let Ok(tz) = tzdb().get(wanted) {
        let name = tz.iana_name().unwrap_or(wanted).to_string();
        return Ok(Zone::Named { tz, name });
    }
    let names: Vec<String> = tzdb().available().map(|n| n.as_str().to_string()).collect();
    // A city alone ("Paris", "new york") is the zone named after it; otherwise the closest name.
    let city = wanted.to_ascii_lowercase().replace(' ', "_");
    let by_city = names.iter().find(|n| {
        n.rsplit('/')
            .next()
            .is_some_and(|last| last.eq_ignore_ascii_case(&city))
    });
    let hint = match by_city {
        Some(n) => format!("; did you mean `{n}`?"),
        None => super::did_you_mean(wanted, names.iter().map(String::as_str)),
    };
    Err(BuiltinError::invalid(format!(
        "`timezone` `{name}` is not a time zone of the IANA database{hint} Use a name such as \
         `Europe/Paris`, `America/New_York` or `UTC`, or `timezone_offset` for a fixed offset"
    )))
}

/// An instant as `zone` shows it.
struct Local {
    unix_ms: i64,
    civil: DateTime,
    /// Seconds east of UTC.
    offset: i32,
}

/// Civil arithmetic from the epoch rather than jiff's `Timestamp`, whose range ends on
/// 9999-12-30 (so that every offset's local time stays within year 9999): UTC and fixed offsets
/// keep the whole of year 9999, as RFC 3339 allows.
const EPOCH: DateTime = DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

fn timestamp(unix_ms: i64) -> Result<Timestamp, BuiltinError> {
    Timestamp::from_millisecond(unix_ms).map_err(|_| out_of_range())
}

fn at(unix_ms: i64, zone: &Zone) -> Result<Local, BuiltinError> {
    let offset = match zone {
        Zone::Fixed(seconds) => *seconds,
        Zone::Named { tz, .. } => tz.to_offset(timestamp(unix_ms)?).seconds(),
    };
    let local_ms = unix_ms + i64::from(offset) * MS_PER_SEC;
    let civil = EPOCH
        .checked_add(SignedDuration::from_millis(local_ms))
        .map_err(|_| out_of_range())?;
    Ok(Local {
        unix_ms,
        civil,
        offset,
    })
}

/// The instant a local date and time in `zone` names. In a daylight-saving gap or fold it
/// resolves as RFC 5545 and Temporal do ("compatible"): after the gap, the first of the two.
fn instant(civil: DateTime, zone: &Zone) -> Option<i64> {
    match zone {
        Zone::Fixed(seconds) => {
            let local = EPOCH.duration_until(civil).as_millis();
            i64::try_from(local - i128::from(*seconds) * i128::from(MS_PER_SEC)).ok()
        }
        Zone::Named { tz, .. } => Some(
            tz.to_zoned_datetime(civil)
                .ok()?
                .timestamp()
                .as_millisecond(),
        ),
    }
}

/// `+HH:MM`, with the seconds some historical offsets have (Paris kept +00:09:21 until 1911).
fn format_offset_seconds(seconds: i32, colon: bool) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let abs = seconds.unsigned_abs();
    let sep = if colon { ":" } else { "" };
    let mut s = format!("{sign}{:02}{sep}{:02}", abs / 3600, abs % 3600 / 60);
    if abs % 60 != 0 {
        let _ = write!(s, "{sep}{:02}", abs % 60);
    }
    s
}

// ---- operations -----------------------------------------------------------------------

fn out_of_range() -> BuiltinError {
    BuiltinError::execution("the result falls outside the supported years 0000-9999")
}

fn add(start: i64, amount: &Amount, zone: &Zone) -> Result<i64, BuiltinError> {
    // Months and days move the local calendar (Jan 31 + 1mo clamps to the end of February; a
    // day keeps the wall-clock time across a DST change), then the exact part is added.
    let calendar = Span::new()
        .try_months(amount.months)
        .and_then(|s| s.try_days(amount.days))
        .map_err(|_| out_of_range())?;
    let civil = at(start, zone)?
        .civil
        .checked_add(calendar)
        .map_err(|_| out_of_range())?;
    instant(civil, zone)
        .and_then(|ms| ms.checked_add(amount.ms))
        .ok_or_else(out_of_range)
}

fn iso(local: &Local) -> String {
    let c = &local.civil;
    let mut s = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year(),
        c.month(),
        c.day(),
        c.hour(),
        c.minute(),
        c.second()
    );
    if c.millisecond() != 0 {
        let _ = write!(s, ".{:03}", c.millisecond());
    }
    match local.offset {
        0 => s.push('Z'),
        secs => s.push_str(&format_offset_seconds(secs, true)),
    }
    s
}

fn moment(ms: i64, zone: &Zone, format: Option<&str>) -> Result<Value, BuiltinError> {
    if !(MIN_MS..=MAX_MS).contains(&ms) {
        return Err(out_of_range());
    }
    let local = at(ms, zone)?;
    let c = local.civil;
    if !(0..=9999).contains(&c.year()) {
        return Err(out_of_range());
    }
    let mut out = Map::new();
    out.insert("iso".into(), json!(iso(&local)));
    out.insert("unix".into(), json!(ms.div_euclid(MS_PER_SEC)));
    out.insert("unix_ms".into(), json!(ms));
    out.insert(
        "date".into(),
        json!(format!("{:04}-{:02}-{:02}", c.year(), c.month(), c.day())),
    );
    out.insert(
        "time".into(),
        json!(format!(
            "{:02}:{:02}:{:02}",
            c.hour(),
            c.minute(),
            c.second()
        )),
    );
    out.insert(
        "weekday".into(),
        json!(strtime::format("%A", c).unwrap_or_default()),
    );
    out.insert("day_of_year".into(), json!(c.day_of_year()));
    out.insert("leap_year".into(), json!(c.in_leap_year()));
    out.insert(
        "offset".into(),
        json!(format_offset_seconds(local.offset, true)),
    );
    if let Zone::Named { tz, name } = zone {
        let info = tz.to_offset_info(timestamp(ms)?);
        out.insert("timezone".into(), json!(name));
        out.insert("abbreviation".into(), json!(info.abbreviation()));
        out.insert("dst".into(), json!(info.dst().is_dst()));
    }
    if let Some(f) = format {
        out.insert("formatted".into(), json!(strftime(&local, zone, f)?));
    }
    Ok(Value::Object(out))
}

/// Renders the documented directives with jiff's `strtime` on the local date and time. The
/// instant's own directives are spelled here: `%Z` (UTC, the offset, or a named zone's
/// abbreviation), `%z` and `%s`; and `%y`, as jiff's covers only 1969-2068.
fn strftime(local: &Local, zone: &Zone, pattern: &str) -> Result<String, BuiltinError> {
    let mut jiff_pattern = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().enumerate();
    while let Some((pos, ch)) = chars.next() {
        if ch != '%' {
            jiff_pattern.push(ch);
            continue;
        }
        let literal = match chars.next() {
            Some((_, 'Z')) => match zone {
                Zone::Named { tz, .. } => tz
                    .to_offset_info(timestamp(local.unix_ms)?)
                    .abbreviation()
                    .to_string(),
                Zone::Fixed(0) => "UTC".into(),
                Zone::Fixed(_) => format_offset_seconds(local.offset, true),
            },
            Some((_, 'z')) => format_offset_seconds(local.offset, false),
            Some((_, 's')) => local.unix_ms.div_euclid(MS_PER_SEC).to_string(),
            Some((_, 'y')) => format!("{:02}", local.civil.year().rem_euclid(100)),
            Some((_, d)) if DIRECTIVES.contains(d) => {
                jiff_pattern.push('%');
                jiff_pattern.push(d);
                continue;
            }
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
        jiff_pattern.push_str(&literal.replace('%', "%%"));
    }
    strtime::format(&jiff_pattern, local.civil)
        .map_err(|e| BuiltinError::execution(format!("cannot format the date: {e}")))
}

fn diff(from: i64, to: i64, zone: &Zone) -> Result<Value, BuiltinError> {
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
        "human": human(from, to, zone)?,
        "from": iso(&at(from, zone)?),
        "to": iso(&at(to, zone)?),
    }))
}

/// Formats a span as an `amount` string, so a diff can be fed straight back into `add`: in a
/// named zone days are calendar days (a DST day is still one day), the rest exact.
fn human(from: i64, to: i64, zone: &Zone) -> Result<String, BuiltinError> {
    let delta = to - from;
    let (days, rest_ms) = match zone {
        Zone::Fixed(_) => (delta.abs() / MS_PER_DAY, delta.abs() % MS_PER_DAY),
        Zone::Named { tz, .. } => {
            let start = timestamp(from)?.to_zoned_datetime(tz.clone());
            let end = timestamp(to)?.to_zoned_datetime(tz.clone());
            let span = start
                .until((Unit::Day, &end))
                .map_err(|_| out_of_range())?
                .abs();
            let rest = ((i64::from(span.get_hours()) * 60 + span.get_minutes()) * 60
                + span.get_seconds())
                * MS_PER_SEC
                + span.get_milliseconds();
            (i64::from(span.get_days()), rest)
        }
    };
    if days == 0 && rest_ms == 0 {
        return Ok("0s".into());
    }
    let (h, m, ms) = (
        rest_ms / MS_PER_HOUR,
        rest_ms % MS_PER_HOUR / MS_PER_MIN,
        rest_ms % MS_PER_MIN,
    );
    let mut parts = Vec::new();
    if days > 0 {
        parts.push(format!("{days}d"));
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
    let sign = if delta < 0 { "-" } else { "" };
    Ok(format!("{sign}{}", parts.join(" ")))
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
    fn the_supported_range_is_years_0000_to_9999() {
        // The two ends, as the calendar sees them: RFC 3339's four-digit years.
        assert_eq!(parse_iso("0000-01-01"), "0000-01-01T00:00:00Z");
        let first = ok(json!({"operation": "parse", "value": "0000-01-01"}));
        assert_eq!(first["unix_ms"], MIN_MS);
        assert_eq!(first["weekday"], "Saturday");
        let last = ok(json!({"operation": "parse", "value": "9999-12-31T23:59:59.999Z"}));
        assert_eq!(last["unix_ms"], MAX_MS);
        assert_eq!(last["day_of_year"], 365);
        assert_eq!(
            rfc3339_utc(1_709_208_000_123).as_deref(),
            Some("2024-02-29T12:00:00.123Z")
        );
        assert_eq!(rfc3339_utc(0).as_deref(), Some("1970-01-01T00:00:00Z"));
    }

    #[test]
    fn leap_years() {
        for (date, valid) in [
            ("2024-02-29", true),
            ("2000-02-29", true),
            ("0000-02-29", true),
            ("1900-02-29", false),
            ("2023-02-29", false),
            ("2100-02-29", false),
        ] {
            assert_eq!(
                run(json!({"operation": "parse", "value": date})).is_ok(),
                valid,
                "{date}"
            );
        }
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
        assert_eq!(format_offset_seconds(-330 * 60, true), "-05:30");
        assert_eq!(format_offset_seconds(0, false), "+0000");
    }

    #[test]
    fn named_zones_follow_daylight_saving_time() {
        // Paris: CET (+01:00) in winter, CEST (+02:00) from the last Sunday of March.
        let winter = ok(
            json!({"operation": "parse", "value": "2024-01-15T12:00", "timezone": "Europe/Paris"}),
        );
        assert_eq!(winter["iso"], "2024-01-15T12:00:00+01:00");
        assert_eq!(winter["timezone"], "Europe/Paris");
        assert_eq!(winter["abbreviation"], "CET");
        assert_eq!(winter["dst"], false);
        let summer = ok(
            json!({"operation": "parse", "value": "2024-07-15T12:00Z", "timezone": "Europe/Paris"}),
        );
        assert_eq!(summer["iso"], "2024-07-15T14:00:00+02:00");
        assert_eq!(summer["offset"], "+02:00");
        assert_eq!(summer["dst"], true);
        // 2024-03-31 02:00 does not exist in Paris: read as the time after the gap.
        let gap = ok(
            json!({"operation": "parse", "value": "2024-03-31T02:30", "timezone": "Europe/Paris"}),
        );
        assert_eq!(gap["iso"], "2024-03-31T03:30:00+02:00");
        // 2024-10-27 02:30 happens twice: the first (summer time) is meant.
        let fold = ok(
            json!({"operation": "parse", "value": "2024-10-27T02:30", "timezone": "Europe/Paris"}),
        );
        assert_eq!(fold["iso"], "2024-10-27T02:30:00+02:00");
        // Case does not matter; the name comes back as the database spells it.
        let v = ok(json!({"operation": "now", "timezone": "america/new_york"}));
        assert_eq!(v["timezone"], "America/New_York");
        assert_eq!(v["iso"], "2024-02-29T07:00:00-05:00");
    }

    #[test]
    fn a_day_across_a_dst_change_keeps_the_wall_clock() {
        for (value, amount, tz, expected) in [
            (
                "2024-03-30T12:00",
                "1d",
                "Europe/Paris",
                "2024-03-31T12:00:00+02:00",
            ),
            (
                "2024-03-30T12:00",
                "24h",
                "Europe/Paris",
                "2024-03-31T13:00:00+02:00",
            ),
            (
                "2024-10-26T12:00",
                "1d",
                "Europe/Paris",
                "2024-10-27T12:00:00+01:00",
            ),
            (
                "2024-03-09T09:00",
                "1w",
                "America/New_York",
                "2024-03-16T09:00:00-04:00",
            ),
            // A fraction of a day is exact.
            (
                "2024-03-30T12:00",
                "1.5d",
                "Europe/Paris",
                "2024-04-01T01:00:00+02:00",
            ),
        ] {
            let v =
                ok(json!({"operation": "add", "value": value, "amount": amount, "timezone": tz}));
            assert_eq!(v["iso"], expected, "{value} + {amount} in {tz}");
        }
        let d = ok(
            json!({"operation": "diff", "value": "2024-03-30T12:00", "other": "2024-03-31T12:00", "timezone": "Europe/Paris"}),
        );
        assert_eq!(d["hours"], 23);
        assert_eq!(d["human"], "1d");
        let d = ok(
            json!({"operation": "diff", "value": "2024-10-27T12:00", "other": "2024-10-26T11:00", "timezone": "Europe/Paris"}),
        );
        assert_eq!(d["hours"], -26);
        assert_eq!(d["human"], "-1d 1h");
        let back = ok(
            json!({"operation": "add", "value": "2024-10-27T12:00", "amount": "-1d 1h", "timezone": "Europe/Paris"}),
        );
        assert_eq!(back["iso"], "2024-10-26T11:00:00+02:00");
    }

    #[test]
    fn zone_errors_say_what_to_write() {
        let m = invalid(json!({"operation": "now", "timezone": "Europe/Pariss"}));
        assert!(m.contains("did you mean `Europe/Paris`?"), "{m}");
        assert!(m.contains("not a time zone of the IANA database"), "{m}");
        let m = invalid(json!({"operation": "now", "timezone": "new york"}));
        assert!(m.contains("did you mean `America/New_York`?"), "{m}");
        let m = invalid(json!({"operation": "now", "timezone": "Mars/Olympus"}));
        assert!(m.contains("`Europe/Paris`"), "{m}");
        let m =
            invalid(json!({"operation": "now", "timezone": "UTC", "timezone_offset": "+01:00"}));
        assert!(m.contains("not both"), "{m}");
        let m = invalid(json!({"operation": "now", "timezone_offset": "Europe/Paris"}));
        assert!(m.contains("use `timezone`"), "{m}");
    }

    #[test]
    fn format_in_a_zone_names_its_abbreviation() {
        let v = ok(
            json!({"operation": "format", "value": "2024-07-01T09:00Z", "format": "%H:%M %Z (%z)", "timezone": "Europe/Paris"}),
        );
        assert_eq!(v["formatted"], "11:00 CEST (+0200)");
        let v = ok(
            json!({"operation": "format", "value": "1900-06-01T00:00Z", "format": "%y %Y %Z", "timezone": "UTC"}),
        );
        assert_eq!(v["formatted"], "00 1900 UTC");
        // Before 1911 Paris kept its local mean time, an offset with seconds.
        let v = ok(
            json!({"operation": "parse", "value": "1900-01-01T00:00Z", "timezone": "Europe/Paris"}),
        );
        assert_eq!(v["offset"], "+00:09:21");
        assert_eq!(v["iso"], "1900-01-01T00:09:21+00:09:21");
    }

    #[test]
    fn clocks_for_now_and_tests() {
        assert_eq!(parse_clock("2024-02-29T12:00:00Z", 0), Ok(NOW));
        assert_eq!(parse_clock("@1709208000", 0), Ok(NOW));
        assert_eq!(parse_clock("now", NOW), Ok(NOW));
        let e = parse_clock("tomorrow", 0).unwrap_err();
        assert!(e.starts_with("invalid time `tomorrow`: "), "{e}");
    }
}
