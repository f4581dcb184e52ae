//! The one retry timing for everything toolrun sends: models and HTTP tools wait alike —
//! exponential backoff with jitter, capped, unless the server says how long (`Retry-After`).

use super::HttpResponse;
use jiff::fmt::rfc2822;
use jiff::tz::Offset;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long to wait between attempts when the server does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// The first wait (before jitter); doubled on each further attempt.
    pub(crate) base: Duration,
    /// No wait is longer than this.
    pub(crate) max: Duration,
}

/// Model calls: providers rate-limit by the minute, so waits grow long enough to matter.
pub(crate) const MODELS: Backoff = Backoff {
    base: Duration::from_millis(500),
    max: Duration::from_secs(30),
};

/// HTTP tools: a tool call runs inside the tool's own timeout, so waits stay short.
pub(crate) const TOOLS: Backoff = Backoff {
    base: Duration::from_millis(200),
    max: Duration::from_secs(10),
};

impl Backoff {
    /// "Equal jitter": half the exponential delay fixed, half spread. The spread is drawn from
    /// `seed` (a call id, a request body), so a replayed run computes the same waits while
    /// concurrent callers spread out instead of retrying in lockstep.
    pub(crate) fn delay(&self, attempt: u32, seed: &[u8]) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(self.max);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.iter().copied().chain(attempt.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let frac = (h >> 11) as f64 / (1u64 << 53) as f64;
        exp / 2 + exp.mul_f64(frac / 2.0)
    }

    /// The server's wait when it gives one, else this backoff.
    pub(crate) fn next(&self, resp: Option<&HttpResponse>, attempt: u32, seed: &[u8]) -> Duration {
        resp.and_then(retry_after)
            .unwrap_or_else(|| self.delay(attempt, seed))
    }
}

/// The wait a reply asks for: `retry-after-ms` (OpenAI's, milliseconds), else `Retry-After`
/// in seconds or as an HTTP date.
pub(crate) fn retry_after(resp: &HttpResponse) -> Option<Duration> {
    resp.header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64((ms / 1000.0).min(1e9)))
        .or_else(|| resp.header("retry-after").and_then(parse_retry_after))
}

/// `Retry-After: 3` (fractions tolerated) or `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`; a
/// date in the past means now.
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(1e9)));
    }
    let at = parse_http_date(v)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
    Some(Duration::from_secs(at.saturating_sub(now).max(0) as u64))
}

/// An HTTP date as Unix seconds, in any of the three forms RFC 9110 §5.6.7 makes recipients
/// accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, what servers send today), and the
/// obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
/// jiff's RFC 2822 reader takes the first; a weekday that does not match the date is tolerated
/// in every form, as a server's slip should not cost the wait it asked for.
pub(crate) fn parse_http_date(s: &str) -> Option<i64> {
    static PARSER: rfc2822::DateTimeParser = rfc2822::DateTimeParser::new().relaxed_weekday(true);
    let s = s.trim();
    if let Ok(t) = PARSER.parse_timestamp(s) {
        return Some(t.as_second());
    }
    let this_year = Offset::UTC.to_datetime(jiff::Timestamp::now()).year();
    parse_rfc850(s, this_year).or_else(|| parse_asctime(s))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// `Sunday, 06-Nov-94 08:49:37 GMT`. Its two-digit year is the one within 50 years of
/// `this_year`, the past winning a tie: RFC 9110 §5.6.7 reads a date that appears more than 50
/// years in the future as the most recent past year with those digits.
fn parse_rfc850(s: &str, this_year: i16) -> Option<i64> {
    let (weekday, rest) = s.split_once(", ")?;
    if !WEEKDAYS.contains(&weekday) {
        return None;
    }
    let [date, time, zone] = fields(rest)?;
    if zone != "GMT" {
        return None;
    }
    let mut date = date.split('-');
    let (day, month, yy) = (date.next()?, date.next()?, date.next()?);
    if date.next().is_some() || day.len() != 2 || yy.len() != 2 {
        return None;
    }
    let yy: i16 = digits(yy)?;
    let mut year = this_year - this_year.rem_euclid(100) + yy;
    if year > this_year + 50 {
        year -= 100;
    } else if year <= this_year - 50 {
        year += 100;
    }
    utc_seconds(year, month, digits(day)?, time)
}

/// `Sun Nov  6 08:49:37 1994` (C's asctime; the day is space-padded).
fn parse_asctime(s: &str) -> Option<i64> {
    let [weekday, month, day, time, year] = fields(s)?;
    let short = WEEKDAYS.iter().any(|w| w.get(..3) == Some(weekday));
    if !short || day.len() > 2 || year.len() != 4 {
        return None;
    }
    utc_seconds(digits(year)?, month, digits(day)?, time)
}

/// Exactly `N` whitespace-separated fields.
fn fields<const N: usize>(s: &str) -> Option<[&str; N]> {
    let parts: Vec<&str> = s.split_ascii_whitespace().collect();
    parts.try_into().ok()
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| s.parse().ok())?
}

