//! Who may start and keep a connection, per remote address and per peer, before and
//! beside libp2p's `connection_limits` (which counts only in total, and lets a reserved
//! peer skip every limit):
//! - at most `PENDING_PER_ADDRESS` handshakes in progress from one IP, so sockets from one
//!   machine that never finish a handshake cannot hold every pending slot and keep honest
//!   peers from other machines out (with the transport's handshake deadline, a silent
//!   socket holds its slot a few seconds at most);
//! - room for handshakes that a crowd cannot take, as Bitcoin Core's netgroups keep
//!   outbound slots diverse: addresses the chain lists for validators (and `--peer`) have
//!   a pool of their own; strangers share theirs, and one network group (a /24 of IPv4, a
//!   /48 of IPv6: one machine's or one provider's block) holds at most
//!   `PENDING_PER_GROUP` of it, so a crowd of addresses from a few groups leaves room for
//!   the rest. Our own dials are outbound and never wait on either pool;
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

/// Handshakes one network group of strangers may have in progress at once.
pub const PENDING_PER_GROUP: u32 = 8;

/// Handshakes in progress at once from the addresses the chain lists (and `--peer`).
pub const LISTED_PENDING: u32 = 16;

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
    /// This address's network group already has its share of the strangers' handshakes.
    Group(IpAddr),
    /// Every handshake slot of its kind (strangers', or listed addresses') is taken.
    Full { listed: bool },
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
            Refused::Group(ip) => {
                write!(f, "the network group of {ip} has {PENDING_PER_GROUP} handshakes in progress already")
            }
            Refused::Full { listed: true } => write!(f, "every handshake slot of listed validators is taken"),
            Refused::Full { listed: false } => write!(f, "every handshake slot of strangers is taken"),
        }
    }
}

impl std::error::Error for Refused {}

/// A network group: the first three bytes of an IPv4 address (/24), the first six of
/// an IPv6 one (/48); an IPv4-mapped IPv6 address is its IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Group([u8; 6]);

impl Group {
    pub fn of(ip: IpAddr) -> Group {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(v4) => {
                let [a, b, c, _] = v4.octets();
                Group([4, a, b, c, 0, 0])
            }
            IpAddr::V6(v6) => {
                let o = v6.octets();
                Group([o[0], o[1], o[2], o[3], o[4], o[5]])
            }
        }
    }
}

pub struct Admission {
    max_per_address: u32,
    per_peer: u32,
    /// Handshakes strangers may have in progress at once, all groups together.
    strangers: u32,
    pending: HashMap<IpAddr, u32>,
    pending_groups: HashMap<Group, u32>,
    /// Handshakes in progress (strangers', listed addresses').
    pending_strangers: u32,
    pending_listed: u32,
    /// Addresses the chain lists for validators, and the configured peers'.
    listed: std::collections::HashSet<IpAddr>,
    /// Each handshake in progress: its address and whether it was listed when it came.
    by_connection: HashMap<ConnectionId, (IpAddr, bool)>,
    /// Attempt tokens per address and when they were last refilled.
    attempts: HashMap<IpAddr, (f64, Instant)>,
    established: HashMap<PeerId, u32>,
}

