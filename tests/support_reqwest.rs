//! The test server against the HTTP client toolrun itself uses (reqwest), to make sure
//! keep-alive, chunked bodies, redirects and dropped connections behave as real clients
//! expect.

mod support;

use serde_json::json;
use std::time::Duration;
use support::{refused_port, Response, TestServer};

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn reqwest_reuses_connections_and_sees_every_response_kind() {
    let server = TestServer::start(|req| match req.path.as_str() {
        "/json" => Response::json(200, json!({"n": req.nth, "q": req.query_param("q")})),
        "/echo" => Response::status(200).body(req.body.clone()),
        "/flaky" if req.nth == 1 => Response::text(503, "busy"),
        "/flaky" => Response::text(200, "ok"),
        "/old" => Response::redirect(302, "/json"),
        "/huge" => Response::status(200).huge(5_000_000).chunked(),
        "/drop" => Response::close_without_response(),
        "/cut" => Response::text(200, "0123456789").abort_after(3),
        "/slow" => Response::text(200, "late").delay(Duration::from_secs(5)),
        _ => Response::status(404),
    });
    block_on(async {
        let c = client();
        let get = |path: &str| c.get(server.url(path)).send();
        let r = get("/json?q=a%20b").await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.text().await.unwrap()).unwrap(),
            json!({"n": 1, "q": "a b"})
        );
        let body = c
            .post(server.url("/echo"))
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                vec![
                    Ok::<_, std::io::Error>("chunk one, ".as_bytes().to_vec()),
                    Ok("chunk two".as_bytes().to_vec()),
                ],
            )))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(body, "chunk one, chunk two");
        assert_eq!(get("/flaky").await.unwrap().status(), 503);
        assert_eq!(get("/flaky").await.unwrap().text().await.unwrap(), "ok");
        let r = get("/old").await.unwrap();
        assert_eq!(r.url().path(), "/json");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.text().await.unwrap()).unwrap()["n"],
            2
        );
        let huge = get("/huge").await.unwrap().bytes().await.unwrap();
        assert_eq!(huge.len(), 5_000_000);
        assert_eq!(get("/nope").await.unwrap().status(), 404);
        // Everything so far went over one connection.
        assert_eq!(server.connections(), 1, "{:?}", server.requests());

        let err = get("/drop").await.unwrap_err();
        assert!(!err.is_timeout(), "{err:?}");
        let err = get("/cut").await.unwrap().text().await.unwrap_err();
        assert!(err.is_body() || err.is_decode(), "{err:?}");
        let err = c
            .get(server.url("/slow"))
            .timeout(Duration::from_millis(200))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        let err = c
            .get(format!("http://127.0.0.1:{}/", refused_port()))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{err:?}");
    });
    assert_eq!(server.requests()[1].body, b"chunk one, chunk two");
    assert_eq!(
        server.requests()[1].header("transfer-encoding"),
        Some("chunked")
    );
}
