//! The request body: framing that two parsers could read differently is refused, and the
//! body is read under a cap, a deadline and a minimum rate.

use super::*;
use crate::reason::{self, Reason};

/// Request framing that two HTTP parsers could read differently (request smuggling). hyper
/// already refuses conflicting `Content-Length`s, non-chunked `Transfer-Encoding` and obs-fold,
/// and frames `Content-Length` + `Transfer-Encoding` by the latter alone (closing the
/// connection after). The edge goes further: a request body must have a declared length unless
/// the policy allows chunked requests, so that shape is refused outright (411).
pub(super) fn check_framing(headers: &HeaderMap, allow_chunked: bool) -> Result<(), Rejection> {
    let te: Vec<_> = headers.get_all(header::TRANSFER_ENCODING).iter().collect();
    let cl: Vec<_> = headers.get_all(header::CONTENT_LENGTH).iter().collect();
    if !te.is_empty() && !allow_chunked {
        return Err(Rejection::Http {
            status: StatusCode::LENGTH_REQUIRED,
            message: "Content-Length required",
            reason: reason::HTTP_LENGTH_REQUIRED,
            allow: None,
        });
    }
    let ambiguous = (!te.is_empty() && !cl.is_empty())
        || cl.len() > 1
        || te.len() > 1
        || te
            .iter()
            .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"));
    if ambiguous {
        return Err(Rejection::Http {
            status: StatusCode::BAD_REQUEST,
            message: "Ambiguous request framing",
            reason: reason::HTTP_FRAMING,
            allow: None,
        });
    }
    Ok(())
}

/// A request whose authority (HTTP/2 `:authority`, an HTTP/1.1 absolute-form target) and
/// `Host` name different hosts: the edge routes by the first, a component that reads the
/// second could take it for another host's (RFC 9113 §8.3.1: malformed). The same host is
/// the same name in any letter case and the same port, the scheme's default written or
/// not; user information in either is no host. A `Host` alone (origin-form HTTP/1.1) is
/// the authority itself.
pub(super) fn check_host<B>(req: &http::Request<B>) -> Result<(), Rejection> {
    let Some(authority) = req.uri().authority() else {
        return Ok(());
    };
    let default_port = if req.uri().scheme_str() == Some("http") {
        80
    } else {
        443
    };
    let same = |host: &HeaderValue| {
        let Ok(host) = host.to_str() else {
            return false;
        };
        let Ok(named) = host.parse::<http::uri::Authority>() else {
            return false;
        };
        !host.contains('@')
            && !authority.as_str().contains('@')
            && named.host().eq_ignore_ascii_case(authority.host())
            && named.port_u16().unwrap_or(default_port)
                == authority.port_u16().unwrap_or(default_port)
    };
    if req.headers().get_all(header::HOST).iter().all(same) {
        return Ok(());
    }
    Err(Rejection::Http {
        status: StatusCode::BAD_REQUEST,
        message: "Host differs from the request's authority",
        reason: reason::HTTP_HOST_MISMATCH,
        allow: None,
    })
}

/// What the gate takes as a request body: hyper's `Incoming` from a connection, or any other
/// body of bytes (tests drive the gate without a socket). Its errors are not looked at: a body
/// that fails is `body.read`.
pub trait RequestBody: http_body::Body<Data = Bytes> + Send + Unpin + 'static {}
impl<B: http_body::Body<Data = Bytes> + Send + Unpin + 'static> RequestBody for B {}

/// The body's `Content-Length`: none, a length, or `Err` when it does not read as one.
pub(super) fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, ()> {
    headers
        .get(header::CONTENT_LENGTH)
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or(())
        })
        .transpose()
}

/// How a request body must arrive.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimits {
    pub(super) cap: usize,
    /// The whole body must arrive within this time...
    pub(super) timeout: Duration,
    /// ... and, after a short grace period, at least this fast (slow POST).
    pub(super) min_bytes_per_second: u64,
}

/// Grace period before the minimum body rate applies.
pub(super) const BODY_RATE_GRACE: Duration = Duration::from_secs(2);

/// An HTTP/1.x request that declares a body (a non-zero `Content-Length`, or any
/// `Transfer-Encoding`).
pub(super) fn declares_h1_body<B>(req: &http::Request<B>) -> bool {
    let h = req.headers();
    req.version() <= http::Version::HTTP_11
        && (h.contains_key(header::TRANSFER_ENCODING)
            || h.get(header::CONTENT_LENGTH)
                .is_some_and(|v| v.as_bytes().iter().any(|b| *b != b'0')))
}

/// The refusals of `read_body` (below) that leave the rest of the body unread: the
/// connection cannot carry another request after them. (A request budget's refusal may come
/// before the body, midway or after its parse: its connection is closed in each case.)
pub(super) fn leaves_body_unread(reason: Reason) -> bool {
    matches!(
        reason,
        reason::BODY_TOO_LARGE
            | reason::BODY_TOO_SLOW
            | reason::BODY_READ
            | reason::BODY_CONTENT_LENGTH
            | reason::CONCURRENCY_REQUEST_BYTES
            | reason::OVERLOAD_REQUEST_BYTES
    )
}

