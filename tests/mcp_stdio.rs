//! `kind: mcp` servers spoken to over stdio (`command:`), through the binary: the reference
//! servers nobody here wrote (`@modelcontextprotocol/server-filesystem` and `server-everything`,
//! pinned, on Node 22 from `tests/npm`), and a small probe on the official Python SDK
//! (`tests/mcp/stdio_server.py`) for what the reference servers cannot show: the process group
//! ended with the run (nothing left running, no zombie), the environment passed on, stderr kept.
#![cfg(unix)]

#[path = "npm/npm.rs"]
mod npm;
#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::{run, toolrun, write, Output};

const SECRET: &str = "probe-token-8c1f2e7d4b";

fn probe_spec(log_dir: &Path, tools: &str, turns: &str) -> String {
    let (python, script) = (python::python(), python::script("stdio_server.py"));
    support::specs::stdio_probe_spec((&python, &script, log_dir), tools, turns)
}

/// One call of `ask_name` (which elicits a name), its result the answer.
const ASK_NAME: &str = r#"          - tool_calls: [{ name: ask_name, arguments: {} }]
          - answer: "{{ results[0].result.result }}""#;

/// A probe project in a folder of its own: `probe.yaml` (see [`probe_spec`]), the folder the
/// probe logs to, and where a recording of it goes.
struct Probe {
    dir: support::TempDir,
    logs: PathBuf,
    spec: PathBuf,
    /// The spec as written.
    text: String,
    fixture: PathBuf,
}

impl Probe {
    fn new(name: &str, tools: &str, turns: &str) -> Probe {
        Probe::edited(name, tools, turns, |text| text)
    }

    /// The entry answers elicitation with the schema's defaults, and gives up after `timeout`.
    fn asking(name: &str, tools: &str, turns: &str, timeout: &str) -> Probe {
        Probe::edited(name, tools, turns, |text| {
            text.replace(
                "    timeout: 30s\n",
                &format!("    timeout: {timeout}\n    elicitation: defaults\n"),
            )
        })
    }

    fn edited(name: &str, tools: &str, turns: &str, edit: impl FnOnce(String) -> String) -> Probe {
        let dir = support::temp_dir(name);
        let logs = dir.join("logs");
        let text = edit(probe_spec(&logs, tools, turns));
        let spec = write(&dir, "probe.yaml", &text);
        let fixture = dir.join("probe.json");
        Probe {
            dir,
            logs,
            spec,
            text,
            fixture,
        }
    }

    /// The spec, declining elicitation where it answered with the defaults.
    fn declining(&self) -> String {
        self.text
            .replace("elicitation: defaults", "elicitation: decline")
    }

    /// Writes `probe.yaml` anew (a spec changed since the recording).
    fn rewrite(&self, text: &str) {
        write(&self.dir, "probe.yaml", text);
    }

    /// `toolrun COMMAND probe.yaml`, given the secret.
    fn toolrun(&self, command: &str) -> std::process::Command {
        let mut cmd = toolrun();
        cmd.env("PROBE_TOKEN", SECRET).arg(command).arg(&self.spec);
        cmd
    }

    /// `toolrun run probe.yaml --query QUERY --json`, allowed to start the probe.
    fn run(&self, query: &str) -> std::process::Command {
        let mut cmd = self.toolrun("run");
        cmd.args(["--query", query, "--json", "--allow-exec"])
            .arg(python::python());
        cmd
    }

    /// `toolrun call probe.yaml TOOL ARGS...`, allowed to start the probe.
    fn call(&self, tool: &str, args: &[&str]) -> Output {
        run(self
            .toolrun("call")
            .arg(tool)
            .args(args)
            .arg("--allow-exec")
            .arg(python::python()))
    }

    /// The run recorded to `probe.json`; it must succeed.
    fn record(&self, query: &str) -> Output {
        let out = run(self.run(query).arg("--record").arg(&self.fixture));
        out.assert_success();
        out
    }

    fn recorded(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.fixture).unwrap()).unwrap()
    }

    /// `toolrun replay` of `probe.json` (or another recording).
    fn replay(fixture: &Path) -> Output {
        run(toolrun().arg("replay").arg(fixture))
    }

    /// How many times the probe was started.
    fn started(&self) -> usize {
        pid_lines(&self.logs).len()
    }

    /// `toolrun run` of a tool that waits, spawned and returned once the call is in flight
    /// (the tool says it waits).
    fn waiting(&self, args: &[&std::ffi::OsStr]) -> std::process::Child {
        let mut child = self
            .toolrun("run")
            .args(["--query", "wait", "--allow-exec"])
            .arg(python::python())
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let waiting = self.logs.join("waiting");
        for _ in 0..3000 {
            if waiting.exists() || child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(waiting.exists(), "the tool never started");
        child
    }
}

/// Asserts that nothing of these processes is left running: gone, or at most a zombie waiting
/// for the system's reaper.
fn assert_ended(pids: &[Value]) {
    for (i, entry) in pids.iter().enumerate() {
        for role in ["leader", "helper"] {
            let s = state(&entry[role]);
            assert!(
                s == "gone" || s == "Z",
                "{role} {} of probe {i} is {s}",
                entry[role]
            );
        }
    }
}

fn pid_lines(log_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(log_dir.join("pids.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("pid line"))
        .collect()
}

/// The /proc state of a process once it has settled: `gone` once nothing of it is left, `Z` a
/// zombie, else what it still is after a few seconds (a killed process dies when it next runs,
/// which on a loaded machine is not at once).
fn state(pid: &Value) -> String {
    let mut now = proc_state(pid);
    for _ in 0..250 {
        if now == "gone" || now == "Z" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        now = proc_state(pid);
    }
    now
}

fn proc_state(pid: &Value) -> String {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.as_u64().unwrap()));
    match status {
        Err(_) => "gone".into(),
        Ok(s) => s
            .lines()
            .find_map(|l| l.strip_prefix("State:"))
            .map(|s| s.trim().chars().next().unwrap_or('?').to_string())
            .unwrap_or_default(),
    }
}

