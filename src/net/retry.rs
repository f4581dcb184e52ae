//! The one retry timing for everything toolrun sends: models and HTTP tools wait alike —
//! exponential backoff with jitter, capped, unless the server says how long (`Retry-After`).

use super::HttpResponse;
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

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form servers are allowed to send.
pub(crate) fn parse_http_date(s: &str) -> Option<i64> {
    let rest = s.split_once(", ")?.1;
    let mut parts = rest.split(' ');
    let day: i64 = parts.next()?.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| Some(*m) == parts.clone().next())? as i64
        + 1;
    parts.next();
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<i64>().ok());
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT" || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

/// An HTTP date `secs` from now, for tests that need a date in the future.
#[cfg(test)]
pub(crate) fn http_date_in(secs: u64) -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        + secs;
    let days = (t / 86_400) as i64;
    let rem = t % 86_400;
    // Civil date from days (Howard Hinnant's algorithm, inverse of the above).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // The weekday is not checked by the parser; any name does.
    format!(
        "Mon, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        months[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(headers: &[(&str, &str)]) -> HttpResponse {
        HttpResponse {
            status: 429,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
            truncated: false,
        }
    }

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
            retry_after(&resp(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            MODELS.next(Some(&resp(&[("Retry-After", "2")])), 1, b"x"),
            Duration::from_secs(2)
        );
        assert_eq!(
            MODELS.next(Some(&resp(&[])), 3, b"x"),
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
