//! Who may start and keep a connection, per remote address and per peer, before and
//! beside libp2p's `connection_limits` (which counts only in total, and lets a reserved
//! peer skip every limit):
//! - at most `PENDING_PER_ADDRESS` handshakes in progress from one IP, so sockets from one
//!   machine that never finish a handshake cannot hold every pending slot and keep honest
//!   peers from other machines out (with the transport's handshake deadline, a silent
//!   socket holds its slot a few seconds at most);
//! - at most `ATTEMPTS_PER_ADDRESS_PER_S` new incoming connections a second from one IP
//!   (a burst of `ATTEMPTS_PER_ADDRESS_BURST`), so a machine that reconnects as fast as it
//!   is dropped cannot spend our handshakes; a validator behind the same address as an
//!   attacker shares its rate, as it shares its pending share;
//! - at most `per_peer` established connections per peer, reserved peers included (their
//!   reserved room lets them past the totals, not past this).
use libp2p::core::transport::PortUse;
use libp2p::core::Endpoint;
use libp2p::multiaddr::Protocol;
use libp2p::swarm::{
    dummy, ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandler, THandlerInEvent, THandlerOutEvent,
    ToSwarm,
};
use libp2p::{Multiaddr, PeerId};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::task::{Context, Poll};
use std::time::Instant;

/// Handshakes one address may have in progress at once.
pub const PENDING_PER_ADDRESS: u32 = 4;

/// New incoming connections one address may open a second, sustained, and in a burst.
pub const ATTEMPTS_PER_ADDRESS_PER_S: f64 = 8.0;
pub const ATTEMPTS_PER_ADDRESS_BURST: f64 = 32.0;
/// Addresses whose attempt rate is remembered at most: past it, those back to a full
/// burst are forgotten first, then all (a crowd of addresses regains its bursts, nothing
/// grows without bound).
pub const MAX_ADDRESSES: usize = 4096;

/// Why a connection was refused here.
#[derive(Debug)]
pub enum Refused {
    /// This address already has its share of handshakes in progress.
    Pending(IpAddr),
    /// This address opens connections faster than the stated rate.
    Rate(IpAddr),
    /// This peer already has its connections.
    PerPeer(PeerId, u32),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Pending(ip) => write!(f, "{ip} has {PENDING_PER_ADDRESS} handshakes in progress already"),
            Refused::Rate(ip) => write!(
                f,
                "{ip} opens connections faster than {ATTEMPTS_PER_ADDRESS_PER_S} a second (burst {ATTEMPTS_PER_ADDRESS_BURST})"
            ),
            Refused::PerPeer(peer, n) => write!(f, "{peer} has {n} connections already"),
        }
    }
}

impl std::error::Error for Refused {}

pub struct Admission {
    max_per_address: u32,
    per_peer: u32,
    pending: HashMap<IpAddr, u32>,
    by_connection: HashMap<ConnectionId, IpAddr>,
    /// Attempt tokens per address and when they were last refilled.
    attempts: HashMap<IpAddr, (f64, Instant)>,
    established: HashMap<PeerId, u32>,
}

impl Admission {
    pub fn new(max_per_address: u32, per_peer: u32) -> Admission {
        Admission {
            max_per_address: max_per_address.max(1),
            per_peer: per_peer.max(1),
            pending: HashMap::new(),
            by_connection: HashMap::new(),
            attempts: HashMap::new(),
            established: HashMap::new(),
        }
    }

