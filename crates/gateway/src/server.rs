//! The HTTP side: a hyper HTTP/1.1 server on loopback, routing, auth and error bodies.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::Backend;

/// The listener task; aborted on drop.
pub(crate) struct Server {
    _token: String,
    _backend: Arc<dyn Backend>,
}

impl Server {
    pub(crate) async fn start(token: String, backend: Arc<dyn Backend>) -> std::io::Result<(SocketAddr, Server)> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        Ok((addr, Server { _token: token, _backend: backend }))
    }
}
