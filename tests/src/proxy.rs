//! A fault-injecting TCP proxy: put it between a runner and the
//! coordinator, then cut, slow or reset the link while they talk. Real
//! sockets on loopback, port 0, in the test's own runtime.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does to the traffic, from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything as it comes.
    Pass,
    /// A partition: connections stay open and new ones are accepted, but
    /// nothing goes through either way. What was sent meanwhile is held,
    /// and delivered when the link heals (as TCP would retransmit it).
    BlackHole,
    /// Every piece of data waits this long before it is forwarded.
    Delay(Duration),
    /// Every connection is reset (RST), and new ones are reset at once.
    Reset,
}

pub struct Proxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a fresh loopback port forwarding to `upstream`, a URL
    /// (`http://127.0.0.1:7700`) or an address (`127.0.0.1:7700`).
    pub async fn start(upstream: &str) -> Self {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .expect("an upstream address host:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (fault, faults) = watch::channel(Fault::Pass);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *faults.borrow() == Fault::Reset {
                    reset(&client);
                    continue;
                }
                let faults = faults.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, faults).await;
                    }
                });
            }
        });
        Self {
            addr,
            fault,
            accept,
        }
    }

    /// The URL to give clients instead of the upstream's.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.set(Fault::Reset);
        self.accept.abort();
    }
}

/// Closes with RST rather than FIN: the peer sees "connection reset".
fn reset(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}

async fn relay(mut client: TcpStream, mut server: TcpStream, faults: watch::Receiver<Fault>) {
    {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let mut watch_reset = faults.clone();
        tokio::select! {
            _ = async {
                tokio::join!(
                    forward(client_read, server_write, faults.clone()),
                    forward(server_read, client_write, faults),
                )
            } => return,
            _ = watch_reset.wait_for(|f| *f == Fault::Reset) => {}
        }
    }
    reset(&client);
    reset(&server);
}

/// Copies one direction, applying the fault in force to each piece.
async fn forward(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut faults: watch::Receiver<Fault>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let fault = match faults.wait_for(|f| *f != Fault::BlackHole).await {
            Ok(f) => *f,
            Err(_) => return,
        };
        if let Fault::Delay(delay) = fault {
            tokio::time::sleep(delay).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
