//! The secret masker on a 4 MiB response. First each pass alone, against parsing the response
//! once as JSON (which a run does anyway): a run masks the raw body as it arrives, then the
//! parsed result and the trace, and the writer scans its final bytes. Then whole runs, in
//! process, of an HTTP tool fetching the response from a server on 127.0.0.1, with three
//! secrets declared and with none: the difference is what masking costs a run.
//!
//!     cargo bench --bench masker
//!
//! Instruction counts of one whole run each way (the figure README quotes; a busy machine does
//! not disturb it as it does wall time):
//!
//!     MASKER_BENCH_ROUNDS=1 MASKER_BENCH_RUN=plain valgrind --tool=callgrind target/release/deps/masker-*
//!     MASKER_BENCH_ROUNDS=1 MASKER_BENCH_RUN=masked valgrind --tool=callgrind target/release/deps/masker-*

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;
use toolrun::engine::{Engine, RunOptions};
use toolrun::events::Events;
use toolrun::models::ModelClient;
use toolrun::net::Transport;
use toolrun::redact::{base64, Redactor, Secrets};
use toolrun::specfile::Source;

const SIZE: usize = 4 << 20;

/// Rounds per measurement (`MASKER_BENCH_ROUNDS`, default 7): one under callgrind.
fn rounds() -> usize {
    std::env::var("MASKER_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7)
}

/// JSON records full of characters that can start an escape (`%`, `\`, `&`, `+`) and of letters
/// that start base64 spellings: the masker's worst realistic case. A few records echo secrets.
fn response(secrets: &[&str]) -> String {
    let mut out = String::from("[");
    let mut i = 0usize;
    while out.len() < SIZE {
        let echo = match i % 997 {
            0 => secrets[i % secrets.len()]
                .replace('/', "%2F")
                .replace(' ', "+"),
            1 => base64(
                format!("user:{}", secrets[i % secrets.len()]).as_bytes(),
                false,
            ),
            _ => format!("q=caf%C3%A9+au+lait&tag=a%2Bb \\u00e9 &amp; row {i}"),
        };
        out.push_str(&format!(
            r#"{{"id":{i},"name":"Item {i} \"quoted\" \/ path","url":"https://example.com/items/{i}?q=x%20y&lang=en","note":"{echo}"}},"#
        ));
        i += 1;
    }
    out.pop();
    out.push(']');
    out
}

/// The fastest round: on a shared machine, the one least disturbed by others.
fn fastest(xs: Vec<f64>) -> f64 {
    xs.into_iter().fold(f64::INFINITY, f64::min)
}

fn time<T>(mut f: impl FnMut() -> T) -> f64 {
    fastest(
        (0..rounds())
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64() * 1000.0
            })
            .collect(),
    )
}

/// Serves `body` to every request on 127.0.0.1 until the process ends.
fn serve(body: String) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
        }
    });
    port
}

/// Milliseconds per run of a spec whose tool fetches the response, masked with `redactor`,
/// including the trace as `run` writes it.
fn time_runs(port: u16, redactor: &Redactor) -> f64 {
    let source = Source::new(
        "bench.yaml",
        format!(
            r#"version: 1
name: bench
tools:
  fetch:
    description: Fetches the large response.
    kind: http
    request: {{ url: "http://127.0.0.1:{port}/big" }}
    response: {{ max_bytes: 8000000 }}
limits: {{ max_tool_output_chars: 8000000 }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
          - tool_calls: [{{ name: fetch, arguments: {{}} }}]
          - answer: done
"#
        ),
    );
    let registry = toolrun::compile::compile(&source, Path::new("bench.yaml"))
        .registry
        .expect("bench spec compiles");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (transport, events, secrets) = (Transport::live(), Events::none(), Secrets::default());
    let engine = Engine {
        registry: &registry,
        transport: &transport,
        events: &events,
        secrets: &secrets,
        redactor: redactor.clone(),
    };
    let mut times = Vec::new();
    for _ in 0..rounds() {
        let started = Instant::now();
        let mut model =
            ModelClient::new(&registry.models[0], "q", &mut Secrets::default()).expect("model");
        let opts = RunOptions {
            query: "q",
            model_name: "m",
            approvals: Default::default(),
            confirmer: None,
            now_unix_ms: 0,
            faults: Vec::new(),
            interrupted: None,
            cut: None,
            notify: None,
            session: None,
        };
        let trace = rt.block_on(engine.run(&mut model, opts));
        assert_eq!(trace.tool_errors.len(), 0, "{:?}", trace.tool_errors);
        let doc = serde_json::to_value(&trace).unwrap_or_default();
        std::hint::black_box(redactor.to_pretty(doc).map(|t| t.len()).unwrap_or(0));
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    fastest(times)
}

fn main() {
    let secrets = [
        "sk-live-4f3a9b2c7d1e8f6a5b4c3d2e1f0a9b8c",
        "Zq+8/a=b c&d?e-f.g_h~i",
        "weather-key-0123456789",
    ];
    let redactor = Redactor::named(
        secrets
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("S{i}"), s.to_string())),
    );
    let body = response(&secrets);
    // `MASKER_BENCH_RUN=plain|masked`: only those runs, for instruction counts (`perf stat`),
    // which a busy machine does not disturb as it does wall time.
    if let Ok(mode) = std::env::var("MASKER_BENCH_RUN") {
        let port = serve(body);
        let r = if mode == "masked" {
            redactor
        } else {
            Redactor::default()
        };
        println!("{mode}: {:.1} ms", time_runs(port, &r));
        return;
    }
    let mib = body.len() as f64 / f64::from(1 << 20);
    let parse = time(|| serde_json::from_str::<serde_json::Value>(&body).map(|_| ()));
    let raw = time(|| redactor.bytes(body.as_bytes()).len());
    let parsed: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    // Masked once, the value holds nothing more to replace: each round is the scan alone,
    // without a copy of the value (which takes longer than the scan) in the timing.
    let mut parsed_masked = parsed.clone();
    redactor.value(&mut parsed_masked);
    let value = time(|| {
        let mut v = std::mem::take(&mut parsed_masked);
        redactor.value(&mut v);
        parsed_masked = v;
    });
    let masked = redactor.str(&body);
    let scan = time(|| redactor.leaks(&masked).is_none());
    println!("response: {mib:.1} MiB, {} secrets", secrets.len());
    println!("parse as JSON (a run does this once):     {parse:8.1} ms");
    println!(
        "mask the raw body (as it arrives):        {raw:8.1} ms  ({:.0} MiB/s)",
        mib / raw * 1000.0
    );
    println!("mask the parsed value (result, trace):    {value:8.1} ms");
    println!("fail-closed scan of the final bytes:      {scan:8.1} ms");
    println!("masking / parsing: {:.2}x for the raw pass", raw / parse);

    let port = serve(body);
    let _ = time_runs(port, &Redactor::default()); // warm-up
    let plain = time_runs(port, &Redactor::default());
    let masked = time_runs(port, &redactor);
    println!("whole run, no secrets:                    {plain:8.1} ms");
    println!("whole run, 3 secrets masked:              {masked:8.1} ms");
    println!(
        "masking's share of the run:               {:8.1} %",
        (masked - plain) / masked * 100.0
    );
}
