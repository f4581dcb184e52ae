//! The one retry timing for everything toolrun sends: models and HTTP tools wait alike —
//! exponential backoff with jitter, capped, unless the server says how long (`Retry-After`).

use super::HttpResponse;
use jiff::fmt::rfc2822;
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

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form servers send, as Unix seconds.
/// jiff's RFC 2822 reader takes it (and other RFC 2822 dates); a weekday that does not match the
/// date is tolerated, as a server's slip should not cost the wait it asked for.
pub(crate) fn parse_http_date(s: &str) -> Option<i64> {
    static PARSER: rfc2822::DateTimeParser = rfc2822::DateTimeParser::new().relaxed_weekday(true);
    PARSER.parse_timestamp(s.trim()).ok().map(|t| t.as_second())
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
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
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
