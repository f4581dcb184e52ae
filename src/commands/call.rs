//! `toolrun call`: one tool, run directly through the engine's tool-call path, so debugging an
//! HTTP tool without a model exercises exactly what a model's call would (validation, policy,
//! confirmation, faults, timeout, masking, truncation).

use crate::cli::CallArgs;
use crate::engine::CallOutcome;
use crate::exit;
use crate::setup::{shown, Inputs, Setup};
use serde_json::{json, Value};

pub(crate) fn run(args: CallArgs) -> i32 {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if !registry.may_have_tool(&args.tool) {
        let hint = crate::diag::did_you_mean(&args.tool, registry.tool_names())
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        eprintln!("error: the spec has no tool `{}`{hint}", shown(&args.tool));
        return exit::USAGE;
    }
    let arguments = match serde_json::from_str::<Value>(&args.args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            eprintln!(
                "error: --args must be a JSON object such as '{{\"city\": \"Paris\"}}', not {}",
                crate::builtins::json_type(&other)
            );
            return exit::USAGE;
        }
        Err(e) => {
            eprintln!("error: --args is not valid JSON: {e}");
            return exit::USAGE;
        }
    };
    let mut inputs = Inputs::from_flags(&args.setup);
    // An exported call of an MCP tool keeps its exchange (recorded, masked) for its CLIENT span.
    if crate::telemetry::mcp::wants_exchanges(&registry) {
        inputs.network = crate::setup::Network::Record { previous: None };
    }
    let setup = match Setup::open(&registry, inputs) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let rt = crate::setup::runtime();
    let outcome = rt.block_on(setup.engine(&registry).call_tool(
        &args.tool,
        arguments.clone(),
        &setup.call_options(),
    ));
    let mut record = record(&outcome, &arguments);
    setup.redactor.value(&mut record);
    let exchanges = setup
        .tape
        .as_ref()
        .map(|t| t.exchanges())
        .unwrap_or_default();
    crate::telemetry::export_call(&record, (&exchanges, &registry), &setup.redactor);
    report(record, args.json)
}

/// Prints the outcome and maps it to the contract's exit codes: 0 the tool answered, 1 it
/// failed or was rejected, 3 it needs a person's approval.
fn report(record: Value, as_json: bool) -> i32 {
    let code = match record["status"].as_str() {
        Some("ok") => exit::SUCCESS,
        Some("needs_confirmation") => exit::NEEDS_PERSON,
        _ => exit::FAILED,
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&record).unwrap_or_default()
        );
    } else if code == exit::SUCCESS {
        match &record["result"] {
            Value::String(s) => println!("{}", crate::term::visible(s)),
            other => println!(
                "{}",
                serde_json::to_string_pretty(other).unwrap_or_default()
            ),
        }
    }
    if code == exit::NEEDS_PERSON {
        let name = record["name"].as_str().unwrap_or_default();
        eprintln!(
            "toolrun: `{name}` needs confirmation before it runs; re-run with --approve {name}"
        );
    } else if code == exit::FAILED {
        eprintln!(
            "toolrun: `{}` failed ({}): {}",
            record["name"].as_str().unwrap_or_default(),
            record["error"]["kind"]
                .as_str()
                .unwrap_or("execution_error"),
            crate::term::visible(record["error"]["message"].as_str().unwrap_or_default())
        );
    }
    code
}

/// The result record: the trace's `tool_results` entry when the tool ran, with the error and
/// its details folded in; a rejected call has no duration because nothing ran.
fn record(outcome: &CallOutcome, arguments: &Value) -> Value {
    if let Some(p) = &outcome.pending {
        return json!({ "id": p.id, "name": p.name, "arguments": p.arguments, "status": "needs_confirmation" });
    }
    let mut record = match &outcome.result {
        Some(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        None => match &outcome.error {
            Some(e) => {
                json!({ "id": e.id, "name": e.name, "arguments": arguments, "status": "error" })
            }
            None => json!({ "status": "error" }),
        },
    };
    if let (Some(e), Value::Object(map)) = (&outcome.error, &mut record) {
        map.insert(
            "error".into(),
            json!({ "kind": e.kind, "message": e.message }),
        );
        if let Some(d) = &e.details {
            map.insert("details".into(), d.clone());
        }
    }
    record
}
