//! A job's output, shipped to the coordinator in order as it comes.

use std::sync::Arc;

use drover_wire::{LogChunk, LogStream};
use tokio::sync::mpsc;

use super::Runner;

impl Runner {
    /// Ships output to the coordinator in order, numbered from 0; merges
    /// what piles up so a chatty job costs few requests.
    pub(super) async fn upload_logs(
        self: Arc<Self>,
        lease: String,
        mut rx: mpsc::Receiver<(LogStream, Vec<u8>)>,
    ) {
        let mut shipper = LogShipper {
            runner: &self,
            lease: &lease,
            seq: 0,
            gone: false,
        };
        let mut pending: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        let index = |s: LogStream| match s {
            LogStream::Stdout => 0,
            LogStream::Stderr => 1,
        };
        while let Some((stream, bytes)) = rx.recv().await {
            let i = index(stream);
            pending[i].extend_from_slice(&bytes);
            let mut other = None;
            while pending[i].len() < MAX_CHUNK {
                match rx.try_recv() {
                    Ok((s, b)) if s == stream => pending[i].extend_from_slice(&b),
                    Ok(next) => {
                        other = Some(next);
                        break;
                    }
                    Err(_) => break,
                }
            }
            shipper
                .send(stream, take_utf8(&mut pending[i], false))
                .await;
            if let Some((s, b)) = other {
                let j = index(s);
                pending[j].extend_from_slice(&b);
                shipper.send(s, take_utf8(&mut pending[j], false)).await;
            }
        }
        for stream in [LogStream::Stdout, LogStream::Stderr] {
            shipper
                .send(stream, take_utf8(&mut pending[index(stream)], true))
                .await;
        }
    }
}

struct LogShipper<'a> {
    runner: &'a Runner,
    lease: &'a str,
    seq: u64,
    /// The lease is gone (or the coordinator stayed away): stop shipping.
    gone: bool,
}

impl LogShipper<'_> {
    async fn send(&mut self, stream: LogStream, data: String) {
        if data.is_empty() || self.gone {
            return;
        }
        let chunk = LogChunk {
            seq: self.seq,
            stream,
            data,
        };
        self.seq += 1;
        let mut backoff = self.runner.backoff();
        for _ in 0..30 {
            let r = self.runner.client.log(self.lease, &chunk).await;
            self.runner.link(&r);
            match r {
                Ok(()) => return,
                Err(e) if e.is_recoverable() => backoff.wait().await,
                Err(_) => break,
            }
        }
        self.gone = true;
    }
}

/// Text up to the last whole UTF-8 character; an incomplete tail stays in `buf`.
fn take_utf8(buf: &mut Vec<u8>, at_end: bool) -> String {
    let cut = match std::str::from_utf8(buf) {
        Ok(_) => buf.len(),
        Err(e) if e.error_len().is_none() && !at_end => e.valid_up_to(),
        Err(_) => buf.len(),
    };
    let rest = buf.split_off(cut);
    let text = String::from_utf8_lossy(buf).into_owned();
    *buf = rest;
    text
}

const MAX_CHUNK: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_reads_is_kept_whole() {
        let snow = "☃".as_bytes();
        let mut buf = b"ab".to_vec();
        buf.extend_from_slice(&snow[..2]);
        assert_eq!(take_utf8(&mut buf, false), "ab");
        assert_eq!(buf, snow[..2]);
        buf.extend_from_slice(&snow[2..]);
        assert_eq!(take_utf8(&mut buf, false), "☃");
        assert!(buf.is_empty());
        let mut bad = vec![b'x', 0xff, b'y'];
        assert_eq!(take_utf8(&mut bad, false), "x\u{fffd}y");
        let mut tail = snow[..1].to_vec();
        assert_eq!(take_utf8(&mut tail, true), "\u{fffd}");
    }
}
