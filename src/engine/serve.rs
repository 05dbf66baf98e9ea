//! The engine on its own listener: plain HTTP/1.1 and h2c (told apart by the first bytes,
//! [`crate::sniff`], then hyper's connection for that protocol), each request body read with a
//! cap, then [`Engine::handle`]. Stops accepting when `shutdown` resolves, then drains open
//! connections for a bounded time.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use tokio::net::{TcpListener, TcpStream};

use super::Engine;
use crate::body::{json_response, BoxBody};
use crate::sniff::{sniff, Prefixed};

/// Largest request body read.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;
/// How long open connections (streams included) may take to finish after shutdown.
const DRAIN: Duration = Duration::from_secs(10);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a new connection may take to send the bytes that tell its protocol.
const FIRST_BYTES: Duration = Duration::from_secs(10);

/// Runs the engine standalone on plain HTTP (HTTP/1.1 and h2c) until `shutdown` resolves,
/// then drains.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http1 = http1::Builder::new();
    http1.timer(TokioTimer::new());
    let mut http2 = http2::Builder::new(TokioExecutor::new());
    http2.timer(TokioTimer::new());
    let builders = Arc::new(Builders { http1, http2 });
    let graceful = GracefulShutdown::new();
    // Connections still telling their protocol are dropped at shutdown (nothing runs on them).
    let (stopping, stop) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(_) => {
                    // Transient (a peer that reset, no descriptors left): keep serving.
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            Arc::clone(&engine),
            Arc::clone(&builders),
            graceful.watcher(),
            stop.clone(),
        ));
    }
    drop(listener);
    let _ = stopping.send(true);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
}

/// hyper's connection builders, one per protocol.
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

/// Serves one connection by the protocol its first bytes tell (a connection that tells none
/// within [`FIRST_BYTES`], closes first, or is still silent at shutdown is dropped); on
/// shutdown it finishes what runs.
async fn connection(
    mut tcp: TcpStream,
    engine: Arc<Engine>,
    builders: Arc<Builders>,
    watcher: Watcher,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let sniffed = tokio::select! {
        sniffed = tokio::time::timeout(FIRST_BYTES, sniff(&mut tcp)) => sniffed,
        _ = stop.wait_for(|s| *s) => return,
    };
    let Ok(Ok((is_h2, prefix))) = sniffed else {
        return;
    };
    let io = TokioIo::new(Prefixed::new(prefix, tcp));
    let service = service_fn(move |req: Request<Incoming>| {
        let engine = Arc::clone(&engine);
        async move { Ok::<_, Infallible>(answer(&engine, req).await) }
    });
    // A connection error concerns that peer only.
    if is_h2 {
        let _ = watcher
            .watch(builders.http2.serve_connection(io, service))
            .await;
    } else {
        let _ = watcher
            .watch(builders.http1.serve_connection(io, service))
            .await;
    }
}

fn too_large() -> Response<BoxBody> {
    json_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &br#"{"error":"request body too large"}"#[..],
    )
}

/// Reads the body (at most [`MAX_BODY`]) and hands the request to the engine.
async fn answer(engine: &Arc<Engine>, req: Request<Incoming>) -> Response<BoxBody> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return too_large(),
        Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &br#"{"error":"could not read the request body"}"#[..],
            )
        }
    };
    engine.handle(Request::from_parts(parts, bytes)).await
}
