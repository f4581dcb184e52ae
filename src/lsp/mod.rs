//! `toolrun lsp`: the spec compiler in the editor, over the Language Server Protocol on stdio.
//! Diagnostics are exactly `check`'s for the document (compiled on a thread of their own as soon
//! as it changes, the changes made meanwhile merged); hover, completion, navigation and quick fixes read the document's
//! YAML and the same key tables the schema and the compiler are made from.
//!
//! Nothing the editor sends ends the server but `exit` or the end of its input: a message that
//! cannot be read is skipped, a request about a document that is not open gets an empty answer,
//! and a request whose parameters do not fit gets an `InvalidParams` error. The server never
//! writes a file: a quick fix is an edit the client applies.

mod actions;
mod complete;
mod diagnostics;
mod document;
mod hover;
mod index;
mod navigate;
mod places;
mod transport;

use document::Document;
use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::Uri;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use transport::Incoming;

pub(crate) fn run() -> i32 {
    let (in_tx, in_rx) = channel();
    let (out_tx, out_rx) = channel::<Message>();
    let (job_tx, job_rx) = channel();
    let spawned = (|| -> std::io::Result<_> {
        let named = |n: &str| std::thread::Builder::new().name(n.to_string());
        named("lsp-reader").spawn(move || transport::read_loop(std::io::stdin().lock(), in_tx))?;
        let writer = named("lsp-writer").spawn(move || transport::write_loop(out_rx))?;
        let out = out_tx.clone();
        let worker = named("lsp-check").spawn(move || diagnostics::worker(job_rx, out))?;
        Ok((writer, worker))
    })();
    let (writer, worker) = match spawned {
        Ok(threads) => threads,
        Err(e) => {
            eprintln!("error: cannot start the language server: {e}");
            return crate::exit::FAILED;
        }
    };
    let code = Server::new(out_tx, job_tx).serve(in_rx);
    // The last answers (`shutdown`'s) are written before the process ends.
    let _ = worker.join();
    let _ = writer.join();
    code
}

#[derive(PartialEq)]
enum State {
    Starting,
    Running,
    ShutDown,
}

struct Server {
    out: Sender<Message>,
    jobs: Sender<diagnostics::Job>,
    docs: HashMap<Uri, Document>,
    state: State,
}

impl Server {
    fn new(out: Sender<Message>, jobs: Sender<diagnostics::Job>) -> Server {
        Server {
            out,
            jobs,
            docs: HashMap::new(),
            state: State::Starting,
        }
    }

    /// The exit code: 0 after `shutdown` then `exit`, 1 when the client went without them.
    fn serve(mut self, input: Receiver<Incoming>) -> i32 {
        for incoming in input {
            match incoming {
                Incoming::Malformed(id, why) => {
                    eprintln!("toolrun lsp: skipped a message: {why}");
                    if let Some(id) = id {
                        self.error(id, ErrorCode::ParseError, why);
                    }
                }
                Incoming::Message(Message::Request(req)) => self.request(req),
                Incoming::Message(Message::Notification(n)) => {
                    if n.method == "exit" {
                        return self.exit_code();
                    }
                    self.notification(n);
                }
                // The server sends no requests, so a response answers nothing.
                Incoming::Message(Message::Response(_)) => {}
            }
        }
        self.exit_code()
    }

    fn exit_code(&self) -> i32 {
        if self.state == State::ShutDown {
            crate::exit::SUCCESS
        } else {
            crate::exit::FAILED
        }
    }

    fn send(&self, message: impl Into<Message>) {
        // The writer is gone only when stdout closed; the reader then ends the session.
        let _ = self.out.send(message.into());
    }

    fn error(&self, id: RequestId, code: ErrorCode, message: impl Into<String>) {
        self.send(Response::new_err(id, code as i32, message.into()));
    }

    fn request(&mut self, req: Request) {
        match (&self.state, req.method.as_str()) {
            (State::Starting, "initialize") => {
                self.state = State::Running;
                self.send(Response::new_ok(req.id, capabilities()));
            }
            (State::Starting, _) => {
                self.error(req.id, ErrorCode::ServerNotInitialized, "initialize first")
            }
            (State::ShutDown, _) => {
                self.error(req.id, ErrorCode::InvalidRequest, "the server is shut down")
            }
            (State::Running, "initialize") => {
                self.error(req.id, ErrorCode::InvalidRequest, "already initialized")
            }
            (State::Running, "shutdown") => {
                self.state = State::ShutDown;
                self.send(Response::new_ok(req.id, serde_json::Value::Null));
            }
            (State::Running, _) => {
                let id = req.id.clone();
                match self.answer(req) {
                    Ok(result) => self.send(Response::new_ok(id, result)),
                    Err((code, message)) => self.error(id, code, message),
                }
            }
        }
    }

