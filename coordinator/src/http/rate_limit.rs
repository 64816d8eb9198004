//! A limit on wrong pairing codes per client, in memory: each peer address
//! has a token bucket; a redeem takes a token before the code is looked up
//! and gives it back unless the code was wrong, so guessing costs the
//! guesser, not the database, and right codes from elsewhere are unaffected.
//!
//! Peers are told apart by IP address (IPv6 by its /64, which one host
//! usually holds whole). Behind a reverse proxy every client has the proxy's
//! address and shares its bucket: the `Forwarded` headers are not trusted,
//! since anyone can send them. Memory is bounded: at most `max_peers`
//! buckets; when full, buckets that have refilled go (they are the same as
//! none), and if none has, new peers share one overflow bucket.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong codes a peer may try in a burst.
pub const REDEEM_BURST: u32 = 20;
/// Then one more every this long.
pub const REDEEM_REFILL: Duration = Duration::from_secs(3);
/// Peers tracked at most.
pub const REDEEM_MAX_PEERS: usize = 10_000;

/// Where requests without a known peer address, and new peers when the
/// table is full, are counted.
const OVERFLOW: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

pub struct RateLimiter {
    burst: f64,
    refill: Duration,
    max_peers: usize,
    peers: Mutex<HashMap<IpAddr, Bucket>>,
}

impl RateLimiter {
    pub fn new(burst: u32, refill: Duration, max_peers: usize) -> Self {
        Self {
            burst: f64::from(burst.max(1)),
            refill: refill.max(Duration::from_millis(1)),
            max_peers: max_peers.max(1),
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// The limit on pairing-code redeems.
    pub fn for_redeems() -> Self {
        Self::new(REDEEM_BURST, REDEEM_REFILL, REDEEM_MAX_PEERS)
    }

    /// Takes a token for `peer`: `Err(seconds)` to wait when there is none.
    pub fn take(&self, peer: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let key = self.key(&mut peers, peer, now);
        let bucket = peers.entry(key).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        self.refill(bucket, now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = self.refill.as_secs_f64() * (1.0 - bucket.tokens);
        Err((wait.ceil() as u64).max(1))
    }

    /// Gives back the token [`RateLimiter::take`] took for `peer`.
    pub fn give_back(&self, peer: Option<IpAddr>, now: Instant) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let key = peer.map_or(OVERFLOW, canonical);
        let key = if peers.contains_key(&key) {
            key
        } else {
            OVERFLOW
        };
        if let Some(bucket) = peers.get_mut(&key) {
            self.refill(bucket, now);
            bucket.tokens = (bucket.tokens + 1.0).min(self.burst);
        }
    }

    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(bucket.at);
        let earned = elapsed.as_secs_f64() / self.refill.as_secs_f64();
        bucket.tokens = (bucket.tokens + earned).min(self.burst);
        bucket.at = now;
    }

    /// `peer`'s bucket key, making room for it when the table is full.
    fn key(
        &self,
        peers: &mut HashMap<IpAddr, Bucket>,
        peer: Option<IpAddr>,
        now: Instant,
    ) -> IpAddr {
        let Some(peer) = peer.map(canonical) else {
            return OVERFLOW;
        };
        // One slot is kept for the overflow bucket.
        if peers.contains_key(&peer) || peers.len() < self.max_peers - 1 {
            return peer;
        }
        peers.retain(|key, bucket| {
            self.refill(bucket, now);
            *key == OVERFLOW || bucket.tokens < self.burst
        });
        if peers.len() < self.max_peers - 1 {
            peer
        } else {
            OVERFLOW
        }
    }

    /// Peers tracked now (for tests).
    pub fn tracked(&self) -> usize {
        self.peers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// IPv4 as itself (also when mapped into IPv6); IPv6 by its /64.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_peer_gets_its_burst_then_waits_for_the_refill() {
        let limiter = RateLimiter::new(3, Duration::from_secs(10), 100);
        let t0 = Instant::now();
        for _ in 0..3 {
            limiter.take(ip("10.0.0.1"), t0).unwrap();
        }
        assert_eq!(limiter.take(ip("10.0.0.1"), t0), Err(10));
        assert_eq!(
            limiter.take(ip("10.0.0.1"), t0 + Duration::from_secs(4)),
            Err(6)
        );
        // Another peer is unaffected.
        limiter.take(ip("10.0.0.2"), t0).unwrap();
        // One token back after the refill interval.
        let t1 = t0 + Duration::from_secs(10);
        limiter.take(ip("10.0.0.1"), t1).unwrap();
        assert!(limiter.take(ip("10.0.0.1"), t1).is_err());
        // A token given back (a right code) is usable again.
        limiter.give_back(ip("10.0.0.1"), t1);
        limiter.take(ip("10.0.0.1"), t1).unwrap();
    }

    #[test]
    fn ipv6_peers_are_told_apart_by_their_64_and_mapped_ipv4_is_ipv4() {
        let limiter = RateLimiter::new(1, Duration::from_secs(60), 100);
        let t0 = Instant::now();
        limiter.take(ip("2001:db8:1:2::1"), t0).unwrap();
        assert!(limiter.take(ip("2001:db8:1:2:ffff::9"), t0).is_err());
        limiter.take(ip("2001:db8:1:3::1"), t0).unwrap();
        limiter.take(ip("192.0.2.7"), t0).unwrap();
        assert!(limiter.take(ip("::ffff:192.0.2.7"), t0).is_err());
    }

    #[test]
    fn the_table_stays_bounded_and_overflow_peers_share_one_bucket() {
        let limiter = RateLimiter::new(2, Duration::from_secs(60), 4);
        let t0 = Instant::now();
        for i in 1..=10 {
            let _ = limiter.take(ip(&format!("10.0.0.{i}")), t0);
        }
        assert!(limiter.tracked() <= 4, "{}", limiter.tracked());
        // Peers 4.. shared the overflow bucket: it is empty.
        assert!(limiter.take(ip("10.0.1.1"), t0).is_err());
        // Tracked peers keep their own.
        limiter.take(ip("10.0.0.1"), t0).unwrap();
        // Once buckets have refilled, they make room for new peers.
        let later = t0 + Duration::from_secs(3600);
        limiter.take(ip("10.0.2.1"), later).unwrap();
        limiter.take(ip("10.0.2.1"), later).unwrap();
        assert!(limiter.take(ip("10.0.2.1"), later).is_err());
        limiter.take(ip("10.0.2.2"), later).unwrap();
        assert!(limiter.tracked() <= 4);
    }
}
