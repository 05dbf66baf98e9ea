//! Open connections per client address: one client (a slowloris, a slow reader) cannot take
//! every connection slot of the edge. Excess connections are closed at accept. An IPv6 client
//! is its prefix (`limits.client_ipv6_prefix`, as for the rates): a host with a /64 rotating
//! its source address is one client.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::rate::client_key;

pub struct ConnectionsPerClient {
    max: usize,
    /// IPv6 addresses are grouped by this prefix length.
    ipv6_prefix: u8,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// Holds one connection slot of a client; released on drop.
pub struct ClientSlot {
    owner: Arc<ConnectionsPerClient>,
    ip: IpAddr,
}

impl ConnectionsPerClient {
    pub fn new(max: usize, ipv6_prefix: u8) -> Arc<ConnectionsPerClient> {
        Arc::new(ConnectionsPerClient {
            max,
            ipv6_prefix,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a new connection from `ip`, or None when it already holds `max`.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let ip = client_key(ip, self.ipv6_prefix);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            owner: self.clone(),
            ip,
        })
    }

    pub fn open(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&client_key(ip, self.ipv6_prefix))
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_client_slots_are_bounded_and_released() {
        let c = ConnectionsPerClient::new(2, 64);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let s1 = c.acquire(a).unwrap();
        let s2 = c.acquire(mapped).unwrap();
        assert!(
            c.acquire(a).is_none(),
            "a mapped address is the same client"
        );
        let s3 = c.acquire(b).unwrap();
        assert_eq!(c.open(a), 2);
        drop(s1);
        assert!(c.acquire(a).is_some());
        drop((s2, s3));
        assert_eq!(c.open(b), 0);
        assert!(c.open.lock().unwrap().len() <= 1);
    }

    /// An IPv6 client is its prefix: rotating addresses inside it buys no more slots; another
    /// prefix is another client.
    #[test]
    fn an_ipv6_client_is_its_prefix() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for (prefix, same, other) in [
            (64, "2001:db8:0:1::ffff", "2001:db8:0:2::1"),
            (48, "2001:db8:0:ffff::1", "2001:db8:1::1"),
            (128, "2001:db8:0:1::1", "2001:db8:0:1::2"),
        ] {
            let c = ConnectionsPerClient::new(2, prefix);
            let _s1 = c.acquire(ip("2001:db8:0:1::1")).unwrap();
            let _s2 = c.acquire(ip(same)).unwrap();
            let third = c.acquire(ip("2001:db8:0:1::3"));
            assert_eq!(third.is_none(), prefix != 128, "/{prefix}");
            assert!(c.acquire(ip(other)).is_some(), "/{prefix}");
        }
    }
}
