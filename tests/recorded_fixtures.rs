//! The committed fixtures of `specs/local_stack.yaml` were recorded against local servers. This
//! records the same run again against the same servers and checks the result is the committed
//! fixture (durations and paths aside): a change in what toolrun sends or records shows here.
//! `UPDATE_SNAPSHOTS=1 cargo test --test recorded_fixtures` re-records the committed file.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::providers::{openai_answer, openai_tool_calls, Fake};
use support::{Response, TestServer};

/// The addresses `specs/local_stack.yaml` names.
const MODEL_PORT: u16 = 18434;
const INVENTORY_PORT: u16 = 18787;

fn record(to: &Path) -> support::Output {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    support::run(
        support::toolrun()
            .current_dir(&root)
            .args([
                "run",
                "specs/local_stack.yaml",
                "--query",
                "How much are the A-1 widgets in stock worth?",
                "--record",
            ])
            .arg(to)
            .args(["--record-mode", "all", "--now", "2026-01-15T10:00:00Z"]),
    )
}

fn comparable(path: &Path) -> Value {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // Where the fixture lives and the spec's hash (any edit, even a comment) are not behaviour.
    v["spec"]["path"] = Value::Null;
    v["spec"]["sha256"] = Value::Null;
    v["trace"]["spec"]["sha256"] = Value::Null;
    support::redact_durations_json(&mut v);
    v
}

#[test]
fn local_stack_fixture_is_what_a_recording_produces() {
    let model = Fake::openai_keyless_on(
        MODEL_PORT,
        vec![
            openai_tool_calls(&[("call_inv_1", "inventory", r#"{"sku":"A-1"}"#)]),
            openai_tool_calls(&[(
                "call_calc_1",
                "calculate_expression",
                r#"{"expression":"12 * 9.5"}"#,
            )]),
            openai_answer("The 12 A-1 widgets in stock are worth 114 in total."),
        ],
    );
    let _inventory = TestServer::start_on(INVENTORY_PORT, |req| match req.path.as_str() {
        "/v1/items/A-1" => Response::json(
            200,
            json!({ "item": { "sku": "A-1", "name": "Widget", "in_stock": 12, "unit_price": 9.5 } }),
        ),
        _ => Response::json(404, json!({ "error": "no such item" })),
    });
    let committed =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/local_stack_inventory.json");
    let scratch = support::temp_dir("recorded-fixture");
    let target = if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        committed.clone()
    } else {
        scratch.join("local_stack_inventory.json")
    };
    let out = record(&target);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "The 12 A-1 widgets in stock are worth 114 in total.\n"
    );
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    let fresh = comparable(&target);
    assert_eq!(
        fresh["exchanges"].as_array().unwrap().len(),
        4,
        "three model calls and one HTTP call"
    );
    let old = comparable(&committed);
    if fresh != old {
        let (a, b) = (
            serde_json::to_string_pretty(&old).unwrap(),
            serde_json::to_string_pretty(&fresh).unwrap(),
        );
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let show = |s: &str| {
            s.lines()
                .skip(first.saturating_sub(3))
                .take(8)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!("the committed fixture is stale (UPDATE_SNAPSHOTS=1 re-records it); first difference at line {}:\n--- committed\n{}\n--- recorded now\n{}", first + 1, show(&a), show(&b));
    }
}

/// `fixtures/real_servers/MODEL/` were recorded by `scripts/live-examples.sh` against the real
/// servers of `../shared/real-servers` (llama-cpp-python with SmolLM2-135M, and LiteLLM's
/// Anthropic proxy in front of it): `toolrun test specs/real_servers.yaml --model MODEL --record
/// missing`. Offline, with no key set, each model's tests replay with the verdicts they had live.
#[test]
fn real_server_recordings_replay_offline_with_their_verdicts() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let replay = |args: &[&str]| {
        let out = support::run(
            support::toolrun()
                .current_dir(&root)
                .args(["test", "specs/real_servers.yaml", "--format", "json"])
                .args(args),
        );
        let doc = out.json();
        let tests = doc["tests"].as_array().cloned().unwrap_or_default();
        for t in &tests {
            for a in t["attempts"].as_array().into_iter().flatten() {
                assert_eq!(a["source"], "replay", "{out:?}");
                for f in a["failures"].as_array().into_iter().flatten() {
                    assert_eq!(f["kind"], "assertion", "only the model's own misses: {f}");
                }
            }
        }
        tests
            .iter()
            .map(|t| {
                let name = t["name"].as_str().unwrap_or_default().to_string();
                (name, t["outcome"].as_str().unwrap_or_default().to_string())
            })
            .collect::<Vec<_>>()
    };
    let verdicts = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(n, o)| (n.to_string(), o.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(replay(&[]), verdicts(&[("aapl_price_lookup", "passed")]));
    // Every fixture is there, so `--record missing` replays and nothing goes live.
    assert_eq!(
        replay(&["--model", "claude_local", "--record", "missing"]),
        verdicts(&[("aapl_price_lookup", "passed")])
    );
}
