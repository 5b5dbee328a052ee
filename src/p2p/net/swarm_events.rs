//! The actor's side of the sync machine: libp2p's swarm events translated into the
//! protocol's inputs, and its outputs applied to the swarm (gossip validation, requests
//! and responses, blocking a peer that sent invalid data), with what that needs kept
//! between events.

use crate::budget::{Held, MemoryBudget};
use crate::ledger::event::Evidence;
use crate::p2p::behaviour::{Behaviour, BehaviourEvent};
use crate::p2p::codec::{blames_sender, SyncRequest};
use crate::p2p::protocol::{ChannelToken, Input, MessageToken, Output, RequestId, Validation};
use libp2p::gossipsub::{self, IdentTopic, MessageAcceptance};
use libp2p::request_response::{self, OutboundRequestId, ResponseChannel};
use libp2p::swarm::SwarmEvent;
use libp2p::{ping, Multiaddr, PeerId, Swarm};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Peers blocked for misbehaviour, remembered at most (the oldest is forgotten first, so
/// a crowd of throwaway identities cannot grow the list without bound).
pub const MAX_BLOCKED_PEERS: usize = 4096;
/// How long a block lasts. Not for good: a block that an honest peer earned by a fault of
/// ours or a rule too tight would otherwise cut it off until we restart, and a hostile
/// peer gains one reconnect per period, which the limits bound like any other.
pub const BLOCK_MS: u64 = 600_000;

/// Blocked peers and when each block ends, oldest first: at most `MAX_BLOCKED_PEERS`,
/// each for `BLOCK_MS`.
#[derive(Debug)]
pub(super) struct BlockList<P> {
    entries: VecDeque<(P, u64)>,
}

impl<P> Default for BlockList<P> {
    fn default() -> Self {
        BlockList { entries: VecDeque::new() }
    }
}

impl<P: PartialEq> BlockList<P> {
    /// Blocks `peer` from `now_ms` on; returns a peer forgotten to make room.
    pub(super) fn block(&mut self, peer: P, now_ms: u64) -> Option<P> {
        self.entries.retain(|(p, _)| *p != peer);
        self.entries.push_back((peer, now_ms.saturating_add(BLOCK_MS)));
        if self.entries.len() > MAX_BLOCKED_PEERS {
            return self.entries.pop_front().map(|(p, _)| p);
        }
        None
    }

    /// A peer whose block has ended by `now_ms`, removed. Every block lasts as long, so
    /// ends come in blocking order and only the front needs looking at.
    pub(super) fn next_expired(&mut self, now_ms: u64) -> Option<P> {
        if self.entries.front().is_some_and(|(_, until)| *until <= now_ms) {
            return self.entries.pop_front().map(|(p, _)| p);
        }
        None
    }

    pub(super) fn peers(&self) -> impl Iterator<Item = &P> {
        self.entries.iter().map(|(p, _)| p)
    }
}

#[derive(Default)]
pub(super) struct ActorState {
    pub(super) next_token: u64,
    pub(super) gossip: HashMap<MessageToken, gossipsub::MessageId>,
    pub(super) channels: HashMap<ChannelToken, ResponseChannel<Held>>,
    pub(super) requests: HashMap<OutboundRequestId, RequestId>,
    pub(super) dialled: HashMap<Multiaddr, PeerId>,
    pub(super) blocked: BlockList<PeerId>,
    pub(super) status_dirty: bool,
    /// Responses dropped because the memory budget was spent.
    pub(super) responses_refused: u64,
}

/// An input for the protocol, with the reservation of the bytes it carries (if any).
type Translated = (Input<PeerId>, Option<Held>);

impl ActorState {
    pub(super) fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    pub(super) fn translate(
        &mut self,
        event: SwarmEvent<BehaviourEvent>,
        swarm: &mut Swarm<Behaviour>,
        configured_peers: &[Multiaddr],
        listen_addrs: &mut Vec<String>,
    ) -> Option<Translated> {
        let input = match event {
            SwarmEvent::NewListenAddr { address, .. } => {
                listen_addrs.push(format!("{address}/p2p/{}", swarm.local_peer_id()));
                self.status_dirty = true;
                None
            }
            SwarmEvent::ConnectionEstablished { peer_id, endpoint, num_established, .. } => {
                let dialed = endpoint.is_dialer();
                if let libp2p::core::ConnectedPoint::Dialer { address, .. } = &endpoint {
                    let bare: Multiaddr =
                        address.iter().filter(|p| !matches!(p, libp2p::multiaddr::Protocol::P2p(_))).collect();
                    for configured in configured_peers {
                        let configured_bare: Multiaddr =
                            configured.iter().filter(|p| !matches!(p, libp2p::multiaddr::Protocol::P2p(_))).collect();
                        if configured_bare == bare {
                            self.dialled.insert(configured.clone(), peer_id);
                        }
                    }
                }
                self.status_dirty = true;
                // A connection we dialed vouches for what the peer claims (`protocol/trust.rs`).
                return match dialed {
                    true => Some((Input::DialedPeerConnected(peer_id), None)),
                    false => (num_established.get() == 1).then_some((Input::PeerConnected(peer_id), None)),
                };
            }
            SwarmEvent::ConnectionClosed { peer_id, num_established: 0, .. } => {
                self.status_dirty = true;
                Some(Input::PeerDisconnected(peer_id))
            }
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => {
                let token = self.token();
                self.gossip.insert(token, message_id);
                Some(Input::Gossip { from: propagation_source, token, data: message.data })
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(request_response::Event::Message { peer, message, .. })) => {
                match message {
                    // Refused while read (over the limit): blamed on its sender; the channel
                    // is dropped, which closes the stream unanswered.
                    request_response::Message::Request { request: SyncRequest::Refused(reason), .. } => {
                        Some(Input::BadRequest { from: peer, reason: format!("bad request: {reason}") })
                    }
                    request_response::Message::Request { request: SyncRequest::Bytes(data), channel, .. } => {
                        let token = self.token();
                        self.channels.insert(token, channel);
                        Some(Input::Request { from: peer, channel: token, data })
                    }
                    request_response::Message::Response { request_id, mut response } => {
                        let request = self.requests.remove(&request_id)?;
                        let data = std::mem::take(&mut response.bytes);
                        return Some((Input::Response { from: peer, request, data }, Some(response)));
                    }
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(request_response::Event::OutboundFailure {
                peer,
                request_id,
                error,
                ..
            })) => {
                let request = self.requests.remove(&request_id)?;
                match error {
                    request_response::OutboundFailure::Io(e) if blames_sender(&e) => {
                        Some(Input::BadResponse { from: peer, request, reason: format!("bad response: {e}") })
                    }
                    _ => Some(Input::RequestFailed { request }),
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Ping(ping::Event { peer, connection, result: Err(failure) }))
                if !matches!(failure, ping::Failure::Unsupported) =>
            {
                // libp2p reports a failed ping and leaves the connection to us: closed,
                // the redial replaces it once the peer can be reached again. A peer that
                // does not speak ping is not thereby dead.
                tracing::debug!(event = "ping_failed", peer = %peer, reason = %failure, "closing a connection to {peer}: ping {failure}");
                swarm.close_connection(connection);
                None
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(request_response::Event::InboundFailure {
                peer,
                error: request_response::InboundFailure::Io(e),
                ..
            })) if blames_sender(&e) => Some(Input::BadRequest { from: peer, reason: format!("bad request: {e}") }),
            _ => None,
        };
        input.map(|input| (input, None))
    }

    pub(super) fn apply(
        &mut self,
        output: Output<PeerId>,
        swarm: &mut Swarm<Behaviour>,
        topic: &IdentTopic,
        evidence: &mpsc::UnboundedSender<Evidence>,
        budget: &Arc<MemoryBudget>,
        now_ms: u64,
    ) {
        let behaviour = swarm.behaviour_mut();
        match output {
            Output::Publish(data) => {
                // No peers yet, or the same announcement again: both harmless, the tips
                // rounds carry the news to peers that join later.
                let _ = behaviour.gossipsub.publish(topic.clone(), data);
            }
            Output::Validate { token, from, result } => {
                if let Some(message_id) = self.gossip.remove(&token) {
                    let acceptance = match result {
                        Validation::Accept => MessageAcceptance::Accept,
                        Validation::Reject => MessageAcceptance::Reject,
                        Validation::Ignore => MessageAcceptance::Ignore,
                    };
                    behaviour.gossipsub.report_message_validation_result(&message_id, &from, acceptance);
                }
            }
            Output::SendRequest { to, request, data } => {
                let id = behaviour.sync.send_request(&to, SyncRequest::Bytes(data));
                self.requests.insert(id, request);
            }
            Output::Respond { channel, data } => {
                // Held until written: a slow reader pins its answer against the budget,
                // and when the budget is spent the answer is dropped (the peer retries).
                let Some(channel) = self.channels.remove(&channel) else { return };
                match budget.try_reserve(data.len() as u64) {
                    Some(reservation) => {
                        let _ = behaviour.sync.send_response(channel, Held::new(data, reservation));
                    }
                    None => self.responses_refused += 1,
                }
            }
            Output::Evidence(found) => {
                let _ = evidence.send(*found);
                self.status_dirty = true;
            }
            Output::Misbehaved { peer, reason } => {
                tracing::warn!(event = "peer_blocked", peer = %peer, reason = %reason, "blocked peer {peer}: {reason}");
                behaviour.blocked.block_peer(peer);
                if let Some(forgotten) = self.blocked.block(peer, now_ms) {
                    behaviour.blocked.unblock_peer(forgotten);
                }
                self.status_dirty = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_ends_after_its_period_and_the_list_forgets_its_oldest_past_the_cap() {
        let mut list: BlockList<u32> = BlockList::default();
        assert_eq!(list.block(1, 0), None);
        assert_eq!(list.block(2, 1_000), None);
        assert_eq!(list.next_expired(BLOCK_MS - 1), None, "still blocked");
        assert_eq!(list.next_expired(BLOCK_MS), Some(1));
        assert_eq!(list.next_expired(BLOCK_MS), None, "2 was blocked a second later");
        // Blocked again: one entry, its period starting afresh.
        assert_eq!(list.block(2, 5_000), None);
        assert_eq!(list.peers().count(), 1);
        assert_eq!(list.next_expired(BLOCK_MS + 1_000), None);
        assert_eq!(list.next_expired(BLOCK_MS + 5_000), Some(2));
        for peer in 0..MAX_BLOCKED_PEERS as u32 {
            assert_eq!(list.block(peer, 10), None);
        }
        assert_eq!(list.block(99_999, 10), Some(0), "the oldest is forgotten past the cap");
        assert_eq!(list.peers().count(), MAX_BLOCKED_PEERS);
    }
}