    /// A request about a document that is not open gets an empty answer (`null`).
    fn answer(&mut self, req: Request) -> Result<serde_json::Value, (ErrorCode, String)> {
        use lsp_types::*;
        let method = req.method.clone();
        let json = |v: Result<serde_json::Value, serde_json::Error>| {
            v.map_err(|e| (ErrorCode::InternalError, e.to_string()))
        };
        match method.as_str() {
            "textDocument/hover" => {
                let p: HoverParams = extract(req)?;
                let at = p.text_document_position_params;
                let found = self
                    .doc(&at.text_document.uri)
                    .and_then(|d| hover::hover(d, at.position));
                json(serde_json::to_value(found))
            }
            "textDocument/completion" => {
                let p: CompletionParams = extract(req)?;
                let at = p.text_document_position;
                let found = self
                    .doc(&at.text_document.uri)
                    .map(|d| complete::complete(d, at.position));
                json(serde_json::to_value(found))
            }
            "textDocument/definition" => {
                let p: GotoDefinitionParams = extract(req)?;
                let at = p.text_document_position_params;
                let uri = at.text_document.uri;
                let found = self
                    .doc(&uri)
                    .and_then(|d| navigate::definition(d, &uri, at.position));
                json(serde_json::to_value(found))
            }
            "textDocument/references" => {
                let p: ReferenceParams = extract(req)?;
                let at = p.text_document_position;
                let uri = at.text_document.uri;
                let with = p.context.include_declaration;
                let found = self
                    .doc(&uri)
                    .map(|d| navigate::references(d, &uri, at.position, with));
                json(serde_json::to_value(found))
            }
            "textDocument/documentSymbol" => {
                let p: DocumentSymbolParams = extract(req)?;
                let found = self.doc(&p.text_document.uri).map(navigate::symbols);
                json(serde_json::to_value(found))
            }
            "textDocument/codeAction" => {
                let p: CodeActionParams = extract(req)?;
                let uri = p.text_document.uri.clone();
                let found = self.doc(&uri).map(|d| actions::code_actions(d, p));
                json(serde_json::to_value(found))
            }
            _ => Err((
                ErrorCode::MethodNotFound,
                format!("`{method}` is not supported"),
            )),
        }
    }

    fn doc(&mut self, uri: &Uri) -> Option<&mut Document> {
        self.docs.get_mut(uri)
    }

    fn notification(&mut self, n: Notification) {
        if self.state != State::Running {
            return;
        }
        let result = match n.method.as_str() {
            "textDocument/didOpen" => params(n).map(|p| self.open(p)),
            "textDocument/didChange" => params(n).map(|p| self.change(p)),
            "textDocument/didClose" => params(n).map(|p| self.close(p)),
            _ => Ok(()),
        };
        if let Err((_, why)) = result {
            eprintln!("toolrun lsp: skipped a notification: {why}");
        }
    }

    fn open(&mut self, p: lsp_types::DidOpenTextDocumentParams) {
        let doc = Document::new(p.text_document.text, p.text_document.version);
        self.check(&p.text_document.uri, &doc);
        self.docs.insert(p.text_document.uri, doc);
    }

    fn change(&mut self, p: lsp_types::DidChangeTextDocumentParams) {
        let uri = p.text_document.uri;
        let Some(doc) = self.docs.get_mut(&uri) else {
            eprintln!(
                "toolrun lsp: a change to `{}`, which is not open",
                uri.as_str()
            );
            return;
        };
        for change in p.content_changes {
            doc.apply(change.range, &change.text);
        }
        doc.version = p.text_document.version;
        if let Some(doc) = self.docs.get(&uri) {
            self.check(&uri, doc);
        }
    }

    fn close(&mut self, p: lsp_types::DidCloseTextDocumentParams) {
        self.docs.remove(&p.text_document.uri);
        let _ = self.jobs.send(diagnostics::Job::Clear(p.text_document.uri));
    }

    fn check(&self, uri: &Uri, doc: &Document) {
        let _ = self.jobs.send(diagnostics::Job::Check {
            uri: uri.clone(),
            version: doc.version,
            text: doc.text.clone(),
            path: path_of(uri),
        });
    }
}

fn extract<P: serde::de::DeserializeOwned>(req: Request) -> Result<P, (ErrorCode, String)> {
    serde_json::from_value(req.params)
        .map_err(|e| (ErrorCode::InvalidParams, format!("`{}`: {e}", req.method)))
}

fn params<P: serde::de::DeserializeOwned>(n: Notification) -> Result<P, (ErrorCode, String)> {
    serde_json::from_value(n.params)
        .map_err(|e| (ErrorCode::InvalidParams, format!("`{}`: {e}", n.method)))
}

fn capabilities() -> serde_json::Value {
    use lsp_types::*;
    let caps = ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Options(
            TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::INCREMENTAL),
                ..Default::default()
            },
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some([".", ":", " ", "[", ","].map(String::from).to_vec()),
            ..Default::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        document_symbol_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Options(CodeActionOptions {
            code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        ..Default::default()
    };
    serde_json::json!({
        "capabilities": caps,
        "serverInfo": { "name": "toolrun", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// The file a document is, for resolving what it names (fixtures, tables) as `check` does. A
/// document that is no file (an unsaved buffer) resolves against the working folder.
pub(super) fn path_of(uri: &Uri) -> PathBuf {
    let file = url::Url::parse(uri.as_str())
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok());
    file.unwrap_or_else(|| {
        let name = uri.as_str().rsplit(['/', ':']).next().unwrap_or_default();
        PathBuf::from(".").join(if name.is_empty() {
            "untitled.yaml"
        } else {
            name
        })
    })
}
