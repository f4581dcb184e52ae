//! `toolrun import openapi` end to end: real documents (tests/data/openapi, from
//! OAI/OpenAPI-Specification, Apache-2.0) → spec → `check` → a scripted run against a local
//! server implementing the API. Only 127.0.0.1 is contacted.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use support::{Response, TestServer};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/openapi")
        .join(name)
}

fn import(args: &[&str]) -> support::Output {
    let mut cmd = support::toolrun();
    cmd.args(["import", "openapi"]).args(args);
    support::run(&mut cmd)
}

fn check_clean(spec: &Path) {
    let mut cmd = support::toolrun();
    cmd.args(["check", "--deny-warnings"]).arg(spec);
    let out = support::run(&mut cmd);
    out.assert_success();
}

#[test]
fn both_petstores_import_and_pass_check_unchanged() {
    for doc in ["petstore.yaml", "petstore-expanded.yaml"] {
        let out = import(&[data(doc).to_str().expect("utf-8")]);
        out.assert_success();
        let dir = support::temp_dir("openapi-check");
        let spec = support::write(&dir, "spec.yaml", &out.stdout);
        check_clean(&spec);
    }
}

#[test]
fn petstore_end_to_end_against_a_local_server() {
    let server = TestServer::start(|req| match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/v2/pets") => {
            Response::json(200, json!([{ "id": 1, "name": "Rex", "tag": "dog" }]))
        }
        ("GET", "/v2/pets/7") => Response::json(200, json!({ "id": 7, "name": "Tom" })),
        ("POST", "/v2/pets") => Response::json(200, json!({ "id": 8, "name": "Bo" })),
        _ => Response::json(404, json!({ "code": 404, "message": "no such pet" })),
    });
    let base = format!("{}/v2", server.base_url());
    let out = import(&[
        data("petstore-expanded.yaml").to_str().expect("utf-8"),
        "--base-url",
        &base,
        "--exclude",
        "deletePet",
    ]);
    out.assert_success();
    assert!(!out.stdout.contains("deletePet"), "{}", out.stdout);
    let spec_text = format!(
        "{}\nmodels:\n  scripted:\n    kind: scripted\n    scripts:\n      - turns:\n\
         \x20         - tool_calls:\n\
         \x20             - {{ name: findPets, arguments: {{ tags: [dog, cat], limit: 2 }} }}\n\
         \x20             - {{ name: find_pet_by_id, arguments: {{ id: 7 }} }}\n\
         \x20             - {{ name: addPet, arguments: {{ body: {{ name: Bo }} }} }}\n\
         \x20         - answer: done\n",
        out.stdout
    );
    let dir = support::temp_dir("openapi-e2e");
    let spec = support::write(&dir, "petstore.yaml", &spec_text);
    check_clean(&spec);

    let mut cmd = support::toolrun();
    cmd.arg("run")
        .arg(&spec)
        .args(["--query", "pets", "--json", "--approve", "addPet"]);
    let run = support::run(&mut cmd);
    run.assert_success();
    let trace: Value = run.json();
    let results = trace["tool_results"].as_array().expect("results");
    assert_eq!(results.len(), 3, "{trace:#}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{trace:#}");
    assert_eq!(results[1]["result"]["name"], "Tom");

    let requests = server.requests();
    let find = requests
        .iter()
        .find(|r| r.method == "GET" && r.path == "/v2/pets")
        .expect("findPets");
    assert_eq!(
        find.query,
        vec![
            ("tags".to_string(), "dog".to_string()),
            ("tags".to_string(), "cat".to_string()),
            ("limit".to_string(), "2".to_string())
        ]
    );
    let add = requests
        .iter()
        .find(|r| r.method == "POST")
        .expect("addPet");
    assert_eq!(
        serde_json::from_slice::<Value>(&add.body).expect("JSON body"),
        json!({ "name": "Bo" })
    );
}