    /// Takes one attempt token of `ip`'s, if it has one left.
    fn attempt(&mut self, ip: IpAddr, now: Instant) -> bool {
        if self.attempts.len() >= MAX_ADDRESSES && !self.attempts.contains_key(&ip) {
            let full = |(tokens, at): &(f64, Instant)| {
                tokens + now.duration_since(*at).as_secs_f64() * ATTEMPTS_PER_ADDRESS_PER_S
                    >= ATTEMPTS_PER_ADDRESS_BURST
            };
            self.attempts.retain(|_, bucket| !full(bucket));
            if self.attempts.len() >= MAX_ADDRESSES {
                self.attempts.clear();
            }
        }
        let (tokens, at) = self.attempts.entry(ip).or_insert((ATTEMPTS_PER_ADDRESS_BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * ATTEMPTS_PER_ADDRESS_PER_S)
            .min(ATTEMPTS_PER_ADDRESS_BURST);
        *at = now;
        if *tokens < 1.0 {
            return false;
        }
        *tokens -= 1.0;
        true
    }

    fn check_peer(&self, peer: PeerId) -> Result<(), ConnectionDenied> {
        let n = self.established.get(&peer).copied().unwrap_or(0);
        if n >= self.per_peer {
            return Err(ConnectionDenied::new(Refused::PerPeer(peer, n)));
        }
        Ok(())
    }

    fn done(&mut self, connection: ConnectionId) {
        let Some(ip) = self.by_connection.remove(&connection) else { return };
        if let Some(n) = self.pending.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.pending.remove(&ip);
            }
        }
    }
}

/// The IP address a multiaddr starts with, if it does.
fn ip_of(address: &Multiaddr) -> Option<IpAddr> {
    match address.iter().next()? {
        Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
        Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
        _ => None,
    }
}

impl NetworkBehaviour for Admission {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection: ConnectionId,
        _: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let Some(ip) = ip_of(remote) else { return Ok(()) };
        if self.pending.get(&ip).copied().unwrap_or(0) >= self.max_per_address {
            return Err(ConnectionDenied::new(Refused::Pending(ip)));
        }
        if !self.attempt(ip, Instant::now()) {
            return Err(ConnectionDenied::new(Refused::Rate(ip)));
        }
        *self.pending.entry(ip).or_default() += 1;
        self.by_connection.insert(connection, ip);
        Ok(())
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection: ConnectionId,
        peer: PeerId,
        _: &Multiaddr,
        _: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.done(connection);
        self.check_peer(peer)?;
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        _: ConnectionId,
        peer: PeerId,
        _: &Multiaddr,
        _: Endpoint,
        _: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.check_peer(peer)?;
        Ok(dummy::ConnectionHandler)
    }

    // Established connections are counted when the swarm reports them, not when this
    // behaviour accepts them: another behaviour may still refuse one.
    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ListenFailure(failure) => self.done(failure.connection_id),
            FromSwarm::ConnectionEstablished(established) => {
                self.done(established.connection_id);
                *self.established.entry(established.peer_id).or_default() += 1;
            }
            FromSwarm::ConnectionClosed(closed) => {
                if let Some(n) = self.established.get_mut(&closed.peer_id) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.established.remove(&closed.peer_id);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_connection_handler_event(&mut self, _: PeerId, _: ConnectionId, event: THandlerOutEvent<Self>) {
        match event {}
    }

    fn poll(&mut self, _: &mut Context<'_>) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_address_gets_its_burst_then_its_rate_and_others_are_untouched() {
        let mut admission = Admission::new(PENDING_PER_ADDRESS, 2);
        let (attacker, honest) = (IpAddr::from([127, 0, 0, 9]), IpAddr::from([127, 0, 0, 1]));
        let start = Instant::now();
        let taken = (0..100).filter(|_| admission.attempt(attacker, start)).count();
        assert_eq!(taken, ATTEMPTS_PER_ADDRESS_BURST as usize);
        assert!(admission.attempt(honest, start), "another address has its own burst");
        // One second later: the rate's worth again, no more.
        let later = start + Duration::from_secs(1);
        let taken = (0..100).filter(|_| admission.attempt(attacker, later)).count();
        assert_eq!(taken, ATTEMPTS_PER_ADDRESS_PER_S as usize);
    }

    #[test]
    fn remembered_addresses_stay_bounded() {
        let mut admission = Admission::new(PENDING_PER_ADDRESS, 2);
        let now = Instant::now();
        for i in 0..(3 * MAX_ADDRESSES as u32) {
            assert!(admission.attempt(IpAddr::from(i.to_be_bytes()), now));
        }
        assert!(admission.attempts.len() <= MAX_ADDRESSES);
    }
}
