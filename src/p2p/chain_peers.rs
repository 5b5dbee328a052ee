//! Peers and allow-list from the chain (ledger-spec/13): registered validators holding a
//! permit publish their libp2p address with `serve_axon`, and their ledger key in their
//! tip commitment (07). Pure over what the caller read from the chain.

use crate::bytes::ValidatorKey;
use crate::chain::{Axon, CommitmentRecord, Neuron};
use libp2p::Multiaddr;
use std::collections::BTreeSet;

/// What a node takes from the chain, refreshed as the chain changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainPeers {
    /// Addresses of the other permit-holding validators that published one.
    pub peers: Vec<Multiaddr>,
    /// Ledger keys committed by permit-holding validators: whose logs we keep.
    pub allowed: BTreeSet<ValidatorKey>,
}

/// `/ip4/IP/tcp/PORT` (or `/ip6/...`) for an axon.
pub fn axon_multiaddr(axon: &Axon) -> Multiaddr {
    let mut address = Multiaddr::empty();
    address.push(match axon.ip {
        std::net::IpAddr::V4(v4) => libp2p::multiaddr::Protocol::Ip4(v4),
        std::net::IpAddr::V6(v6) => libp2p::multiaddr::Protocol::Ip6(v6),
    });
    address.push(libp2p::multiaddr::Protocol::Tcp(axon.port));
    address
}

/// Peers and allow-list from the metagraph, the commitments and the axons; `own` (our
/// hotkey) is never our own peer.
pub fn chain_peers(neurons: &[Neuron], records: &[CommitmentRecord], axons: &[Axon], own: Option<&str>) -> ChainPeers {
    let validators: BTreeSet<&str> = neurons.iter().filter(|n| n.validator_permit).map(|n| n.hotkey.as_str()).collect();
    let allowed = crate::chain::ledger_commitment::listed_ledger_keys(neurons, records);
    // An address subtensor would not take as an axon (unspecified, 127.0.0.1, ::1) names
    // no one else's machine: it is not dialled, whatever a node serves.
    let mut peers: Vec<Multiaddr> = axons
        .iter()
        .filter(|a| validators.contains(a.hotkey.as_str()) && Some(a.hotkey.as_str()) != own)
        .filter(|a| crate::chain::check_published_axon(a.ip, a.port).is_ok())
        .map(axon_multiaddr)
        .collect();
    peers.sort();
    peers.dedup();
    ChainPeers { peers, allowed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::chain::LedgerCommitment;

    #[test]
    fn permit_holders_with_axons_are_peers_and_their_committed_keys_allowed() {
        let neuron = |uid, hotkey: &str, permit| Neuron {
            uid,
            hotkey: hotkey.into(),
            registration_block: 1,
            validator_permit: permit,
        };
        let neurons = [neuron(0, "v0", true), neuron(1, "v1", true), neuron(2, "miner", false), neuron(3, "v3", true)];
        let ledger = |byte: u8| LedgerCommitment {
            tip_hash: Hash32([0; 32]),
            ledger_key: ValidatorKey([byte; 32]),
            tip_height: 1,
            protocol: None,
        };
        let records = [
            CommitmentRecord::new("v0", 5, ledger(10).fields()),
            CommitmentRecord::new("v1", 5, ledger(11).fields()),
            // A miner's ledger-looking commitment does not make it a validator.
            CommitmentRecord::new("miner", 5, ledger(12).fields()),
        ];
        let axon =
            |hotkey: &str, port| Axon { hotkey: hotkey.into(), block: 3, ip: "127.0.0.2".parse().unwrap(), port };
        let at = |hotkey: &str, ip: &str| Axon { hotkey: hotkey.into(), block: 3, ip: ip.parse().unwrap(), port: 9 };
        let axons = [
            axon("v0", 4000),
            axon("v1", 4001),
            axon("miner", 4002),
            axon("v3", 4003),
            axon("gone", 4004),
            // Addresses no validator can be reached at: never dialled.
            at("v1", "127.0.0.1"),
            at("v3", "::1"),
            at("v1", "0.0.0.0"),
            at("v3", "::"),
        ];
        let found = chain_peers(&neurons, &records, &axons, Some("v0"));
        let peers: Vec<String> = found.peers.iter().map(ToString::to_string).collect();
        // v3 has no ledger commitment yet: dialled, but its log is not kept until it has.
        assert_eq!(peers, ["/ip4/127.0.0.2/tcp/4001", "/ip4/127.0.0.2/tcp/4003"]);
        assert_eq!(found.allowed, BTreeSet::from([ValidatorKey([10; 32]), ValidatorKey([11; 32])]));
        let v6 = Axon { hotkey: "v1".into(), block: 1, ip: "::1".parse().unwrap(), port: 9 };
        assert_eq!(axon_multiaddr(&v6).to_string(), "/ip6/::1/tcp/9");
    }
}