impl Admission {
    /// `strangers`: handshakes in progress at once from addresses not listed.
    pub fn new(max_per_address: u32, per_peer: u32, strangers: u32) -> Admission {
        Admission {
            max_per_address: max_per_address.max(1),
            per_peer: per_peer.max(1),
            strangers: strangers.max(1),
            pending: HashMap::new(),
            pending_groups: HashMap::new(),
            pending_strangers: 0,
            pending_listed: 0,
            listed: Default::default(),
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

    /// The addresses the chain lists for validators, and the configured peers': their
    /// handshakes have a pool of their own.
    pub fn set_listed(&mut self, ips: impl IntoIterator<Item = IpAddr>) {
        self.listed = ips.into_iter().collect();
    }

    /// Counts a handshake of `ip` in progress if there is room for it.
    fn admit(&mut self, connection: ConnectionId, ip: IpAddr, now: Instant) -> Result<(), Refused> {
        if self.pending.get(&ip).copied().unwrap_or(0) >= self.max_per_address {
            return Err(Refused::Pending(ip));
        }
        let listed = self.listed.contains(&ip);
        let group = Group::of(ip);
        match listed {
            true if self.pending_listed >= LISTED_PENDING => return Err(Refused::Full { listed }),
            false if self.pending_strangers >= self.strangers => return Err(Refused::Full { listed }),
            false if self.pending_groups.get(&group).copied().unwrap_or(0) >= PENDING_PER_GROUP => {
                return Err(Refused::Group(ip))
            }
            _ => {}
        }
        if !self.attempt(ip, now) {
            return Err(Refused::Rate(ip));
        }
        *self.pending.entry(ip).or_default() += 1;
        match listed {
            true => self.pending_listed += 1,
            false => {
                self.pending_strangers += 1;
                *self.pending_groups.entry(group).or_default() += 1;
            }
        }
        self.by_connection.insert(connection, (ip, listed));
        Ok(())
    }

    fn done(&mut self, connection: ConnectionId) {
        let Some((ip, listed)) = self.by_connection.remove(&connection) else { return };
        let less = |n: &mut u32| {
            *n = n.saturating_sub(1);
            *n == 0
        };
        if self.pending.get_mut(&ip).is_some_and(less) {
            self.pending.remove(&ip);
        }
        match listed {
            true => self.pending_listed = self.pending_listed.saturating_sub(1),
            false => {
                self.pending_strangers = self.pending_strangers.saturating_sub(1);
                let group = Group::of(ip);
                if self.pending_groups.get_mut(&group).is_some_and(less) {
                    self.pending_groups.remove(&group);
                }
            }
        }
    }
}

/// The IP address a multiaddr starts with, if it does.
pub fn ip_of(address: &Multiaddr) -> Option<IpAddr> {
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
        self.admit(connection, ip, Instant::now()).map_err(ConnectionDenied::new)
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
        let mut admission = Admission::new(PENDING_PER_ADDRESS, 2, 16);
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
        let mut admission = Admission::new(PENDING_PER_ADDRESS, 2, 16);
        let now = Instant::now();
        for i in 0..(3 * MAX_ADDRESSES as u32) {
            assert!(admission.attempt(IpAddr::from(i.to_be_bytes()), now));
        }
        assert!(admission.attempts.len() <= MAX_ADDRESSES);
    }

    /// Issue 74, item 1: 20 half-open sockets from 4 addresses of one /24, or 64 from 25,
    /// took every handshake slot and kept a fresh honest peer out for seconds.
    #[test]
    fn a_crowd_from_a_few_groups_leaves_room_for_other_groups_and_for_listed_addresses() {
        let mut admission = Admission::new(PENDING_PER_ADDRESS, 2, 16);
        let now = Instant::now();
        let mut next = 0usize;
        let mut connection = || {
            next += 1;
            ConnectionId::new_unchecked(next)
        };
        // The crowd: 25 addresses of 127.0.0.0/24, each trying 4 handshakes.
        let crowd: Vec<IpAddr> = (2..27u8).map(|d| IpAddr::from([127, 0, 0, d])).collect();
        let admitted =
            crowd.iter().flat_map(|ip| [*ip; 4]).filter(|ip| admission.admit(connection(), *ip, now).is_ok());
        assert_eq!(admitted.count(), PENDING_PER_GROUP as usize, "one group holds its share of the strangers' pool");
        // A stranger of another group gets in; so does a listed address, even of the
        // crowd's own group.
        let other_group = IpAddr::from([10, 1, 2, 3]);
        assert!(admission.admit(connection(), other_group, now).is_ok());
        let listed = IpAddr::from([127, 0, 0, 1]);
        assert!(
            matches!(admission.admit(connection(), listed, now), Err(Refused::Group(_))),
            "a stranger until listed"
        );
        admission.set_listed([listed]);
        assert!(admission.admit(connection(), listed, now).is_ok(), "listed: its own pool");
        // Strangers from many groups fill their pool and no more; the listed pool stays.
        for d in 0..64u8 {
            let _ = admission.admit(connection(), IpAddr::from([10, d, 0, 1]), now);
        }
        assert_eq!(admission.pending_strangers, 16);
        assert!(matches!(admission.admit(connection(), IpAddr::from([11, 0, 0, 1]), now), Err(Refused::Full { .. })));
        assert!(admission.admit(connection(), listed, now).is_ok());
        // A finished handshake gives its slot back, to its pool and its group.
        let first = ConnectionId::new_unchecked(1);
        admission.done(first);
        assert_eq!(admission.pending_strangers, 15);
        assert_eq!(admission.pending_groups[&Group::of(crowd[0])], PENDING_PER_GROUP - 1);
    }

    #[test]
    fn groups_are_a_24_of_ipv4_and_a_48_of_ipv6() {
        let v4 = |a: [u8; 4]| Group::of(IpAddr::from(a));
        assert_eq!(v4([192, 0, 2, 1]), v4([192, 0, 2, 254]));
        assert_ne!(v4([192, 0, 2, 1]), v4([192, 0, 3, 1]));
        let v6 = |text: &str| Group::of(text.parse::<IpAddr>().unwrap());
        assert_eq!(v6("2001:db8:1::1"), v6("2001:db8:1:ffff::2"), "one /48");
        assert_ne!(v6("2001:db8:1::1"), v6("2001:db8:2::1"));
        assert_eq!(v6("::ffff:192.0.2.7"), v4([192, 0, 2, 9]), "a mapped IPv4 address is its IPv4 group");
    }
}