#[test]
fn a_stdio_server_gets_only_its_environment_keeps_its_stderr_and_replays_without_starting() {
    let turns = r#"          - tool_calls: [{ name: environment, arguments: {} }]
          - tool_calls: [{ name: shout, arguments: { size: 70000 } }]
          - answer: "{{ results[0].result.env.GREETING }} from {{ results[0].result.cwd }}""#;
    let probe = Probe::new("mcp-stdio-run", "environment, shout", turns);
    let events = probe.dir.join("events.jsonl");
    let out = run(probe
        .run("where are you?")
        .env("TOOLRUN_NOT_FOR_SERVERS", "1")
        .env("LOGNAME", "probe-user")
        .arg("--record")
        .arg(&probe.fixture)
        .arg("--events")
        .arg(&events));
    out.assert_success();
    let trace = out.json();
    let root = probe.dir.canonicalize().unwrap();
    // The project root is its working directory; `env:` values were rendered.
    assert_eq!(
        trace["final_output"],
        format!("hello from {}", root.display())
    );
    let env = trace["tool_results"][0]["result"]["env"]
        .as_object()
        .unwrap()
        .clone();
    // Of toolrun's environment only what the SDKs pass on (Python adds LC_CTYPE itself).
    let names: Vec<&str> = env.keys().map(String::as_str).collect();
    for name in &names {
        assert!(
            [
                "HOME",
                "LOGNAME",
                "PATH",
                "SHELL",
                "TERM",
                "USER",
                "LC_CTYPE",
                "PROBE_TOKEN",
                "GREETING"
            ]
            .contains(name),
            "{name} was passed on: {names:?}"
        );
    }
    assert_eq!(env["LOGNAME"], "probe-user");
    assert!(env.contains_key("PATH"));
    // The secret reached the server, and nothing toolrun wrote.
    assert_eq!(env["PROBE_TOKEN"], "***");
    let fixture_text = std::fs::read_to_string(&probe.fixture).unwrap();
    let events_text = std::fs::read_to_string(&events).unwrap();
    for (what, text) in [
        ("stdout", &out.stdout),
        ("stderr", &out.stderr),
        ("fixture", &fixture_text),
        ("events", &events_text),
    ] {
        assert!(!text.contains(SECRET), "the secret leaked into {what}");
    }
    // Its stderr: the last 64 KiB, masked, in the event of its end.
    let ended = support::events_named(&events, "mcp_server_ended");
    assert_eq!(ended.len(), 1, "{ended:#?}");
    let stderr = ended[0]["stderr"].as_str().unwrap();
    assert!(
        stderr.starts_with('[') && stderr.contains("earlier bytes not kept]"),
        "{}",
        &stderr[..80]
    );
    assert!(stderr.len() <= (64 << 10) + 40, "{}", stderr.len());
    assert!(stderr.trim_end().ends_with("token ***"), "{stderr:?}");
    // Every message is an `mcp` exchange written to the program's stdin.
    let recorded: Value = serde_json::from_str(&fixture_text).unwrap();
    let exchanges = recorded["exchanges"].as_array().unwrap();
    let methods: Vec<&str> = exchanges
        .iter()
        .map(|e| {
            assert_eq!(e["kind"], "mcp");
            assert_eq!(e["request"]["method"], "STDIN");
            assert!(e["request"]["url"].as_str().unwrap().starts_with("stdio: "));
            e["request"]["body"]["method"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call"
        ]
    );
    assert_eq!(probe.started(), 1);

    // A replay answers from the fixture and starts nothing, without `--allow-exec`.
    let replayed = Probe::replay(&probe.fixture);
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
    assert_eq!(probe.started(), 1, "the replay started the server");
}

#[test]
fn nothing_starts_unless_the_command_line_allows_the_program() {
    let turns = r#"          - tool_calls: [{ name: echo, arguments: { text: hi } }]
          - answer: "{{ last.result }}""#;
    let probe = Probe::edited("mcp-stdio-allow", "echo", turns, |spec| {
        spec + "tests:\n  - name: offline\n    query: hi\n    expect: { status: ok }\n"
    });
    let python = python::python();
    // `check` never starts the server; a run without the flag refuses, naming it and the line.
    run(&mut probe.toolrun("check")).assert_success();
    let out = run(probe.toolrun("run").args(["--query", "hi"]));
    out.assert_code(1);
    let line = format!("{}:8:14", probe.spec.display());
    assert!(
        out.stderr
            .contains(&format!("--allow-exec {}", python.display()))
            && out.stderr.contains(&line)
            && out.stderr.contains("MCP server `probe`"),
        "{out:?}"
    );
    // Another program allowed is not this one.
    let out = run(probe.toolrun("call").args([
        "echo",
        "--args",
        r#"{"text": "hi"}"#,
        "--allow-exec",
        "sh",
    ]));
    out.assert_code(1);
    assert!(out.stderr.contains("--allow-exec"), "{out:?}");
    assert_eq!(probe.started(), 0, "a refused server started");
    // Offline tests refuse it like the network, and start nothing.
    let tested = run(toolrun()
        .arg("test")
        .arg(&probe.spec)
        .arg("--allow-exec")
        .arg(&python));
    assert!(
        probe.started() == 0,
        "an offline test started the server: {tested:?}"
    );
    assert!(
        tested
            .stdout
            .contains("offline: MCP server `probe` would be started")
            && tested.stdout.contains(&format!(
                "--record missing --allow-exec {}",
                python.display()
            )),
        "{tested:?}"
    );

    // Allowed by a path to the same file (here through a symlink): `call` runs it.
    let link = probe.dir.join("py");
    std::os::unix::fs::symlink(&python, &link).unwrap();
    let out = run(probe
        .toolrun("call")
        .args(["echo", "--args", r#"{"text": "hi there"}"#, "--allow-exec"])
        .arg(&link));
    out.assert_success();
    assert_eq!(out.json(), json!({ "result": "hi there" }));
    assert_eq!(probe.started(), 1);
}

#[test]
fn the_process_group_ends_with_each_run_leaving_nothing_running_and_no_zombie() {
    let turns = r#"          - tool_calls: [{ name: echo, arguments: { text: one } }]
          - answer: done"#;
    // Two cases, one after the other, in one toolrun process: the second server looks at what
    // the first left behind while toolrun still runs (its leader must be reaped, not a zombie).
    let probe = Probe::edited("mcp-stdio-group", "echo", turns, |spec| {
        format!(
            "{spec}tests:\n  - name: first\n    query: one\n    expect: {{ status: ok }}\n  - name: second\n    query: two\n    expect: {{ status: ok }}\n"
        )
    });
    let logs = &probe.logs;
    let out = run(probe
        .toolrun("test")
        .args(["--allow-network", "-j", "1", "--allow-exec"])
        .arg(python::python()));
    out.assert_success();
    let pids = pid_lines(logs);
    assert_eq!(pids.len(), 2, "{pids:?}");
    let second = &pids[1]["leader"];
    let seen: Value = serde_json::from_str(
        &std::fs::read_to_string(logs.join(format!("seen-{second}.json"))).unwrap(),
    )
    .unwrap();
    // The first leader was reaped; its helper (which ignores SIGTERM and stdin) was killed with
    // the group: gone, or at most a zombie waiting for the system's reaper, never running.
    assert_eq!(
        seen[format!("leader {}", pids[0]["leader"])],
        "gone",
        "{seen}"
    );
    let helper = seen[format!("helper {}", pids[0]["helper"])]
        .as_str()
        .unwrap();
    assert!(helper == "gone" || helper == "Z", "{seen}");
    assert_ended(&pids);
}

#[test]
fn a_message_past_the_cap_fails_the_call_and_the_server_keeps_answering() {
    let turns = r#"          - tool_calls: [{ name: big, arguments: { size: 5000000 } }]
          - tool_calls: [{ name: big, arguments: { size: 10 } }]
          - answer: "{{ results[1].result.result }}""#;
    let probe = Probe::new("mcp-stdio-cap", "big", turns);
    let out = run(&mut probe.run("big"));
    out.assert_success();
    let trace = out.json();
    // Cut at 4 MiB as an HTTP reply would be; the next message is read as usual.
    let message = trace["tool_errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server `probe`") && message.contains("more than 4194304 bytes"),
        "{message}"
    );
    assert_eq!(trace["final_output"], "yyyyyyyyyy");
}

#[test]
fn requests_from_the_server_during_a_call_are_answered_at_once() {
    let probe = Probe::new("mcp-stdio-ask", "ask_back", "          - answer: no");
    let out = probe.call("ask_back", &[]);
    out.assert_success();
    // `ping` gets its result, `roots/list` "method not found": the call completes, well before
    // the tool's timeout.
    let result = out.json()["result"].as_str().unwrap().to_string();
    assert!(result.starts_with("pong; roots refused:"), "{result}");
}

#[test]
fn a_crashed_server_names_itself_its_exit_and_its_stderr() {
    let probe = Probe::new("mcp-stdio-crash", "crash", "          - answer: no");
    let out = probe.call("crash", &["--json"]);
    out.assert_code(1);
    let record = out.json();
    let message = record["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server `probe`")
            && message.contains("`tools/call`")
            && message.contains("exit status: 3")
            && message.contains("fatal: the probe crashed on purpose"),
        "{record:#}"
    );
}

/// A spec of the reference servers, on Node 22, allowed by the node path.
fn reference_spec(tools_fs: &str, tools_every: &str, turns: &str) -> String {
    let node = npm::node();
    format!(
        r#"version: 1
name: reference
tools:
  files:
    kind: mcp
    command: ["{node}", "{fs}", ./data]
    timeout: 60s
    tools: [{tools_fs}]
  everything:
    kind: mcp
    command: ["{node}", "{every}", stdio]
    env: {{ PROBE_SETTING: visible }}
    timeout: 60s
    tools: [{tools_every}]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
{turns}
"#,
        node = node.display(),
        fs = npm::package_file("@modelcontextprotocol/server-filesystem/dist/index.js").display(),
        every =
            npm::package_file("@modelcontextprotocol/server-everything/dist/index.js").display(),
    )
}

#[test]
fn the_reference_servers_run_over_stdio_record_and_replay() {
    let dir = support::temp_dir("mcp-stdio-reference");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/list.txt"), "milk, eggs, coffee\n").unwrap();
    let turns = r#"          - tool_calls:
              - { name: read_text_file, arguments: { path: list.txt } }
              - { name: echo, arguments: { message: over stdio } }
              - { name: get-env, arguments: {} }
          - answer: "{{ results[0].result.content }}|{{ results[1].result }}""#;
    let spec_path = write(
        &dir,
        "reference.yaml",
        &reference_spec("read_text_file", "echo, get-env", turns),
    );
    let fixture = dir.join("reference.json");
    let out = run(toolrun()
        .env("TOOLRUN_NOT_FOR_SERVERS", "1")
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "what is on the list?", "--json", "--allow-exec"])
        .arg(npm::node())
        .arg("--record")
        .arg(&fixture));
    out.assert_success();
    let trace = out.json();
    assert_eq!(
        trace["final_output"],
        "milk, eggs, coffee\n|Echo: over stdio"
    );
    // server-everything reports the environment it was given.
    let env_text = trace["tool_results"][2]["result"].to_string();
    assert!(env_text.contains("PROBE_SETTING"), "{env_text}");
    assert!(!env_text.contains("TOOLRUN_NOT_FOR_SERVERS"), "{env_text}");
    // Both servers' exchanges are recorded; the replay needs neither Node nor the flag.
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let sources: std::collections::BTreeSet<&str> = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["everything", "files"].into_iter().collect());
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
    // An unknown tool of a stdio server is named with what the server offers.
    let bad = write(
        &dir,
        "bad.yaml",
        &reference_spec("read_txt_file", "echo", "          - answer: x"),
    );
    let out = run(toolrun()
        .arg("run")
        .arg(&bad)
        .args(["--query", "x", "--allow-exec"])
        .arg(npm::node()));
    out.assert_code(1);
    assert!(
        out.stderr.contains("MCP server `files`")
            && out.stderr.contains("has no tool `read_txt_file`")
            && out.stderr.contains("read_text_file"),
        "{out:?}"
    );
}

