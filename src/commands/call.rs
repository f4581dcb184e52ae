//! `toolrun call`: one tool, run directly through the engine's tool-call path, so debugging an
//! HTTP tool without a model exercises exactly what a model's call would (validation, policy,
//! confirmation, faults, timeout, masking, truncation).

use crate::cli::CallArgs;
use crate::engine::{CallOutcome, Engine, RunOptions};
use crate::events::Events;
use crate::exit;
use crate::net::Transport;
use crate::redact::{Redactor, Secrets};
use serde_json::{json, Value};

pub(crate) fn run(args: CallArgs) -> i32 {
    let registry = match super::load_registry(&args.spec) {
        Ok(r) => r,
        Err(code) => return code,
    };
    if registry.tool(&args.tool).is_none() {
        let hint = crate::diag::did_you_mean(&args.tool, registry.tool_names())
            .map(|h| format!("; {h}"))
            .unwrap_or_default();
        eprintln!("error: the spec has no tool `{}`{hint}", shown(&args.tool));
        return exit::USAGE;
    }
    for tool in &args.approve {
        if registry.tool(tool).is_none() {
            eprintln!(
                "error: --approve names `{}`, which is not a tool of this spec",
                shown(tool)
            );
            return exit::USAGE;
        }
    }
    let arguments = match serde_json::from_str::<Value>(&args.args) {
        Ok(v @ Value::Object(_)) => v,
        Ok(other) => {
            eprintln!(
                "error: --args must be a JSON object such as '{{\"city\": \"Paris\"}}', not {}",
                kind_of(&other)
            );
            return exit::USAGE;
        }
        Err(e) => {
            eprintln!("error: --args is not valid JSON: {e}");
            return exit::USAGE;
        }
    };
    let now = match crate::builtins::datetime::now_unix_ms(args.now.as_deref()) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::USAGE;
        }
    };
    let (secrets, missing) = Secrets::from_env(&registry.secrets);
    if !missing.is_empty() {
        eprintln!(
            "error: the spec reads secret(s) {} from the environment, but they are not set; export them and run again",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ")
        );
        return exit::USAGE;
    }
    crate::session::warn_short_secrets(&secrets);
    let redactor = secrets.redactor();
    let transport = Transport::live().allow_exec(&args.allow_exec);
    let events = Events::none();
    let engine = Engine {
        registry: &registry,
        transport: &transport,
        events: &events,
        secrets: &secrets,
        redactor: redactor.clone(),
    };
    let rt = crate::session::runtime();
    let opts = RunOptions {
        query: "",
        model_name: "",
        approvals: args.approve.iter().cloned().collect(),
        confirmer: None,
        now_unix_ms: now,
        faults: Vec::new(),
        interrupted: None,
    };
    let outcome = rt.block_on(engine.call_tool(&args.tool, arguments.clone(), opts));
    report(&outcome, &arguments, args.json, &redactor)
}

/// Prints the outcome and maps it to the contract's exit codes: 0 the tool answered, 1 it
/// failed or was rejected, 3 it needs a person's approval.
fn report(outcome: &CallOutcome, arguments: &Value, as_json: bool, redactor: &Redactor) -> i32 {
    let mut record = record(outcome, arguments);
    redactor.value(&mut record);
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

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Names typed on the command line reach the terminal: keep control characters out.
fn shown(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(100).collect()
}
