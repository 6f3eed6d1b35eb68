//! The gRPC listener's connection cap: accepted TCP connections counted against
//! [`crate::server::MAX_CONNECTIONS`], a connection over the cap closed at once, so a
//! flood of idle connections cannot exhaust the server.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::Stream;

/// A TCP connection counted against [`crate::server::MAX_CONNECTIONS`] until it is dropped.
pub(crate) struct CountedStream {
    inner: tokio::net::TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl tonic::transport::server::Connected for CountedStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl tokio::io::AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Accepted connections, at most `max` open at once: a connection over the cap is
/// closed at once (logged), so a flood of idle connections cannot exhaust the server.
pub(crate) fn limited_incoming(
    listener: tokio::net::TcpListener,
    max: usize,
) -> impl Stream<Item = std::io::Result<CountedStream>> + Send + 'static {
    let slots = Arc::new(tokio::sync::Semaphore::new(max));
    let (tx, rx) = mpsc::channel::<std::io::Result<CountedStream>>(16);
    tokio::spawn(async move {
        loop {
            let conn = listener.accept().await;
            let item = match conn {
                Ok((stream, peer)) => match Arc::clone(&slots).try_acquire_owned() {
                    Ok(permit) => {
                        let _ = stream.set_nodelay(true);
                        Ok(CountedStream {
                            inner: stream,
                            _permit: permit,
                        })
                    }
                    Err(_) => {
                        tracing::warn!(%peer, max, "gRPC: connection limit reached, closing a new connection");
                        continue;
                    }
                },
                Err(e) => {
                    tracing::debug!(%e, "gRPC accept");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            if tx.send(item).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

#[cfg(test)]
mod limit_tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio_stream::StreamExt;

    /// A connection over the cap is closed at once; one that closes frees its slot.
    #[tokio::test]
    async fn connections_over_the_cap_are_closed_and_a_freed_slot_is_reused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut incoming = Box::pin(limited_incoming(listener, 2));
        let wait = Duration::from_secs(10);
        let mut clients = Vec::new();
        let mut accepted = Vec::new();
        for _ in 0..2 {
            clients.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
            let conn = tokio::time::timeout(wait, incoming.next())
                .await
                .expect("accepted in time")
                .expect("stream open")
                .expect("accepted");
            accepted.push(conn);
        }
        // The third is closed by the server: EOF (or a reset) on the client.
        let mut third = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut buf = [0u8; 8];
        match tokio::time::timeout(wait, third.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            other => panic!("a connection over the cap stayed open: {other:?}"),
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(200), incoming.next())
                .await
                .is_err(),
            "a connection over the cap reached the server"
        );
        // One accepted connection ends: a new one is accepted again.
        drop(accepted.pop());
        let _fourth = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let conn = tokio::time::timeout(wait, incoming.next())
            .await
            .expect("accepted after a slot was freed")
            .expect("stream open");
        assert!(conn.is_ok());
    }
}
