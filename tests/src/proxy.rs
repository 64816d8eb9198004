//! A fault-injecting TCP proxy: put it between a client (a runner, the CLI)
//! and the coordinator, then cut, slow or reset the link while they talk.
//! Real sockets on loopback, port 0, run by the test's own runtime.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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
    /// and delivered if the link heals (as TCP would retransmit it).
    BlackHole,
    /// Every piece of data waits this long before it is forwarded (and a
    /// partition that starts meanwhile holds it); so does the end of the
    /// stream, which TCP sends after the data.
    Delay(Duration),
    /// Every connection is reset (RST), and new ones are reset at once.
    Reset,
    /// Requests reach the server, but a connection is reset as soon as the
    /// server answers: the client cannot tell whether its call took effect.
    LoseAnswers,
}

pub struct Proxy {
    addr: SocketAddr,
    fault: watch::Sender<Fault>,
    /// Everything forwarded to the server, in order.
    requests: Arc<Mutex<Vec<u8>>>,
    /// Pieces of data forwarded to clients.
    answers: Arc<AtomicUsize>,
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
        let requests = Arc::<Mutex<Vec<u8>>>::default();
        let answers = Arc::<AtomicUsize>::default();
        let (record, count) = (requests.clone(), answers.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *faults.borrow() == Fault::Reset {
                    reset(&client);
                    continue;
                }
                let sides = (Side::Requests(record.clone()), Side::Answers(count.clone()));
                let faults = faults.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        relay(client, server, faults, sides).await;
                    }
                });
            }
        });
        Self {
            addr,
            fault,
            requests,
            answers,
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

    /// Everything forwarded to the server so far (requests, for HTTP).
    pub fn requests(&self) -> Vec<u8> {
        self.requests.lock().expect("requests").clone()
    }

    /// How many pieces of data have been forwarded to clients so far: a
    /// test waits for it to grow to act just after a client heard back.
    pub fn answers(&self) -> usize {
        self.answers.load(Ordering::SeqCst)
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

/// Which way data goes, and where it is accounted for.
enum Side {
    Requests(Arc<Mutex<Vec<u8>>>),
    Answers(Arc<AtomicUsize>),
}

async fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    faults: watch::Receiver<Fault>,
    (requests, answers): (Side, Side),
) {
    {
        let (client_read, client_write) = client.split();
        let (server_read, server_write) = server.split();
        let up = forward(client_read, server_write, faults.clone(), requests);
        let down = forward(server_read, client_write, faults.clone(), answers);
        let mut watch_reset = faults;
        let reset_now = watch_reset.wait_for(|f| *f == Fault::Reset);
        tokio::pin!(up, down, reset_now);
        let (mut up_done, mut down_done) = (false, false);
        let wants_reset = loop {
            tokio::select! {
                r = &mut up, if !up_done => if r { break true } else { up_done = true },
                r = &mut down, if !down_done => if r { break true } else { down_done = true },
                _ = &mut reset_now => break true,
            }
            if up_done && down_done {
                break false;
            }
        };
        if !wants_reset {
            return;
        }
    }
    reset(&client);
    reset(&server);
}

/// Copies one direction, applying the fault in force to each piece; answers
/// `true` when the connection is to be reset.
async fn forward(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut faults: watch::Receiver<Fault>,
    side: Side,
) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) => {
                let fault = *faults.borrow();
                if let Fault::Delay(delay) = fault {
                    tokio::time::sleep(delay).await;
                }
                break;
            }
            Err(_) => break,
            Ok(n) => n,
        };
        let fault = *faults.borrow();
        if let Fault::Delay(delay) = fault {
            tokio::time::sleep(delay).await;
        }
        let fault = match faults.wait_for(|f| *f != Fault::BlackHole).await {
            Ok(f) => *f,
            Err(_) => return true,
        };
        match (&side, fault) {
            (_, Fault::Reset) | (Side::Answers(_), Fault::LoseAnswers) => return true,
            (Side::Requests(record), _) => {
                record.lock().expect("record").extend_from_slice(&buf[..n]);
            }
            (Side::Answers(_), _) => {}
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if let Side::Answers(count) = &side {
            count.fetch_add(1, Ordering::SeqCst);
        }
    }
    let _ = to.shutdown().await;
    false
}