#[test]
fn check_reads_command_and_env_offline_and_refuses_shell_lines_and_mixed_transports() {
    let dir = support::temp_dir("mcp-stdio-check");
    let spec = |server: &str| {
        format!(
            "version: 1\nname: c\nsecrets: [TOKEN]\ntools:\n  fs:\n    kind: mcp\n{server}    tools: [read_text_file]\nmodels:\n  m:\n    kind: scripted\n    scripts:\n      - turns:\n          - answer: x\n"
        )
    };
    let good = write(
        &dir,
        "good.yaml",
        &spec("    command: [npx, -y, \"@modelcontextprotocol/server-filesystem\", ./data]\n    env: { API_TOKEN: \"{{ secrets.TOKEN }}\" }\n"),
    );
    // Offline: nothing is started, not even looked up on PATH.
    run(toolrun().arg("check").arg(&good)).assert_success();
    for (server, wanted) in [
        ("    command: \"npx -y server\"\n", "E007"),
        ("    command: [\"{{ secrets.TOKEN }}\"]\n", "not a template"),
        ("    command: []\n", "names no program"),
        (
            "    url: http://127.0.0.1:9/mcp\n    command: [npx]\n",
            "both `url` and `command`",
        ),
        (
            "    url: http://127.0.0.1:9/mcp\n    env: { A: b }\n",
            "`env` is for a stdio server",
        ),
        (
            "    command: [npx]\n    headers: { A: b }\n",
            "`headers` is for a streamable-HTTP server",
        ),
        (
            "    command: [npx]\n    env: { A: \"{{ secrets.NOPE }}\" }\n",
            "NOPE",
        ),
        ("", "a stdio server (`command:"),
    ] {
        let path = write(&dir, "bad.yaml", &spec(server));
        let out = run(toolrun().arg("check").arg(&path));
        out.assert_code(1);
        assert!(
            out.stdout.contains(wanted) || out.stderr.contains(wanted),
            "{server}: {out:?}"
        );
    }
}