/// What the body of a request refused before its body was needed may still cost, so that its
/// HTTP/1.1 connection can carry the next request (as nginx discards such bodies): at most
/// this much read and dropped...
const DISCARD_BYTES: u64 = 64 * 1024;
/// ... within this long.
const DISCARD_TIME: Duration = Duration::from_millis(100);

/// Reads and drops the body of a request refused before its body was needed (401, 403, 429,
/// an unaccepted content type). `true` when it ended within the bounds (the connection stays
/// usable); `false` when it did not (a larger declared length, more bytes, slower, or
/// unreadable): the answer then says `Connection: close`, since hyper will not read the rest.
async fn discard_body(mut body: impl RequestBody, headers: &HeaderMap) -> bool {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DISCARD_BYTES) {
        return false;
    }
    let mut left = DISCARD_BYTES;
    let drained = async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else {
                return false;
            };
            if let Ok(data) = frame.into_data() {
                let n = data.len() as u64;
                if n > left {
                    return false;
                }
                left -= n;
            }
        }
        true
    };
    tokio::time::timeout(DISCARD_TIME, drained)
        .await
        .unwrap_or(false)
}

/// What every route does with a body it does not need (refused before reading it, or a route
/// that takes none): when an HTTP/1.1 request declared one, [`discard_body`]; if that did not
/// reach the body's end, the answer must close the connection (`Trace::body_left_unread`).
pub(super) async fn drop_unneeded_body(
    body: impl RequestBody,
    headers: &HeaderMap,
    h1_body: bool,
    trace: &mut super::Trace,
) {
    if h1_body && !discard_body(body, headers).await {
        trace.body_left_unread = true;
    }
}

/// Reads the request body up to the cap; a declared or actual excess is refused with 413
/// before (or as soon as) it crosses the cap, and a body that trickles in (slow POST) or takes
/// too long is refused with 408.
pub(super) async fn read_body(
    mut body: impl RequestBody,
    headers: &HeaderMap,
    limits: BodyLimits,
    held: &mut RequestBytes,
) -> Result<Bytes, Rejection> {
    let too_large = Rejection::Rpc {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        id: Value::Null,
        error: Box::new(RpcError::invalid_request(
            "Request body too large",
            reason::BODY_TOO_LARGE,
        )),
    };
    let too_slow = Rejection::Http {
        status: StatusCode::REQUEST_TIMEOUT,
        message: "Request body too slow",
        reason: reason::BODY_TOO_SLOW,
        allow: None,
    };
    // What the body may grow to: its declared length (hyper holds it to that), or the cap.
    let mut most = limits.cap;
    match declared_length(headers) {
        Ok(Some(n)) if n > limits.cap as u64 => return Err(too_large),
        Ok(Some(n)) => most = usize::try_from(n).unwrap_or(most),
        Ok(None) => {}
        Err(()) => {
            return Err(Rejection::Http {
                status: StatusCode::BAD_REQUEST,
                message: "Invalid Content-Length",
                reason: reason::BODY_CONTENT_LENGTH,
                allow: None,
            })
        }
    }
    let started = Instant::now();
    // (a `Vec`: its room grows exactly as reserved in the budgets)
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let elapsed = started.elapsed();
        if elapsed >= limits.timeout {
            return Err(too_slow);
        }
        if elapsed > BODY_RATE_GRACE
            && (buf.len() as f64) < limits.min_bytes_per_second as f64 * elapsed.as_secs_f64()
        {
            return Err(too_slow);
        }
        // Wake at least every half second to re-check the rate of a stalled body.
        let wait = (limits.timeout - elapsed).min(Duration::from_millis(500));
        let frame = match tokio::time::timeout(wait, body.frame()).await {
            Err(_) => continue,
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                return Err(Rejection::Http {
                    status: StatusCode::BAD_REQUEST,
                    message: "Request body could not be read",
                    reason: reason::BODY_READ,
                    allow: None,
                })
            }
            Ok(Some(Ok(frame))) => frame,
        };
        if let Ok(data) = frame.into_data() {
            let len = buf.len() + data.len();
            if len > limits.cap {
                return Err(too_large);
            }
            // The buffer's room is reserved in the request budgets before it is taken, as the
            // body arrives (doubling, up to its declared length or the cap): a caller holds
            // what it sent, never what it only declared.
            if len > buf.capacity() {
                let room = len.max(buf.capacity().saturating_mul(2)).min(most.max(len));
                if room > held.bytes() {
                    held.grow(room - held.bytes())
                        .map_err(super::rejection::over_request_budget)?;
                }
                buf.reserve_exact(room - buf.len());
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(buf))
}
