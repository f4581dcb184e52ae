//! `toolrun import openapi` against a real framework's generated document: a FastAPI app
//! (`tests/fastapi/app.py`; PyPI `fastapi` and `uvicorn`, pinned in
//! `tests/fastapi/requirements.txt`, in a venv made by `tests/mcp/setup.sh`) started on
//! 127.0.0.1. Its own `/openapi.json` is imported, checked unchanged, and a scripted run calls the
//! imported tools against the live app: path, query and header parameters and a JSON body.

#[path = "mcp/python.rs"]
mod python;
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn fastapi_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| python::venv("fastapi-venv", "tests/fastapi/requirements.txt"))
        .clone()
}

/// The app on a free port of 127.0.0.1, stopped when dropped.
struct App {
    child: Child,
    port: u16,
}

impl App {
    fn start() -> App {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fastapi/app.py");
        let mut child = Command::new(fastapi_python())
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the FastAPI app");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the app prints its port");
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        App { child, port }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A plain HTTP/1.0 GET; uvicorn may still be starting, so connecting is retried briefly.
    fn get(&self, path: &str) -> String {
        let mut stream = None;
        for _ in 0..100 {
            match std::net::TcpStream::connect(("127.0.0.1", self.port)) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let mut stream = stream.expect("the app accepts connections");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        let (head, body) = response.split_once("\r\n\r\n").expect("a response");
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
            "{head}"
        );
        body.to_string()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn toolrun(args: &[&str]) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.args(args);
    support::run(&mut cmd)
}

/// FastAPI names operations `function_path_method`; toolrun makes them identifiers.
const READ: &str = "read_item_items_item_id_get";
const LIST: &str = "list_items_items_get";
const CREATE: &str = "create_item_items_post";
const SEARCH: &str = "search_search_category_items_get";

#[test]
fn a_fastapi_apps_own_document_imports_checks_and_runs_against_the_app() {
    let app = App::start();
    let dir = support::temp_dir("openapi-fastapi");
    let document = support::write(&dir, "openapi.json", &app.get("/openapi.json"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&document).expect("read"))
        .expect("FastAPI serves JSON");
    assert_eq!(doc["openapi"], "3.1.0", "FastAPI writes OpenAPI 3.1");

    let imported = toolrun(&[
        "import",
        "openapi",
        document.to_str().expect("utf-8"),
        "--base-url",
        &app.base_url(),
    ]);
    imported.assert_success();
    let spec_text = &imported.stdout;
    for name in [READ, LIST, CREATE, SEARCH] {
        assert!(
            spec_text.contains(&format!("\n  {name}:\n")),
            "{name}\n{spec_text}"
        );
    }
    // Pydantic's `Optional[str]` is 3.1's `anyOf` with a `null` type; it is kept as it is.
    assert!(
        spec_text.contains(r#"{"anyOf":[{"type":"string"},{"type":"null"}]"#),
        "{spec_text}"
    );
    let spec = support::write(&dir, "inventory.yaml", spec_text);
    toolrun(&["check", "--deny-warnings", spec.to_str().expect("utf-8")]).assert_success();

    // A scripted model calls every imported tool against the live app.
    let script = format!(
        "\nmodels:\n  scripted:\n    kind: scripted\n    scripts:\n      - turns:\n\
         \x20         - tool_calls:\n\
         \x20             - {{ name: {READ}, arguments: {{ item_id: 2 }} }}\n\
         \x20             - {{ name: {READ}, arguments: {{ item_id: 99 }} }}\n\
         \x20             - {{ name: {LIST}, arguments: {{ tag: tools, max_price: 5 }} }}\n\
         \x20             - {{ name: {SEARCH}, arguments: {{ category: \"hand tools\", q: mer }} }}\n\
         \x20         - tool_calls:\n\
         \x20             - {{ name: {CREATE}, arguments: {{ x_request_id: r-17, body: {{ name: \"saw 50%\", price: 9.5, tags: [tools] }} }} }}\n\
         \x20         - tool_calls:\n\
         \x20             - {{ name: {READ}, arguments: {{ item_id: \"{{{{ last.result.id }}}}\" }} }}\n\
         \x20         - answer: \"created {{{{ last.result.name }}}} for {{{{ last.result.price }}}}\"\n"
    );
    let spec = support::write(&dir, "inventory_run.yaml", &format!("{spec_text}{script}"));
    toolrun(&["check", spec.to_str().expect("utf-8")]).assert_success();
    let run = toolrun(&[
        "run",
        spec.to_str().expect("utf-8"),
        "--query",
        "stock",
        "--json",
        "--approve",
        CREATE,
    ]);
    run.assert_success();
    let trace = run.json();
    assert_eq!(trace["status"], "ok", "{trace:#}");
    assert_eq!(
        trace["final_output"], "created saw 50% for 9.5",
        "{trace:#}"
    );
    let results = trace["tool_results"].as_array().expect("results");
    let result = |i: usize| &results[i]["result"];
    // Path parameter.
    assert_eq!(result(0)["name"], "nails (100)", "{trace:#}");
    // A FastAPI 404 is the tool's `http_status` error, with the app's own message.
    assert_eq!(results[1]["status"], "error", "{trace:#}");
    let errors = trace["tool_errors"].as_array().expect("errors");
    assert_eq!(errors[0]["kind"], "http_status", "{trace:#}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no item 99"),
        "{trace:#}"
    );
    // Query parameters: only the tools under 5 euros.
    assert_eq!(
        result(2)
            .as_array()
            .map(|a| a.iter().map(|i| i["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("nails (100)")]),
        "{trace:#}"
    );
    // A path segment with a space arrives as it was sent.
    assert_eq!(
        result(3),
        &json!({ "category": "hand tools", "q": "mer", "hits": ["hammer"] }),
        "{trace:#}"
    );
    // JSON body and an optional header parameter.
    assert_eq!(result(4)["id"], 4, "{trace:#}");
    assert_eq!(result(4)["note"], "request r-17", "{trace:#}");
    assert_eq!(result(5)["tags"], json!(["tools"]), "{trace:#}");
}
