//! The libp2p behaviours a node's swarm runs, in the order they see a connection:
//! admission per address, connection limits, the block list, gossipsub, the sync
//! protocol's requests, identify and ping. `net.rs` builds them; `net/swarm_events.rs`
//! reads their events.

use super::codec::BytesCodec;
use libp2p::swarm::NetworkBehaviour;
use libp2p::{allow_block_list, connection_limits, gossipsub, identify, ping, request_response};

#[derive(NetworkBehaviour)]
pub struct Behaviour {
    // First: an address over its share of handshakes is refused before it takes one of
    // the slots all addresses share.
    pub admission: super::admission::Admission,
    pub limits: connection_limits::Behaviour,
    pub blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    pub gossipsub: gossipsub::Behaviour,
    pub sync: request_response::Behaviour<BytesCodec>,
    pub identify: identify::Behaviour,
    pub ping: ping::Behaviour,
}
