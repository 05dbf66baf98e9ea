//! Open connections per client address: one client (a slowloris, a slow reader) cannot take
//! every connection slot of the edge. Excess connections are closed at accept.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

pub struct ConnectionsPerClient {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// Holds one connection slot of a client; released on drop.
pub struct ClientSlot {
    owner: Arc<ConnectionsPerClient>,
    ip: IpAddr,
}

impl ConnectionsPerClient {
    pub fn new(max: usize) -> Arc<ConnectionsPerClient> {
        Arc::new(ConnectionsPerClient {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for a new connection from `ip`, or None when it already holds `max`.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let ip = canonical(ip);
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
        open.get(&canonical(ip)).copied().unwrap_or(0)
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

/// An IPv4-mapped IPv6 peer counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_client_slots_are_bounded_and_released() {
        let c = ConnectionsPerClient::new(2);
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
}