const DOC_31: &str = r##"{
  "openapi": "3.1.0",
  "info": { "title": "Ticket desk", "version": "1" },
  "servers": [{ "url": "https://{region}.tickets.example.com/api", "variables": { "region": { "default": "eu" } } }],
  "security": [{ "desk_key": [] }],
  "components": {
    "securitySchemes": { "desk_key": { "type": "apiKey", "in": "header", "name": "X-Desk-Key" } },
    "parameters": { "Trace": { "name": "X-Trace-Id", "in": "header", "schema": { "type": "string" } } },
    "schemas": { "Ticket": { "type": "object", "properties": { "title": { "type": "string" }, "parent": { "$ref": "#/components/schemas/Ticket" }, "due": { "type": ["string", "null"] } }, "required": ["title"] } }
  },
  "paths": {
    "/tickets/{ticket id}": {
      "parameters": [{ "name": "ticket id", "in": "path", "required": true, "schema": { "type": "string" } }],
      "get": { "operationId": "getTicket", "tags": ["read"], "parameters": [{ "$ref": "#/components/parameters/Trace" }] },
      "put": { "tags": ["write"], "summary": "Replace a ticket", "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Ticket" } } } } }
    }
  }
}"##;

#[test]
fn openapi_31_refs_security_headers_and_filters() {
    let dir = support::temp_dir("openapi-31");
    let doc = support::write(&dir, "desk.json", DOC_31);
    let out = import(&[doc.to_str().expect("utf-8")]);
    out.assert_success();
    let text = &out.stdout;
    assert!(
        text.contains("url: \"https://eu.tickets.example.com/api/tickets/{{ args.ticket_id }}\""),
        "{text}"
    );
    assert!(
        text.contains("\"X-Desk-Key\": \"{{ secrets.DESK_KEY }}\""),
        "{text}"
    );
    assert!(
        text.contains("\"X-Trace-Id\": \"{{ args.X_Trace_Id }}\""),
        "{text}"
    );
    assert!(text.contains("secrets: [DESK_KEY]"), "{text}");
    assert!(
        text.contains("put_tickets_ticket_id:"),
        "no operationId: method and path\n{text}"
    );
    assert!(
        text.contains("\"due\":{\"type\":[\"string\",\"null\"]}"),
        "{text}"
    );
    let spec = support::write(&dir, "spec.yaml", text);
    check_clean(&spec);

    let only_reads = import(&[
        doc.to_str().expect("utf-8"),
        "--include",
        "tag:read",
        "--tools-only",
    ]);
    only_reads.assert_success();
    assert!(
        only_reads.stdout.starts_with("tools:\n  getTicket:"),
        "{}",
        only_reads.stdout
    );
    assert!(
        !only_reads.stdout.contains("put_tickets"),
        "{}",
        only_reads.stdout
    );
    let by_path = import(&[doc.to_str().expect("utf-8"), "--exclude", "/tickets/*"]);
    by_path.assert_code(2);
    assert!(
        by_path.stderr.contains("no operation was selected"),
        "{by_path:?}"
    );
}

#[test]
fn documents_that_cannot_be_imported_say_why() {
    let dir = support::temp_dir("openapi-bad");
    let swagger = support::write(&dir, "s.json", r#"{"swagger": "2.0", "paths": {}}"#);
    let out = import(&[swagger.to_str().expect("utf-8")]);
    out.assert_code(2);
    assert!(out.stderr.contains("Swagger 2.0"), "{out:?}");
    let relative = support::write(
        &dir,
        "r.yaml",
        "openapi: 3.0.3\ninfo: { title: t, version: '1' }\nservers: [{ url: /v1 }]\npaths: { /a: { get: { operationId: a } } }\n",
    );
    let out = import(&[relative.to_str().expect("utf-8")]);
    out.assert_code(2);
    assert!(out.stderr.contains("--base-url"), "{out:?}");
    let out = import(&[dir.join("missing.yaml").to_str().expect("utf-8")]);
    out.assert_code(2);
}

#[test]
fn the_example_spec_is_what_the_importer_prints_today() {
    let out = import(&[data("petstore.yaml").to_str().expect("utf-8")]);
    out.assert_success();
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/petstore_openapi.yaml"),
    )
    .expect("specs/petstore_openapi.yaml");
    assert_eq!(
        out.stdout, committed,
        "regenerate: toolrun import openapi tests/data/openapi/petstore.yaml > specs/petstore_openapi.yaml"
    );
}