/// A UTC date and `HH:MM:SS` time as Unix seconds; a leap second (`:60`) reads as `:59`.
fn utc_seconds(year: i16, month: &str, day: i8, time: &str) -> Option<i64> {
    let month = MONTHS.iter().position(|m| *m == month)? as i8 + 1;
    let [h, m, sec] = time
        .split(':')
        .map(|p| (p.len() == 2).then(|| digits::<i8>(p))?)
        .collect::<Option<Vec<i8>>>()?
        .try_into()
        .ok()?;
    let at = jiff::civil::DateTime::new(year, month, day, h, m, sec.min(59), 0).ok()?;
    Some(Offset::UTC.to_timestamp(at).ok()?.as_second())
}

/// An HTTP date `secs` from now, for tests that need a date in the future.
#[cfg(test)]
pub(crate) fn http_date_in(secs: u64) -> String {
    let at = jiff::Timestamp::now() + std::time::Duration::from_secs(secs);
    rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&at)
        .expect("a date near now prints")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_seconds() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784111777)
        );
        // RFC 9110 §5.6.7: the two obsolete forms are accepted too.
        assert_eq!(
            parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784111777)
        );
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(784111777));
        assert_eq!(parse_http_date("Sun Nov 16 08:49:37 1994"), Some(784975777));
        for bad in [
            "Sunday, 06-Nov-94 08:49:37 PST",
            "Sundae, 06-Nov-94 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sunday, 31-Feb-94 08:49:37 GMT",
            "Sun Nov  6 08:49 1994",
            "Sun Nov  6 08:49:37 94",
            "Sun Nov  6 25:49:37 1994",
            "Sun Foo  6 08:49:37 1994",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
        let ahead = parse_retry_after(&http_date_in(30)).expect("parses");
        assert!(
            ahead > Duration::from_secs(27) && ahead <= Duration::from_secs(30),
            "{ahead:?}"
        );
    }

    #[test]
    fn a_two_digit_year_more_than_50_years_ahead_is_in_the_past_century() {
        let year_of = |s: &str, now: i16| {
            let t = jiff::Timestamp::from_second(parse_rfc850(s, now).expect(s)).unwrap();
            Offset::UTC.to_datetime(t).year()
        };
        assert_eq!(year_of("Sunday, 06-Nov-94 08:49:37 GMT", 2026), 1994);
        assert_eq!(year_of("Monday, 06-Nov-76 08:49:37 GMT", 2026), 2076);
        assert_eq!(year_of("Saturday, 06-Nov-77 08:49:37 GMT", 2026), 1977);
        assert_eq!(year_of("Thursday, 01-Jan-26 00:00:00 GMT", 2026), 2026);
        // Late in a century, small digits are the next one's: 2110 is 20 years ahead.
        assert_eq!(year_of("Friday, 01-Jan-10 00:00:00 GMT", 2090), 2110);
        assert_eq!(year_of("Friday, 01-Jan-40 00:00:00 GMT", 2090), 2140);
        assert_eq!(year_of("Friday, 01-Jan-41 00:00:00 GMT", 2090), 2041);
    }

    #[test]
    fn the_server_wins_over_backoff() {
        assert_eq!(
            retry_after(&HttpResponse::too_many_requests(&[
                ("retry-after-ms", "250"),
                ("retry-after", "9")
            ])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            MODELS.next(
                Some(&HttpResponse::too_many_requests(&[("Retry-After", "2")])),
                1,
                b"x"
            ),
            Duration::from_secs(2)
        );
        assert_eq!(
            MODELS.next(Some(&HttpResponse::too_many_requests(&[])), 3, b"x"),
            MODELS.delay(3, b"x")
        );
        assert_eq!(MODELS.next(None, 3, b"x"), MODELS.delay(3, b"x"));
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let a = TOOLS.delay(1, b"call_1");
        assert_eq!(a, TOOLS.delay(1, b"call_1"), "the same seed waits the same");
        assert!(
            a >= Duration::from_millis(100) && a <= Duration::from_millis(200),
            "{a:?}"
        );
        assert!(TOOLS.delay(3, b"x") >= Duration::from_millis(400));
        assert!(TOOLS.delay(30, b"x") <= TOOLS.max);
        assert!(MODELS.delay(40, b"x") <= MODELS.max);
        assert!(MODELS.delay(40, b"x") >= MODELS.max / 2);
        let spread: std::collections::BTreeSet<Duration> = (0..20)
            .map(|i| MODELS.delay(2, format!("req{i}").as_bytes()))
            .collect();
        assert!(spread.len() > 10, "jitter spreads concurrent callers");
    }
}
