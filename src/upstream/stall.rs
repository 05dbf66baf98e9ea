//! The agents' HTTP/1.1 connector, whose connections fail a write that waits too long for
//! the agent ([`crate::write_stall`]; the HTTP/2 dial wraps its streams alike).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;

use crate::write_stall::WriteStall;

/// A connector whose connections are [`WriteStall`]s.
#[derive(Clone)]
pub struct StallLimit<C> {
    inner: C,
    limit: Duration,
}

impl<C> StallLimit<C> {
    pub fn new(inner: C, limit: Duration) -> StallLimit<C> {
        StallLimit { inner, limit }
    }
}

impl<C> tower_service::Service<Uri> for StallLimit<C>
where
    C: tower_service::Service<Uri>,
    C::Future: Send + 'static,
{
    type Response = WriteStall<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move { Ok(WriteStall::new(connecting.await?, limit)) })
    }
}
