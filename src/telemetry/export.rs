//! The background exporter: spans are queued by the command and sent in batches from a thread
//! of their own, so a slow or absent collector never slows a run; at exit toolrun waits for
//! the queue at most `OTEL_BSP_EXPORT_TIMEOUT`. A batch the collector could not take yet is
//! tried again (`delivery` says when), but never past that wait.

use super::config::{shown_url, Config, Protocol};
use super::delivery::{self, Answer, Outcome, Partial};
use super::otlp::{encode_json, encode_proto, Resource};
use super::span::Span;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Spans wait this long for company before they are sent (a served session sends as it goes).
const SCHEDULE_DELAY: Duration = Duration::from_millis(500);
/// The batch processor's default `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
const MAX_BATCH: usize = 512;
/// The batch processor's default `OTEL_BSP_MAX_QUEUE_SIZE`, counted in runs and requests: while
/// a collector hangs, what comes beyond it is dropped instead of held (a `serve` left running
/// would otherwise grow without end).
const MAX_QUEUE: usize = 2048;

/// Spans, or how to make them: a run's spans are made on the export thread, off the run's.
pub(crate) type Job = Box<dyn FnOnce() -> Vec<Span> + Send>;

pub(crate) struct Exporter {
    pub(crate) config: Config,
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    drained: Mutex<Option<mpsc::Receiver<()>>>,
    warned: Arc<AtomicBool>,
    /// Set when a batch was refused, failed or not sent in time: `export otel`, whose whole
    /// job the sending is, fails then.
    lost: Arc<AtomicBool>,
    /// Jobs sent and not yet taken by the export thread.
    queued: Arc<AtomicUsize>,
    closing: Arc<Closing>,
}

/// When the wait at exit ends, once the command is done: a retry that would start after it is
/// not waited for, so a collector that keeps answering 503 costs the exit wait at most.
#[derive(Default)]
struct Closing {
    deadline: Mutex<Option<Instant>>,
    set: Condvar,
}

impl Closing {
    fn start(&self, within: Duration) {
        let mut deadline = self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        *deadline = Some(Instant::now() + within);
        self.set.notify_all();
    }