#[test]
fn every_tool_of_a_server_is_taken_with_a_star_listed_at_run_start_and_replayed_from_the_recording()
{
    let dir = support::temp_dir("mcp-stdio-star");
    let node = npm::node();
    let every = npm::package_file("@modelcontextprotocol/server-everything/dist/index.js");
    let spec = format!(
        r#"version: 1
name: star
tools:
  everything:
    kind: mcp
    command: ["{node}", "{every}", stdio]
    timeout: 60s
    max_calls: 5
    tools: "*"
policy:
  confirm: [get-env]
models:
  scripted:
    kind: scripted
    scripts:
      - turns:
          - tool_calls:
              - {{ name: echo, arguments: {{ message: hi }} }}
              - {{ name: get-sum, arguments: {{ a: 2, b: 3 }} }}
          - answer: "{{{{ results[0].result }}}} / {{{{ results[1].result }}}}"
tests:
  - name: sums
    query: add
    fixture: sums.json
    expect: {{ status: ok, output_contains: "is 5" }}
"#,
        node = node.display(),
        every = every.display(),
    );
    let spec_path = write(&dir, "star.yaml", &spec);
    // Offline, `check` cannot know the tools: the names are warnings, not errors.
    let checked = run(toolrun().arg("check").arg(&spec_path));
    checked.assert_success();
    assert_eq!(
        checked.stderr.matches("warning[W113]").count(),
        3,
        "{checked:?}"
    );
    assert!(
        checked
            .stderr
            .contains("tool `get-sum` in a scripted tool call"),
        "{checked:?}"
    );
    let listed = run(toolrun().arg("tools").arg(&spec_path));
    listed.assert_success();
    assert_eq!(listed.stdout.trim(), "[]");
    assert!(
        listed.stderr.contains(
            "MCP server `everything` (`tools: \"*\"`) are known only when a run lists them"
        ),
        "{listed:?}"
    );
    let explained = run(toolrun().args(["explain", "W113"]));
    explained.assert_success();
    assert!(explained.stdout.contains("tools: \"*\""), "{explained:?}");

    let fixture = dir.join("star.json");
    let events = dir.join("events.jsonl");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "add", "--json", "--allow-exec"])
        .arg(&node)
        .arg("--record")
        .arg(&fixture)
        .arg("--events")
        .arg(&events));
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["final_output"], "Echo: hi / The sum of 2 and 3 is 5.");
    // The listing found at run start is in the recording (and in the connection event).
    let connected = support::events_named(&events, "mcp_connected");
    let listed = connected[0]["tools"].as_array().unwrap();
    assert!(
        listed.len() > 5 && listed.contains(&json!("get-sum")),
        "{connected:?}"
    );
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    assert!(recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["request"]["body"]["method"] == "tools/list"));
    // The replay takes the recorded list: no Node, no flag, nothing started.
    let replayed = run(toolrun().arg("replay").arg(&fixture));
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );

    // A test records its fixture live, then replays it offline with the recorded list.
    let recorded = run(toolrun()
        .arg("test")
        .arg(&spec_path)
        .args(["--record", "missing", "--allow-exec"])
        .arg(&node));
    recorded.assert_success();
    let offline = run(toolrun().arg("test").arg(&spec_path));
    offline.assert_success();
    assert!(offline.stdout.contains("1 passed"), "{offline:?}");

    // `call` finds a listed tool; the entry's keys and the policy apply to it.
    let out = run(toolrun()
        .arg("call")
        .arg(&spec_path)
        .args(["get-sum", "--args", r#"{"a": 1, "b": 2}"#, "--allow-exec"])
        .arg(&node));
    out.assert_success();
    assert_eq!(out.stdout.trim(), "The sum of 1 and 2 is 3.");
    let out = run(toolrun()
        .arg("call")
        .arg(&spec_path)
        .args(["get-env", "--allow-exec"])
        .arg(&node));
    out.assert_code(3);
    // A name no server lists names the server and what it does list.
    let out = run(toolrun()
        .arg("call")
        .arg(&spec_path)
        .args(["get-sun", "--allow-exec"])
        .arg(&node));
    out.assert_code(1);
    assert!(
        out.stderr.contains("MCP server `everything`") && out.stderr.contains("`get-sum`"),
        "{out:?}"
    );
}

#[test]
fn an_interrupted_run_ends_the_server_and_what_it_started() {
    let turns = r#"          - tool_calls: [{ name: wait, arguments: {} }]
          - answer: never"#;
    let probe = Probe::new("mcp-stdio-interrupt", "wait", turns);
    let trace = probe.dir.join("trace.json");
    let mut child = probe.waiting(&["--trace".as_ref(), trace.as_ref()]);
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(written["stop_reason"], "interrupted");
    // toolrun has exited: the server and its helper were ended with it, not left running.
    assert_ended(&pid_lines(&probe.logs));
}

#[test]
fn serve_is_a_gateway_to_every_tool_of_a_stdio_server_and_ends_it_with_the_session() {
    let dir = support::temp_dir("mcp-stdio-serve");
    let logs = dir.join("logs");
    let spec_path = write(
        &dir,
        "gateway.yaml",
        &probe_spec(&logs, "", "          - answer: unused").replace("tools: []", "tools: \"*\""),
    );
    // The official Python client drives `toolrun serve` over stdio, which drives the probe.
    let plan = json!([{ "name": "echo", "arguments": { "text": "through the gateway" } }]);
    let mut cmd = std::process::Command::new(python::python());
    let fixture = dir.join("served.json");
    cmd.arg(python::script("client.py"))
        .args(["stdio", env!("CARGO_BIN_EXE_toolrun"), "serve"])
        .arg(&spec_path)
        .arg("--allow-exec")
        .arg(python::python())
        .arg("--record")
        .arg(&fixture)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PROBE_TOKEN", SECRET);
    let out = support::run_with_stdin(&mut cmd, &plan.to_string());
    assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
    let doc = out.json();
    let mut names: Vec<&str> = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ask_back",
            "ask_name",
            "ask_then_crash",
            "ask_then_wait",
            "big",
            "crash",
            "echo",
            "environment",
            "fail",
            "shout",
            "wait",
            "wait_to_be_cancelled",
            "was_cancelled"
        ]
    );
    assert_eq!(
        doc["calls"][0]["structuredContent"]["result"],
        "through the gateway"
    );
    // `serve` has exited with its client: every probe it started (one to list the tools when it
    // started, one for the client's session: upstream sessions are per client) and their
    // helpers went with it.
    let pids = pid_lines(&logs);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_ended(&pids);
    // The recorded session replays, its tools listed from the recording as `serve` listed them
    // when it started; nothing starts.
    let replayed = Probe::replay(&fixture);
    replayed.assert_success();
    assert_eq!(pid_lines(&logs).len(), 2, "the replay started the server");
}

