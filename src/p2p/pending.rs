//! Handshakes in progress per remote address: at most `max_per_address` at once from one
//! IP, so sockets from one machine that open and never finish a handshake cannot hold
//! every pending slot (`connection_limits` counts them only in total) and keep honest
//! peers from other machines out. Combined with the transport's handshake deadline, a
//! silent socket holds its slot a few seconds at most.

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

/// Handshakes one address may have in progress at once.
pub const PENDING_PER_ADDRESS: u32 = 4;

/// Refused: this address already has its share of handshakes in progress.
#[derive(Debug)]
pub struct TooManyFromAddress(pub IpAddr);

impl std::fmt::Display for TooManyFromAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} has {PENDING_PER_ADDRESS} handshakes in progress already", self.0)
    }
}

impl std::error::Error for TooManyFromAddress {}

pub struct PendingPerAddress {
    max_per_address: u32,
    pending: HashMap<IpAddr, u32>,
    by_connection: HashMap<ConnectionId, IpAddr>,
}

impl PendingPerAddress {
    pub fn new(max_per_address: u32) -> PendingPerAddress {
        PendingPerAddress {
            max_per_address: max_per_address.max(1),
            pending: HashMap::new(),
            by_connection: HashMap::new(),
        }
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

impl NetworkBehaviour for PendingPerAddress {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection: ConnectionId,
        _: &Multiaddr,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        let Some(ip) = ip_of(remote) else { return Ok(()) };
        let n = self.pending.entry(ip).or_default();
        if *n >= self.max_per_address {
            return Err(ConnectionDenied::new(TooManyFromAddress(ip)));
        }
        *n += 1;
        self.by_connection.insert(connection, ip);
        Ok(())
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection: ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.done(connection);
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        _: ConnectionId,
        _: PeerId,
        _: &Multiaddr,
        _: Endpoint,
        _: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ListenFailure(failure) => self.done(failure.connection_id),
            FromSwarm::ConnectionEstablished(established) => self.done(established.connection_id),
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
