//! The loop's own cost per tool call, in process: a scripted model makes 100 mock tool calls in
//! one turn; the per-call figure is the difference to a run that makes none, divided by 100.
//! Measured with OpenTelemetry export off, then on (to an OTLP sink on 127.0.0.1 in this
//! process, which answers 200 to everything): the difference is what export costs the loop.
//!
//!     cargo bench --bench loop_cost

use std::path::Path;
use std::time::Instant;
use toolrun::engine::{Engine, RunOptions};
use toolrun::events::Events;
use toolrun::models::ModelClient;
use toolrun::net::Transport;
use toolrun::redact::Secrets;
use toolrun::specfile::Source;

const CALLS: usize = 100;

fn spec(calls: usize) -> String {
    let list: Vec<String> = (0..calls)
        .map(|i| format!("{{ name: price, arguments: {{ ticker: T{i} }} }}"))
        .collect();
    let turns = if calls == 0 {
        String::new()
    } else {
        format!("          - tool_calls: [{}]\n", list.join(", "))
    };
    format!(
        r#"version: 1
name: bench
tools:
  price:
    description: Returns a simulated price for a ticker symbol.
    kind: mock
    input: {{ type: object, properties: {{ ticker: {{ type: string }} }}, required: [ticker], additionalProperties: false }}
    responses:
      - when: {{ ticker: T0 }}
        result: 1.5
      - result: {{ price: 2.5, ticker: "{{{{ args.ticker }}}}" }}
policy: {{ max_identical_calls: 1000 }}
limits: {{ max_steps: 4, max_tool_calls: 1000, max_parallel_tools: 1000 }}
models:
  m:
    kind: scripted
    scripts:
      - turns:
{turns}          - answer: done
"#
    )
}

fn time_runs(calls: usize, iterations: usize) -> f64 {
    let source = Source::new("bench.yaml", spec(calls));
    let registry = toolrun::compile::compile(&source, Path::new("bench.yaml"))
        .registry
        .expect("bench spec compiles");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let transport = Transport::live();
    let events = Events::none();
    let secrets = Secrets::default();
    let engine = Engine {
        registry: &registry,
        transport: &transport,
        events: &events,
        secrets: &secrets,
        redactor: secrets.redactor(),
    };
    let started = Instant::now();
    for _ in 0..iterations {
        let mut secrets_for_model = Secrets::default();
        let mut model =
            ModelClient::new(&registry.models[0], "q", &mut secrets_for_model).expect("model");
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
        assert_eq!(trace.tool_call_count as usize, calls);
        // What `toolrun run` does with a finished run; nothing unless export is on.
        toolrun::telemetry::export_run(&trace, &engine.redactor);
    }
    started.elapsed().as_secs_f64() / iterations as f64
}

/// An OTLP/HTTP receiver that reads each request and answers 200, on 127.0.0.1.
fn sink() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the sink");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':') {
                            if k.eq_ignore_ascii_case("content-length") {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn measure(label: &str) -> f64 {
    let iterations = 300;
    let _ = time_runs(CALLS, 20); // warm-up
    let empty = time_runs(0, iterations);
    let full = time_runs(CALLS, iterations);
    let per_call = (full - empty) * 1e6 / CALLS as f64;
    println!("{label}:");
    println!("  run with no tool call:        {:>8.1} µs", empty * 1e6);
    println!("  run with {CALLS} mock tool calls: {:>8.1} µs", full * 1e6);
    println!("  loop cost per tool call:      {per_call:>8.2} µs (validate, policy, execute, observe, trace)");
    per_call
}

fn main() {
    let off = measure("OpenTelemetry export off");
    toolrun::telemetry::init(&toolrun::telemetry::Flags {
        otlp: Some(sink()),
        content: false,
    });
    let on = measure("OpenTelemetry export on (spans made and queued; sent by the export thread)");
    toolrun::telemetry::finish();
    println!(
        "export adds {:.2} µs per tool call on the loop's thread",
        on - off
    );
}