/// Settles to `gone` once the process has ended and been reaped, or says what it still is.
fn gone_within(pid: &Value) -> String {
    let mut now = proc_state(pid);
    for _ in 0..1500 {
        if now == "gone" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        now = proc_state(pid);
    }
    now
}

/// A gateway over HTTP starts a stdio server for each client session, and ends it (its
/// process group, reaped) when that client session ends, while `serve` keeps serving others.
#[test]
fn a_gateway_over_http_ends_each_client_sessions_stdio_server_with_the_session() {
    let dir = support::temp_dir("mcp-stdio-serve-http");
    let logs = dir.join("logs");
    let spec_path = write(
        &dir,
        "gateway.yaml",
        &probe_spec(&logs, "", "          - answer: unused").replace("tools: []", "tools: \"*\""),
    );
    let mut serve = toolrun()
        .env("PROBE_TOKEN", SECRET)
        .arg("serve")
        .arg(&spec_path)
        .args(["--http", "127.0.0.1:0", "--allow-exec"])
        .arg(python::python())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolrun serve");
    let (url, _stderr) = support::served_url(&mut serve);
    let plan = json!([{ "name": "echo", "arguments": { "text": "through the gateway" } }]);
    for _ in 0..2 {
        let mut cmd = std::process::Command::new(python::python());
        cmd.arg(python::script("client.py")).args(["http", &url]);
        let out = support::run_with_stdin(&mut cmd, &plan.to_string());
        assert_eq!(out.code, 0, "the MCP client failed\n{out:?}");
        assert_eq!(
            out.json()["calls"][0]["structuredContent"]["result"],
            "through the gateway"
        );
    }
    // One probe listed the tools when `serve` started; one served each client session, and
    // ended with it (the client's DELETE) while `serve` runs on.
    let pids = pid_lines(&logs);
    assert_eq!(pids.len(), 3, "{pids:?}");
    for (i, p) in pids.iter().enumerate().skip(1) {
        for role in ["leader", "helper"] {
            assert_eq!(gone_within(&p[role]), "gone", "{role} of probe {i}");
        }
    }
    assert!(serve.try_wait().unwrap().is_none(), "serve ended early");
    let first = proc_state(&pids[0]["leader"]);
    assert!(
        first != "gone" && first != "Z",
        "the first probe is {first}"
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    let _ = serve.wait();
    for role in ["leader", "helper"] {
        let s = state(&pids[0][role]);
        assert!(s == "gone" || s == "Z", "{role} of the first probe is {s}");
    }
}

/// What a stdio server sends during a call is reported as over HTTP: its progress and log
/// notifications are `tool_progress` and `mcp_log` events, and the requests it sent (answered
/// at once) `mcp_server_request` events; the requests are recorded, and a replay reports them
/// again without starting anything.
#[test]
fn a_stdio_servers_progress_logs_and_requests_are_events_and_recorded() {
    let turns = r#"          - tool_calls: [{ name: ask_back, arguments: {} }]
          - answer: "{{ results[0].result.result }}""#;
    let probe = Probe::new("mcp-stdio-notes", "ask_back", turns);
    let events = probe.dir.join("events.jsonl");
    let out = run(probe
        .run("ask back")
        .arg("--record")
        .arg(&probe.fixture)
        .arg("--events")
        .arg(&events));
    out.assert_success();
    let answer = out.json()["final_output"].as_str().unwrap().to_string();
    assert!(answer.starts_with("pong; roots refused:"), "{answer}");
    let progress = support::events_named(&events, "tool_progress");
    assert_eq!(progress.len(), 1, "{progress:#?}");
    assert_eq!(progress[0]["server"], "probe");
    assert_eq!(progress[0]["tool"], "ask_back");
    assert_eq!(progress[0]["progress"], 1.0);
    assert_eq!(progress[0]["total"], 2.0);
    assert_eq!(progress[0]["message"], "asking back");
    let logged = support::events_named(&events, "mcp_log");
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert_eq!(logged[0]["level"], "info");
    assert_eq!(logged[0]["data"], "the probe asks back");
    let asked = support::events_named(&events, "mcp_server_request");
    let methods: Vec<&str> = asked
        .iter()
        .map(|e| e["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["ping", "roots/list"], "{asked:#?}");
    assert_eq!(asked[0]["answer"], json!({}));
    assert_eq!(asked[1]["answer"]["code"], -32601);
    assert!(asked.iter().all(|e| e["tool"] == "ask_back"));
    // The call's recorded answer carries the requests before the response.
    let recorded = probe.recorded();
    let call = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["request"]["body"]["method"] == "tools/call")
        .expect("the call is recorded");
    let body = &call["response"]["body"];
    let kept: Vec<&str> = body
        .as_array()
        .unwrap_or_else(|| panic!("{body:#}"))
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(kept, ["ping", "roots/list"], "{body:#}");
    let replayed = Probe::replay(&probe.fixture);
    replayed.assert_success();
    assert!(
        replayed.stdout.contains("1 passed, 0 failed"),
        "{replayed:?}"
    );
    assert_eq!(probe.started(), 1, "the replay started the server");
}

/// toolrun killed outright (SIGKILL: no chance to end its servers) still takes its stdio server
/// with it on Linux: the server was started with a parent-death signal (SIGTERM). What the
/// server started itself is not reached by it: the probe's helper, which ignores SIGTERM and
/// stdin, outlives toolrun (as a server launched through `npx` would, see the README).
#[cfg(target_os = "linux")]
#[test]
fn a_killed_toolrun_takes_its_stdio_server_with_it() {
    let turns = r#"          - tool_calls: [{ name: wait, arguments: {} }]
          - answer: never"#;
    let probe = Probe::new("mcp-stdio-killed", "wait", turns);
    // The call is in flight (the server busy in it, not reading stdin) once the tool says so.
    let mut child = probe.waiting(&[]);
    child.kill().unwrap();
    child.wait().unwrap();
    let pids = pid_lines(&probe.logs);
    assert_eq!(pids.len(), 1, "{pids:?}");
    let leader = state(&pids[0]["leader"]);
    let helper = &pids[0]["helper"];
    let helper_state = proc_state(helper);
    // Not left running, whatever the assertions below say.
    let alive = |s: &str| s != "gone" && s != "Z";
    for (pid, s) in [(helper, &helper_state), (&pids[0]["leader"], &leader)] {
        if !alive(s) {
            continue;
        }
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        leader == "gone" || leader == "Z",
        "the server outlived toolrun: {leader}"
    );
    assert!(
        helper_state != "gone" && helper_state != "Z",
        "the helper is {helper_state}: the parent-death signal was documented not to reach it"
    );
}

/// The answers toolrun writes to a stdio server (here an elicitation answer) are recorded, and
/// a replay, which answers the recorded requests itself, compares its answers with them: the
/// same spec replays, a spec whose `elicitation:` changed since fails, naming the request.
#[test]
fn a_replay_recomputes_the_answers_written_to_a_stdio_server_and_fails_when_they_differ() {
    let probe = Probe::asking("mcp-stdio-answers", "ask_name", ASK_NAME, "30s");
    let out = probe.record("ask");
    assert_eq!(out.json()["final_output"], "accept: Ada", "{out:?}");
    let recorded = probe.recorded();
    let answers: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["request"]["body"])
        .filter(|b| b.get("result").is_some())
        .collect();
    assert_eq!(answers.len(), 1, "{recorded:#}");
    assert_eq!(
        answers[0]["result"],
        json!({ "action": "accept", "content": { "name": "Ada" } })
    );
    Probe::replay(&probe.fixture).assert_success();
    // The spec now declines: the replay's answer is not the recorded one.
    probe.rewrite(&probe.declining());
    let replayed = Probe::replay(&probe.fixture);
    replayed.assert_code(1);
    assert!(
        replayed.stdout.contains("MCP server `probe`")
            && replayed
                .stdout
                .contains("sent `elicitation/create` during `ask_name`")
            // The call's error, inside the trace's diff (so its quotes escaped).
            && replayed.stdout.contains(r#"answers it with {\"action\":\"decline\"}"#)
            && replayed
                .stdout
                .contains(r#"/body/result/action: expected "accept", got "decline""#),
        "{replayed:?}"
    );
    assert_eq!(probe.started(), 1, "the replay started the server");
}

/// Two calls at once to one stdio server (the reference server-everything): each call's
/// `notifications/progress` reach that call, by the `progressToken` toolrun gave it, though
/// both come on the one stdout.
#[test]
fn concurrent_calls_to_one_stdio_server_each_get_their_own_progress() {
    let dir = support::temp_dir("mcp-stdio-concurrent");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let turns = r#"          - tool_calls:
              - { name: trigger-long-running-operation, arguments: { duration: 2, steps: 2 } }
              - { name: trigger-long-running-operation, arguments: { duration: 3, steps: 3 } }
          - answer: done"#;
    let spec_path = write(
        &dir,
        "reference.yaml",
        &reference_spec("read_text_file", "trigger-long-running-operation", turns),
    );
    let events = dir.join("events.jsonl");
    let out = run(toolrun()
        .arg("run")
        .arg(&spec_path)
        .args(["--query", "work twice", "--json", "--allow-exec"])
        .arg(npm::node())
        .arg("--events")
        .arg(&events));
    out.assert_success();
    let trace = out.json();
    let steps_of = |id: &Value| -> u64 {
        let call = trace["tool_results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| &r["id"] == id)
            .unwrap_or_else(|| panic!("no call {id}"));
        call["arguments"]["steps"].as_u64().unwrap()
    };
    let progress = support::events_named(&events, "tool_progress");
    let mut seen: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    for p in &progress {
        let steps = steps_of(&p["id"]);
        assert_eq!(p["total"].as_f64(), Some(steps as f64), "{progress:#?}");
        seen.entry(steps)
            .or_default()
            .push(p["progress"].as_f64().unwrap());
    }
    assert_eq!(seen[&2], [1.0, 2.0], "{progress:#?}");
    assert_eq!(seen[&3], [1.0, 2.0, 3.0], "{progress:#?}");
}

/// Runs `cmd` with its stderr on a pseudo-terminal (200 columns), as a person at a terminal
/// would: returns its exit code, its stdout, and what it drew on the terminal, control
/// sequences removed.
#[cfg(target_os = "linux")]
fn on_terminal(cmd: &mut std::process::Command) -> (Option<i32>, String, String) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty fills the two descriptors, owned by the Files made of them just below;
    // they close on exec, so only the stderr made of the slave reaches toolrun.
    let (mut master, slave) = unsafe {
        assert_eq!(
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size
            ),
            0
        );
        libc::fcntl(master, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::fcntl(slave, libc::F_SETFD, libc::FD_CLOEXEC);
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let child = cmd
        // A terminal's session names its type; without one the bar is not drawn.
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(slave)
        .spawn()
        .unwrap();
    // The command keeps its copy of the slave until it is dropped or given another stderr:
    // until then the terminal never reports that toolrun closed it.
    cmd.stderr(std::process::Stdio::null());
    let drawn = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every copy of the slave is closed: toolrun has exited.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let out = child.wait_with_output().unwrap();
    let drawn = String::from_utf8_lossy(&drawn.join().unwrap()).into_owned();
    let mut plain = String::new();
    let mut chars = drawn.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then a final letter.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else if c != '\r' {
            plain.push(c);
        }
    }
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        plain,
    )
}

/// A remote call's progress moves `toolrun test`'s progress bar, on a terminal: the bar shows
/// the tool and how far it is (`2/3`), from server-everything's `notifications/progress` over
/// stdio. Without a terminal nothing is drawn, and the `--events` lines are the same JSON lines.
#[cfg(target_os = "linux")]
#[test]
fn a_remote_calls_progress_moves_the_test_progress_bar_on_a_terminal() {
    let dir = support::temp_dir("mcp-stdio-bar");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let turns = r#"          - tool_calls:
              - { name: trigger-long-running-operation, arguments: { duration: 3, steps: 3 } }
          - answer: done"#;
    let spec = reference_spec("read_text_file", "trigger-long-running-operation", turns);
    let spec =
        format!("{spec}tests:\n  - name: slow\n    query: work\n    expect: {{ status: ok }}\n");
    let spec_path = write(&dir, "reference.yaml", &spec);
    let test = |events: &Path| {
        let mut cmd = toolrun();
        cmd.arg("test")
            .arg(&spec_path)
            .args(["--allow-network", "--allow-exec"])
            .arg(npm::node())
            .arg("--events")
            .arg(events);
        cmd
    };
    let events = dir.join("terminal.jsonl");
    let (code, stdout, drawn) = on_terminal(&mut test(&events));
    assert_eq!(code, Some(0), "{stdout}\n{drawn}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
    for step in ["1/3", "2/3"] {
        assert!(
            drawn.contains(&format!("trigger-long-running-operation {step}")),
            "the bar never showed step {step}:\n{drawn}"
        );
    }
    // The counts move as tests end (the pass was once counted only after every test ran).
    assert!(drawn.contains("1/1 tests  1 passed"), "{drawn}");
    assert_eq!(support::events_named(&events, "tool_progress").len(), 3);
    // No terminal: no bar, and the same events.
    let piped = dir.join("piped.jsonl");
    let out = run(&mut test(&piped));
    out.assert_success();
    assert!(
        !out.stderr.contains("trigger-long-running-operation"),
        "{out:?}"
    );
    assert!(
        !out.stderr.contains('\u{1b}') && !out.stderr.contains('\r'),
        "{out:?}"
    );
    assert_eq!(support::events_named(&piped, "tool_progress").len(), 3);
}

/// Two calls at once that each ask the client something (elicitation) over one stdio server:
/// both are answered, each request and answer is recorded with a reply, and the replay answers
/// them again from the recording and passes.
#[test]
fn concurrent_calls_asking_back_over_stdio_record_and_replay() {
    let turns = r#"          - tool_calls:
              - { name: ask_name, arguments: {} }
              - { name: ask_name, arguments: {} }
          - answer: "{{ results[0].result.result }}|{{ results[1].result.result }}""#;
    let probe = Probe::asking("mcp-stdio-concurrent-ask", "ask_name", turns, "30s");
    let events = probe.dir.join("events.jsonl");
    let out = run(probe
        .run("ask twice")
        .arg("--record")
        .arg(&probe.fixture)
        .arg("--events")
        .arg(&events));
    out.assert_success();
    assert_eq!(out.json()["final_output"], "accept: Ada|accept: Ada");
    let asked = support::events_named(&events, "mcp_server_request");
    assert_eq!(asked.len(), 2, "{asked:#?}");
    // Each names the call it went with.
    let calls = ["call_1", "call_2"];
    assert!(
        asked
            .iter()
            .all(|e| calls.contains(&e["id"].as_str().unwrap_or(""))),
        "{asked:#?}"
    );
    let recorded = probe.recorded();
    let bodies: Vec<&Value> = recorded["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["request"]["body"])
        .collect();
    assert_eq!(
        bodies.iter().filter(|b| b.get("result").is_some()).count(),
        2,
        "{recorded:#}"
    );
    Probe::replay(&probe.fixture).assert_success();
    assert_eq!(probe.started(), 1, "the replay started the server");
}

/// A call given up on (its timeout) after the server asked something: the request and its
/// recorded answer go with the server's next reply, so the replay answers it there and passes
/// (no recorded answer is left unrequested).
#[test]
fn a_request_about_a_call_given_up_on_is_replayed_with_the_next_reply() {
    let turns = r#"          - tool_calls: [{ name: ask_then_wait, arguments: {} }]
          - tool_calls: [{ name: echo, arguments: { text: after } }]
          - answer: "{{ results[1].result.result }}""#;
    // The call waits (a minute) past its 20 s; the Python server's start (`initialize`), which
    // takes seconds on a loaded machine, has a bound of its own that only catches a hang.
    let timeout = "20s\n    startup_timeout: 60s";
    let probe = Probe::asking("mcp-stdio-given-up", "ask_then_wait, echo", turns, timeout);
    let out = probe.record("ask then wait");
    let trace = out.json();
    assert_eq!(trace["tool_errors"][0]["kind"], "timeout", "{out:?}");
    assert_eq!(trace["final_output"], "after", "{out:?}");
    Probe::replay(&probe.fixture).assert_success();
}

/// A server that asks something and then crashes: the call fails naming the crash, and the
/// replay gives the same failure; the answer written to the crashed server went with no reply,
/// so none is recorded to be left unrequested.
#[test]
fn a_server_that_asks_then_crashes_records_and_replays() {
    let turns = r#"          - tool_calls: [{ name: ask_then_crash, arguments: {} }]
          - answer: "{{ results[0].status }}""#;
    let probe = Probe::asking("mcp-stdio-ask-crash", "ask_then_crash", turns, "30s");
    let out = probe.record("ask then crash");
    let trace = out.json();
    let error = trace["tool_errors"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("crashed after asking"), "{out:?}");
    Probe::replay(&probe.fixture).assert_success();
}

/// A fixture recorded before the answers written to a stdio server were recorded (its
/// exchanges have the server's requests, and no answer to them) still replays: the
/// contract replays fixtures across versions. Answers are compared only where the recording
/// has them.
#[test]
fn a_fixture_recorded_before_answers_were_recorded_still_replays() {
    let probe = Probe::asking("mcp-stdio-old-answers", "ask_name", ASK_NAME, "30s");
    let out = probe.record("ask");
    assert_eq!(out.json()["final_output"], "accept: Ada", "{out:?}");
    // The older shape: the same recording without the answer exchanges.
    let mut recorded = probe.recorded();
    let exchanges = recorded["exchanges"].as_array_mut().unwrap();
    let before = exchanges.len();
    exchanges.retain(|e| {
        let body = &e["request"]["body"];
        body.get("method").is_some() || body.get("result").is_none() && body.get("error").is_none()
    });
    assert_eq!(exchanges.len(), before - 1, "{recorded:#}");
    let old = probe.dir.join("old.json");
    std::fs::write(&old, serde_json::to_string_pretty(&recorded).unwrap()).unwrap();
    Probe::replay(&old).assert_success();
    // Even with a spec that now answers otherwise: the old recording has nothing to compare.
    probe.rewrite(&probe.declining());
    Probe::replay(&old).assert_success();
    assert_eq!(probe.started(), 1, "the replay started the server");

    // Added to (`--record-mode new`, one more call that asks, live): the grown recording has an
    // answer to every request, the old one's as given now, and replays.
    let twice = ASK_NAME.replace(
        "          - answer:",
        "          - tool_calls: [{ name: ask_name, arguments: {} }]\n          - answer:",
    );
    probe.rewrite(&probe.text.replace(ASK_NAME, &twice));
    let out = run(probe
        .run("ask")
        .arg("--record")
        .arg(&old)
        .args(["--record-mode", "new"]));
    out.assert_success();
    assert_eq!(out.json()["tool_errors"], json!([]), "{out:?}");
    let grown: Value = serde_json::from_str(&std::fs::read_to_string(&old).unwrap()).unwrap();
    let answers = grown["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["request"]["body"].get("result").is_some())
        .count();
    assert_eq!(answers, 2, "{grown:#}");
    Probe::replay(&old).assert_success();
}

/// A stdio server's stderr is kept to its last 64 KiB, masked: where that cut falls inside a
/// secret the server wrote, no part of the secret shows (its end used to open the kept text).
#[test]
fn a_secret_cut_by_the_stderr_cap_shows_none_of_it() {
    // The token line, then enough that the last 64 KiB begin with the secret's last 6 bytes.
    let after = (64 << 10) - 8;
    let turns = format!(
        "          - tool_calls: [{{ name: shout, arguments: {{ size: 10, after: {after} }} }}]\n          - answer: done"
    );
    let probe = Probe::new("mcp-stdio-stderr-cut", "shout", &turns);
    let events = probe.dir.join("events.jsonl");
    let out = run(probe.run("shout").arg("--events").arg(&events));
    out.assert_success();
    let ended = support::events_named(&events, "mcp_server_ended");
    let stderr = ended[0]["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("earlier bytes not kept]"),
        "{}",
        &stderr[..80]
    );
    assert!(stderr.trim_end().ends_with("yyy"), "{stderr:?}");
    let tail = &SECRET[SECRET.len() - 6..];
    assert!(!stderr.contains(tail), "{}", &stderr[..80]);
}

/// A call past its timeout is cancelled over stdio as over HTTP: the server gets
/// `notifications/cancelled` for it (its handler stops), and an `mcp_cancelled` event says so.
#[test]
fn a_call_past_its_timeout_is_cancelled_on_the_server() {
    let turns = r#"          - tool_calls: [{ name: wait_to_be_cancelled, arguments: {} }]
          - tool_calls: [{ name: was_cancelled, arguments: {} }]
          - answer: "{{ results[1].result.result }}""#;
    let probe = Probe::edited(
        "mcp-stdio-cancel",
        "wait_to_be_cancelled, was_cancelled",
        turns,
        // The call waits a minute unless cancelled, so it times out; the Python server's start
        // (`initialize`) has a bound of its own that only catches a hang on a loaded machine.
        |text| {
            text.replace(
                "    timeout: 30s\n",
                "    timeout: 20s\n    startup_timeout: 60s\n",
            )
        },
    );
    let events = probe.dir.join("events.jsonl");
    let out = run(probe.run("wait").arg("--events").arg(&events));
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["tool_errors"][0]["kind"], "timeout", "{out:?}");
    // The tool's own `timeout:`, not what was left of it when the request went out.
    assert!(
        trace["tool_errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("within the tool's `timeout:` of 20s"),
        "{out:?}"
    );
    assert_eq!(trace["final_output"], "cancelled", "{out:?}");
    let cancelled = support::events_named(&events, "mcp_cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:#?}");
    assert_eq!(cancelled[0]["server"], "probe");
}

/// `--record-mode new` adds a live call to a recording whose session (the handshake, the
/// listing) replays: the server toolrun starts for that call gets its own `initialize` first
/// (the official SDK refuses a call before it), unrecorded, and the grown fixture replays.
#[test]
fn a_call_added_to_a_recording_goes_to_an_initialized_server() {
    let one = r#"          - tool_calls: [{ name: echo, arguments: { text: one } }]
          - answer: "{{ last.result.result }}""#;
    let probe = Probe::new("mcp-stdio-record-new", "echo", one);
    assert_eq!(probe.record("echo").json()["final_output"], "one");
    let two = r#"          - tool_calls: [{ name: echo, arguments: { text: one } }]
          - tool_calls: [{ name: echo, arguments: { text: two } }]
          - answer: "{{ last.result.result }}""#;
    probe.rewrite(&probe.text.replace(one, two));
    let out = run(probe
        .run("echo")
        .arg("--record")
        .arg(&probe.fixture)
        .args(["--record-mode", "new"]));
    out.assert_success();
    let trace = out.json();
    assert_eq!(trace["final_output"], "two", "{out:?}");
    assert_eq!(trace["tool_errors"], json!([]), "{out:?}");
    let methods: Vec<Value> = probe.recorded()["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["request"]["body"]["method"].clone())
        .collect();
    // One handshake, the one recorded first.
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call"
        ]
    );
    Probe::replay(&probe.fixture).assert_success();
    assert_eq!(probe.started(), 2);
}

/// `call` of a tool of a `tools: "*"` stdio server, without `--allow-exec`: the error says the
/// server's program needs the flag (the tool is known only once the server lists it), not that
/// there is no such tool; nothing starts.
#[test]
fn calling_a_star_tool_without_allow_exec_names_the_flag_not_an_unknown_tool() {
    let probe = Probe::edited(
        "mcp-stdio-star-call",
        "",
        "          - answer: no",
        |text| text.replace("tools: []", "tools: \"*\""),
    );
    let out = run(probe
        .toolrun("call")
        .args(["echo", "--args", r#"{"text": "hi"}"#]));
    out.assert_code(1);
    assert!(
        out.stderr.contains("MCP server `probe`")
            && out.stderr.contains(&format!(
                "add `--allow-exec {}`",
                python::python().display()
            ))
            && !out.stderr.contains("there is no tool named"),
        "{out:?}"
    );
    assert_eq!(probe.started(), 0, "a refused server started");
}

/// A stdio server that answers a call under an id no request has fails that call at once,
/// saying so, as over HTTP: not a wait until the tool's timeout blamed on the server's speed.
#[test]
fn an_answer_under_an_id_never_sent_fails_the_call() {
    let dir = support::temp_dir("mcp-stdio-wrong-id");
    let spec = write(
        &dir,
        "wrong.yaml",
        &format!(
            "version: 1\nname: wrong\ntools:\n  wrong:\n    kind: mcp\n    description: Answers under the wrong id.\n    command: [\"{}\", \"{}\"]\n    timeout: 60s\n    tools: [echo]\n",
            python::python().display(),
            python::script("wrong_id_server.py").display()
        ),
    );
    let out = run(toolrun()
        .arg("call")
        .arg(&spec)
        .args(["echo", "--json", "--allow-exec"])
        .arg(python::python()));
    out.assert_code(1);
    let error = &out.json()["error"];
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("MCP server `wrong`")
            && message.contains("a response for id 999")
            && message.contains("its own id"),
        "{out:?}"
    );
    assert_ne!(error["kind"], "timeout", "{out:?}");
}
