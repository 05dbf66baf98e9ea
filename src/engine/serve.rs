//! The engine on its own listener: plain HTTP/1.1 and h2c (hyper-util's auto builder), each
//! request body read with a cap, then [`Engine::handle`]. Stops accepting when `shutdown`
//! resolves, then drains open connections for a bounded time.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::Engine;
use crate::body::{json_response, BoxBody};

/// Largest request body read.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;
/// How long open connections (streams included) may take to finish after shutdown.
const DRAIN: Duration = Duration::from_secs(10);
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Runs the engine standalone on plain HTTP (HTTP/1.1 and h2c via
/// `hyper_util::server::conn::auto`) until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<Engine>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
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
        let engine = Arc::clone(&engine);
        let service = service_fn(move |req: Request<Incoming>| {
            let engine = Arc::clone(&engine);
            async move { Ok::<_, Infallible>(answer(&engine, req).await) }
        });
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A connection error concerns that peer only.
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
    Ok(())
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
