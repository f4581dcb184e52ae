//! The pool against a std-only upstream on 127.0.0.1 that counts the connections it accepts.

use super::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

/// What the upstream does after answering a request on a connection.
#[derive(Clone, Copy)]
enum After {
    KeepAlive,
    /// Waits for the test's word, closes the connection (no `Connection: close` said), says so.
    CloseWhenTold,
}

struct Upstream {
    port: u16,
    accepted: Arc<AtomicUsize>,
    /// Requests received (all connections), for answers that wait for company.
    received: Arc<AtomicUsize>,
    close: Mutex<Option<mpsc::Sender<()>>>,
    closed: mpsc::Receiver<()>,
}

/// Answers each request `200` with its connection's number as the body, once `wait_for`
/// requests have arrived in all (or 10 s have passed: a hung client fails, it does not hang).
fn upstream(after: After, wait_for: usize) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(AtomicUsize::new(0));
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let (closed_tx, closed_rx) = mpsc::channel::<()>();
    let close_rx = Arc::new(Mutex::new(close_rx));
    let (acc, rec) = (accepted.clone(), received.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let n = acc.fetch_add(1, Ordering::SeqCst) + 1;
            let (rec, close_rx, closed_tx) = (rec.clone(), close_rx.clone(), closed_tx.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                while read_request(&mut reader) {
                    rec.fetch_add(1, Ordering::SeqCst);
                    let start = Instant::now();
                    while rec.load(Ordering::SeqCst) < wait_for
                        && start.elapsed() < Duration::from_secs(10)
                    {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    let body = n.to_string();
                    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                    let _ = stream.write_all(format!("{head}{body}").as_bytes());
                    if let After::CloseWhenTold = after {
                        let _ = close_rx.lock().unwrap().recv();
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                        drop(stream);
                        let _ = closed_tx.send(());
                        return;
                    }
                }
            });
        }
    });
    Upstream {
        port,
        accepted,
        received,
        close: Mutex::new(Some(close_tx)),
        closed: closed_rx,
    }
}

/// Reads one request (head and `Content-Length` body); false at the end of the connection.
fn read_request(reader: &mut BufReader<std::net::TcpStream>) -> bool {
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).is_ok()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn get(port: u16) -> (HttpRequest, url::Url) {
    let url = format!("http://127.0.0.1:{port}/x");
    let req = HttpRequest {
        method: "GET".into(),
        url: url.clone(),
        headers: vec![("accept".into(), "*/*".into())],
        body: None,
    };
    (req, url.parse().expect("url"))
}

/// One request through the pool, its body read to the end: the number of the connection that
/// answered it.
async fn call(pool: &Arc<Pool>, port: u16) -> Result<String, NetError> {
    use http_body_util::BodyExt;
    let (req, url) = get(port);
    let (response, lease) = send(pool, &req, &url, true).await?;
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    drop(lease);
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn sequential_requests_share_one_kept_alive_connection() {
    let up = upstream(After::KeepAlive, 0);
    let pool = Arc::new(Pool::default());
    let rt = runtime();
    let key = format!("127.0.0.1:{}", up.port);
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("1".into()));
    assert_eq!(pool.idle_count(&key), 1);
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("1".into()));
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("1".into()));
    assert_eq!(up.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(pool.idle_count(&key), 1);
}

#[test]
fn requests_at_once_each_get_a_connection() {
    // Each answer waits until both requests are in: on one connection the second would wait
    // behind the first, and the first would wait 10 s for it.
    let up = upstream(After::KeepAlive, 2);
    let pool = Arc::new(Pool::default());
    let rt = runtime();
    let (a, b) = rt.block_on(async { tokio::join!(call(&pool, up.port), call(&pool, up.port)) });
    let mut answered_on = [a.expect("a"), b.expect("b")];
    answered_on.sort();
    assert_eq!(answered_on, ["1".to_string(), "2".to_string()]);
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(up.received.load(Ordering::SeqCst), 2);
    // Both are kept for the next requests, which reuse them.
    assert_eq!(pool.idle_count(&format!("127.0.0.1:{}", up.port)), 2);
    let (a, b) = rt.block_on(async { tokio::join!(call(&pool, up.port), call(&pool, up.port)) });
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn idle_connections_per_host_are_bounded() {
    let up = upstream(After::KeepAlive, 2);
    let pool = Arc::new(Pool::new(IDLE_TIMEOUT, 1));
    let rt = runtime();
    let (a, b) = rt.block_on(async { tokio::join!(call(&pool, up.port), call(&pool, up.port)) });
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(pool.idle_count(&format!("127.0.0.1:{}", up.port)), 1);
}

#[test]
fn an_expired_idle_connection_is_not_used() {
    let up = upstream(After::KeepAlive, 0);
    let pool = Arc::new(Pool::new(Duration::ZERO, MAX_IDLE_PER_HOST));
    let rt = runtime();
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("1".into()));
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("2".into()));
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
}

/// The keep-alive race: the server closed an idle connection, and the request was handed to
/// it before the connection's task saw the end. The connection gives the request back unsent,
/// and it goes out on a new connection.
#[test]
fn a_request_given_back_by_a_connection_the_server_closed_goes_out_on_a_new_one() {
    let up = upstream(After::CloseWhenTold, 0);
    let pool = Arc::new(Pool::default());
    let rt = runtime();
    assert_eq!(rt.block_on(call(&pool, up.port)), Ok("1".into()));
    let key = format!("127.0.0.1:{}", up.port);
    assert_eq!(pool.idle_count(&key), 1);
    let close = up.close.lock().unwrap().take().expect("close");
    close.send(()).expect("tell");
    up.closed.recv().expect("closed");
    let second = rt.block_on(async {
        // The runtime polls its I/O driver once (which wakes the idle connection's task for
        // the end of its stream) and polls this future again before running that task: the
        // request is handed to a connection that looks ready and is not.
        tokio::task::yield_now().await;
        call(&pool, up.port).await
    });
    assert_eq!(second, Ok("2".into()));
    assert_eq!(up.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(up.received.load(Ordering::SeqCst), 2);
    assert_eq!(
        pool.retried.load(Ordering::SeqCst),
        1,
        "the retry was not what happened"
    );
}

#[test]
fn a_refused_connection_is_a_connect_error_with_the_systems_words() {
    // The local end of a connected socket: nothing listens there, and no other test's listener
    // can take the port while the socket lives (one bound and released could be taken).
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("c");
    let _server_end = listener.accept().expect("accept");
    let port = client.local_addr().expect("addr").port();
    let pool = Arc::new(Pool::default());
    let err = runtime().block_on(call(&pool, port)).expect_err("refused");
    match err {
        NetError::Connect(m) => assert!(m.contains("refused"), "{m}"),
        other => panic!("{other:?}"),
    }
}