    /// Waits `wait`; false, at once, when the wait at exit ends (or turns out to end) first.
    fn sleep(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        let mut deadline = self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if deadline.is_some_and(|d| until > d) {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            deadline = self
                .set
                .wait_timeout(deadline, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Exporter {
    /// Starts the sending thread; nothing connects before the first batch is due.
    pub(crate) fn start(config: Config) -> Exporter {
        let (tx, rx) = mpsc::channel::<Job>();
        let (done_tx, done_rx) = mpsc::channel();
        let warned = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(AtomicBool::new(false));
        let queued = Arc::new(AtomicUsize::new(0));
        let closing = Arc::new(Closing::default());
        let worker = Worker {
            config: config.clone(),
            warned: warned.clone(),
            lost: lost.clone(),
            queued: queued.clone(),
            closing: closing.clone(),
            client: None,
            runtime: None,
        };
        let spawned = std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || {
                worker.run(rx);
                let _ = done_tx.send(());
            });
        if let Err(e) = spawned {
            lost.store(true, Ordering::SeqCst);
            warn_once(
                &warned,
                &format!("cannot start the OTLP export thread: {e}"),
            );
        }
        Exporter {
            config,
            queue: Mutex::new(Some(tx)),
            drained: Mutex::new(Some(done_rx)),
            warned,
            lost,
            queued,
            closing,
        }
    }

    /// Whether every span queued so far reached the collector (meaningful after [`finish`]).
    ///
    /// [`finish`]: Exporter::finish
    pub(crate) fn delivered(&self) -> bool {
        !self.lost.load(Ordering::SeqCst)
    }

    pub(crate) fn send(&self, spans: Vec<Span>) {
        if !spans.is_empty() {
            self.send_with(Box::new(move || spans));
        }
    }

    pub(crate) fn send_with(&self, job: Job) {
        if self.queued.fetch_add(1, Ordering::SeqCst) >= MAX_QUEUE {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            self.lost.store(true, Ordering::SeqCst);
            warn_once(
                &self.warned,
                &format!(
                    "the collector at {} is not keeping up: more than {MAX_QUEUE} runs and requests wait to be sent, so the newest are dropped",
                    shown_url(&self.config.endpoint)
                ),
            );
            return;
        }
        if let Ok(queue) = self.queue.lock() {
            if let Some(tx) = queue.as_ref() {
                let _ = tx.send(job);
            }
        }
    }

    /// Closes the queue and waits for the last batch, at most the configured time.
    pub(crate) fn finish(&self) {
        self.closing.start(self.config.exit_timeout);
        if let Ok(mut queue) = self.queue.lock() {
            queue.take();
        }
        let Some(drained) = self.drained.lock().ok().and_then(|mut d| d.take()) else {
            return;
        };
        if let Err(RecvTimeoutError::Timeout) = drained.recv_timeout(self.config.exit_timeout) {
            self.lost.store(true, Ordering::SeqCst);
            warn_once(
                &self.warned,
                &format!(
                    "traces not sent to {} within {:?} (OTEL_BSP_EXPORT_TIMEOUT); the rest are dropped",
                    shown_url(&self.config.endpoint),
                    self.config.exit_timeout
                ),
            );
        }
    }
}

/// One warning per process: a collector that is down says so once, not once per batch.
fn warn_once(warned: &AtomicBool, message: &str) {
    if !warned.swap(true, Ordering::SeqCst) {
        eprintln!("toolrun: warning: {}", crate::term::visible(message));
    }
}

struct Worker {
    config: Config,
    warned: Arc<AtomicBool>,
    lost: Arc<AtomicBool>,
    queued: Arc<AtomicUsize>,
    closing: Arc<Closing>,
    client: Option<reqwest::Client>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Worker {
    fn run(mut self, rx: mpsc::Receiver<Job>) {
        let mut batch: Vec<Span> = Vec::new();
        let mut due: Option<Instant> = None;
        loop {
            let wait = due.map_or(Duration::from_secs(3600), |d| {
                d.saturating_duration_since(Instant::now())
            });
            match rx.recv_timeout(wait) {
                Ok(job) => {
                    self.queued.fetch_sub(1, Ordering::SeqCst);
                    let mut spans = job();
                    if !self.config.content {
                        spans.iter_mut().for_each(Span::withhold_content);
                    }
                    batch.extend(spans);
                    due.get_or_insert_with(|| Instant::now() + SCHEDULE_DELAY);
                    if batch.len() >= MAX_BATCH {
                        self.flush(&mut batch);
                        due = None;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.flush(&mut batch);
                    due = None;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.flush(&mut batch);
                    return;
                }
            }
        }
    }

    fn flush(&mut self, batch: &mut Vec<Span>) {
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(MAX_BATCH));
            let spans = std::mem::replace(batch, rest);
            match self.post(&spans) {
                Ok(None) => {}
                Ok(Some(partial)) => self.partly_taken(&partial, spans.len()),
                Err(e) => {
                    self.lost.store(true, Ordering::SeqCst);
                    warn_once(
                        &self.warned,
                        &format!(
                            "cannot export traces to {}: {e}; the run is not affected",
                            shown_url(&self.config.endpoint)
                        ),
                    );
                }
            }
        }
    }

    /// A partial success: the specification's "MUST NOT retry"; said once, as a failure is.
    fn partly_taken(&self, partial: &Partial, sent: usize) {
        let url = shown_url(&self.config.endpoint);
        let message = if partial.rejected != 0 {
            self.lost.store(true, Ordering::SeqCst);
            let why = match partial.message.as_str() {
                "" => String::new(),
                m => format!(": {m}"),
            };
            format!(
                "the collector at {url} rejected {} of {sent} spans{why}; the run is not affected",
                partial.rejected
            )
        } else {
            format!(
                "the collector at {url} took every span and says: {}",
                partial.message
            )
        };
        warn_once(&self.warned, &message);
    }

    /// Sends one batch, trying again while the collector's answer is one to retry, at most
    /// `MAX_ATTEMPTS` times and never past the wait at exit.
    fn post(&mut self, spans: &[Span]) -> Result<Option<Partial>, String> {
        let resource = Resource {
            attributes: &self.config.resource,
            scope_version: env!("CARGO_PKG_VERSION"),
        };
        let (body, content_type) = match self.config.protocol {
            Protocol::Protobuf => (encode_proto(&resource, spans), "application/x-protobuf"),
            Protocol::Json => (encode_json(&resource, spans), "application/json"),
        };
        if self.runtime.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            self.runtime = Some(rt);
        }
        if self.client.is_none() {
            self.client = Some(self.config.transport.client()?);
        }
        let (body, encoding) = self.config.transport.body(body);
        let body = bytes::Bytes::from(body);
        let mut tries = 1;
        loop {
            let (why, asked) = match self.attempt(&body, content_type, encoding) {
                Outcome::Accepted(partial) => return Ok(partial),
                Outcome::Failed(why) => return Err(why),
                Outcome::Retry { why, after } => (why, after),
            };
            if tries == delivery::MAX_ATTEMPTS {
                return Err(format!("{why}; tried {tries} times"));
            }
            let wait = match asked {
                Some(asked) if asked > delivery::MAX_RETRY_AFTER => {
                    return Err(format!(
                        "{why}, asking to be tried again in {} s, longer than toolrun waits ({} s)",
                        asked.as_secs(),
                        delivery::MAX_RETRY_AFTER.as_secs()
                    ));
                }
                Some(asked) => asked,
                // The body seeds the jitter: each batch's random span ids spread the waits.
                None => delivery::BACKOFF.delay(tries, &body),
            };
            if !self.closing.sleep(wait) {
                return Err(format!(
                    "{why}; tried {tries} times, and the next try would come after the wait at exit ({:?}, OTEL_BSP_EXPORT_TIMEOUT) ends",
                    self.config.exit_timeout
                ));
            }
            tries += 1;
        }
    }

    /// One request and what its answer means.
    fn attempt(&self, body: &bytes::Bytes, content_type: &str, encoding: Option<&str>) -> Outcome {
        let (Some(rt), Some(client)) = (&self.runtime, &self.client) else {
            return Outcome::Failed("no HTTP client".into());
        };
        let mut req = client
            .post(&self.config.endpoint)
            .header("content-type", content_type);
        if let Some(encoding) = encoding {
            req = req.header("content-encoding", encoding);
        }
        let mut req = req.body(body.clone());
        for (k, v) in &self.config.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let sent_json = self.config.protocol == Protocol::Json;
        // Sent inside the runtime: the request's timer needs its reactor.
        let answered = rt.block_on(async move {
            let mut resp = req.send().await?;
            let header = |name: &str| {
                let value = resp.headers().get(name)?;
                value.to_str().ok().map(str::to_string)
            };
            let retry_after = header("retry-after");
            // The answer is meant to come as the request went; a body of another type is not read.
            let json = match header("content-type") {
                None => Some(sent_json),
                Some(t) if t.contains("json") => Some(true),
                Some(t) if t.contains("protobuf") => Some(false),
                Some(_) => None,
            };
            let mut body = Vec::new();
            // The status is the answer; a body cut short is read as far as it came.
            while body.len() < delivery::MAX_BODY && json.is_some() {
                match resp.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            Ok::<_, reqwest::Error>((resp.status().as_u16(), retry_after, json, body))
        });
        match answered {
            Ok((status, retry_after, json, body)) => delivery::outcome(&Answer {
                status,
                retry_after: retry_after.as_deref(),
                json: json.unwrap_or(sent_json),
                body: if json.is_some() { &body } else { &[] },
            }),
            // Without the URL: it may hold a key, and the warning names the endpoint itself.
            Err(e) if delivery::transient(&e) => Outcome::Retry {
                why: self.describe(&e.without_url()),
                after: None,
            },
            Err(e) => Outcome::Failed(self.describe(&e.without_url())),
        }
    }
}

impl Worker {
    fn describe(&self, e: &reqwest::Error) -> String {
        if let (true, Some(limit)) = (e.is_timeout(), self.config.transport.timeout) {
            return format!(
                "no answer within {} ms (OTEL_EXPORTER_OTLP_TIMEOUT, the limit of each export request)",
                limit.as_millis()
            );
        }
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        text
    }
}
