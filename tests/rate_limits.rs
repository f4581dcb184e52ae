//! Rate limits of a live model across `toolrun test --jobs N` workers (issue 14), through the
//! binary against a fake OpenAI-compatible server on 127.0.0.1 that logs when each request
//! arrives and how many are in flight.
//!
//! The assertions are about order, and about lower bounds that hold however slow the machine
//! is: a request that starts after the client learned of a 429 reaches the server after the
//! server sent that 429, plus the wait the client was told.

mod support;

use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::http::{Request, Response, TestServer};
use support::providers::{live_spec, openai_answer, KEY};
use support::{run, toolrun, write};

/// What the server saw.
#[derive(Default)]
struct Log {
    in_flight: usize,
    most_in_flight: usize,
    /// Arrival of every request, in order, with the query it is about.
    arrivals: Vec<(Instant, String)>,
    /// When the server answered 429, just before the reply was written.
    rate_limited_at: Option<Instant>,
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers every request with `ok` after `hold` (so concurrent requests overlap), except that
/// the `limit_nth` request (1-based) gets `429 Retry-After: 1`.
fn server(hold: Duration, limit_nth: Option<usize>) -> (TestServer, Arc<Mutex<Log>>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let shared = log.clone();
    let server = TestServer::start(move |req: &Request| {
        let nth = {
            let mut l = lock(&shared);
            l.in_flight += 1;
            l.most_in_flight = l.most_in_flight.max(l.in_flight);
            l.arrivals.push((Instant::now(), query_of(req)));
            l.arrivals.len()
        };
        std::thread::sleep(hold);
        let mut l = lock(&shared);
        // Leaves the count before the reply is written: the client cannot start its next
        // request before this one is counted out.
        l.in_flight -= 1;
        if Some(nth) == limit_nth {
            l.rate_limited_at = Some(Instant::now());
            return Response::json(
                429,
                serde_json::json!({ "error": { "message": "Rate limit reached", "type": "requests" } }),
            )
            .header("Retry-After", "1");
        }
        openai_answer("ok")
    });
    (server, log)
}

fn query_of(req: &Request) -> String {
    req.json()
        .and_then(|b| {
            b["messages"].as_array().and_then(|m| {
                m.iter()
                    .rev()
                    .find(|m| m["role"] == "user")
                    .and_then(|m| m["content"].as_str().map(str::to_string))
            })
        })
        .unwrap_or_default()
}

fn tests_yaml(n: usize) -> String {
    let mut t = String::from("tests:\n");
    for i in 0..n {
        t.push_str(&format!(
            "  - name: t{i}\n    query: question {i}\n    expect: {{ output_contains: ok }}\n"
        ));
    }
    t
}

fn run_tests(server: &TestServer, limits: &str, cases: usize, name: &str) -> Value {
    let dir = support::temp_dir(name);
    let spec = live_spec("openai", &server.url("/v1"), limits, &tests_yaml(cases));
    write(&dir, "s.yaml", &spec);
    let out = run(toolrun().current_dir(&dir).env("TEST_KEY", KEY).args([
        "test", "s.yaml", "--model", "live", "--jobs", "4", "--format", "json",
    ]));
    out.assert_code(0);
    out.json()
}

#[test]
fn max_concurrency_holds_across_every_worker() {
    let (server, log) = server(Duration::from_millis(40), None);
    let doc = run_tests(&server, "    max_concurrency: 1\n", 8, "max-concurrency");
    assert_eq!(doc["totals"]["passed"], 8);
    let l = lock(&log);
    assert_eq!(l.arrivals.len(), 8);
    assert_eq!(
        l.most_in_flight, 1,
        "max_concurrency 1 with --jobs 4: never two requests in flight"
    );
}

#[test]
fn a_429_pauses_every_worker_for_its_retry_after() {
    // The second request is refused. With one request in flight at a time, that 429 is the
    // only request the server holds when it answers, so every later arrival was sent after
    // the client read the 429: none may come sooner than its `Retry-After: 1`.
    let (server, log) = server(Duration::from_millis(10), Some(2));
    let doc = run_tests(&server, "    max_concurrency: 1\n", 4, "retry-after");
    assert_eq!(doc["totals"]["passed"], 4, "the refused request is retried");
    let l = lock(&log);
    assert_eq!(l.arrivals.len(), 5, "four tests and one retry");
    let limited = l.rate_limited_at.expect("the server sent a 429");
    let (limited_query, later) = (&l.arrivals[1].1, &l.arrivals[2..]);
    for (at, query) in later {
        assert!(
            *at >= limited + Duration::from_secs(1),
            "`{query}` arrived {:?} after the 429; every worker must wait its Retry-After",
            at.duration_since(limited)
        );
    }
    // The other workers were ready to send: they went first or after the retry, but the
    // retry of the refused question is among the later arrivals.
    assert!(later.iter().any(|(_, q)| q == limited_query));
}

#[test]
fn requests_per_minute_spaces_the_starts_of_every_worker() {
    let (server, log) = server(Duration::ZERO, None);
    // 300 a minute: one request every 200 ms, whichever worker sends it.
    let before = Instant::now();
    let doc = run_tests(&server, "    requests_per_minute: 300\n", 5, "rpm");
    assert_eq!(doc["totals"]["passed"], 5);
    let l = lock(&log);
    assert_eq!(l.arrivals.len(), 5);
    for (k, (at, query)) in l.arrivals.iter().enumerate() {
        let earliest = before + Duration::from_millis(200) * k as u32;
        assert!(
            *at >= earliest,
            "request {k} (`{query}`) came {:?} after the start; not before {:?}",
            at.duration_since(before),
            earliest.duration_since(before)
        );
    }
}

#[test]
fn check_validates_the_limits() {
    let dir = support::temp_dir("limits-check");
    let spec = |limits: &str| live_spec("openai", "http://127.0.0.1:9/v1", limits, "");
    write(
        &dir,
        "s.yaml",
        &spec("    max_concurrency: 0\n    requests_per_minute: fast\n"),
    );
    let out = run(toolrun().current_dir(&dir).args(["check", "s.yaml"]));
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("`max_concurrency` must be at least 1, found 0"),
        "{out:?}"
    );
    assert!(out.stderr.contains("requests_per_minute"), "{out:?}");
    write(
        &dir,
        "good.yaml",
        &spec("    max_concurrency: 2\n    requests_per_minute: 60\n"),
    );
    run(toolrun().current_dir(&dir).args(["check", "good.yaml"])).assert_code(0);
}
