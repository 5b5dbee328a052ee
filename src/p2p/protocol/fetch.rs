//! The fetch side of the sync machine: fetch slots handed out round-robin over peers,
//! ranges served to peers that ask, and fetched blocks checked and stored, each only
//! once it decodes canonically, verifies and links.

use super::claims::HeaderVerdict;
use super::*;
use crate::bytes::ValidatorKey;
use crate::ledger::block::{BlockError, SealedBlock};
use crate::ledger::event::Evidence;
use crate::ledger::store::{Appended, StoreError};
use crate::p2p::blocks::BlockStore;
use crate::p2p::wire::{self, Request, Response, SignedHeader, MAX_BLOCKS_PER_REQUEST, MAX_TIPS};
use rayon::prelude::*;
use std::collections::BTreeSet;

impl<P: Ord + Clone + std::fmt::Debug> Sync<P> {
    /// Hands free fetch slots out round-robin over peers: each peer in turn, while it has
    /// a free slot of its own, gets one request for a chain it holds more of than we do
    /// and nobody is fetching. So an honest peer's chains progress however many chains
    /// another peer announces. Runs only when something changed, and reads the store only
    /// for the chains it is about to fetch.
    pub(super) fn start_fetches(
        &mut self,
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        if !self.schedule || self.fetches.len() >= self.config.max_fetches.max(1) {
            return Ok(());
        }
        self.schedule = false;
        self.held(store)?;
        let mut order: Vec<P> = self.peers.keys().cloned().collect();
        if let Some(turn) = &self.turn {
            let start = order.partition_point(|p| p <= turn);
            order.rotate_left(start);
        }
        let mut fetching: BTreeSet<ValidatorKey> = self.fetches.values().map(|f| f.validator).collect();
        // Chains each dialed peer vouched for that are held or being fetched: counted once
        // a turn, not per candidate (3,000 junk claims would make that 3,000 counts).
        let mut shares = {
            let held = self.held.as_ref().expect("read above");
            self.vouched.shares(|chain| held.contains_key(chain) || fetching.contains(chain))
        };
        let share = trust::vouched_share(self.config.max_chains);
        loop {
            let mut started = false;
            for peer in &order {
                if self.fetches.len() >= self.config.max_fetches.max(1) {
                    return Ok(());
                }
                let Some(state) = self.peers.get(peer) else { continue };
                if state.fetching >= self.config.max_fetches_per_peer.max(1) {
                    continue;
                }
                // Paced: a peer whose share of our request rate is spent waits for a tick.
                let mut pace = state.sent.clone();
                let rate = (self.config.peer_requests_per_s / 2).max(1);
                if !pace.take(now_ms, rate, 1000, rate) {
                    self.schedule = true;
                    continue;
                }
                let held = self.held.as_ref().expect("read above");
                // The chain it holds more of than we do, that nobody is fetching, that we
                // keep, of the most trusted tier (`trust.rs`), first in the order the peer
                // gave: with an allow-list (the chain's validators, or `--allow`) a chain
                // off it is never fetched, so the junk a peer announces costs nothing;
                // without one, chains dialed peers vouch for come before strangers'.
                let best_possible = if self.config.allowed.is_some() { Trust::Listed } else { Trust::Vouched };
                let mut chosen: Option<(Trust, ValidatorKey)> = None;
                for validator in &state.order {
                    let Some(claimed) = state.holds.get(validator) else { continue };
                    let next = held.get(validator).copied().unwrap_or(0);
                    let trust = self.trust_claimed_by(validator, peer);
                    let wanted = *claimed >= next
                        && !fetching.contains(validator)
                        && self.allowed(validator)
                        && self.accepts_height(validator, next);
                    let share_left = trust != Trust::Vouched
                        || self
                            .vouched
                            .voucher(validator)
                            .is_none_or(|by| shares.get(by).copied().unwrap_or(0) < share);
                    let room =
                        next > 0 || (trust.room(held.len() + fetching.len(), self.config.max_chains) && share_left);
                    if wanted && room && chosen.is_none_or(|(best, _)| trust < best) {
                        chosen = Some((trust, *validator));
                        if trust <= best_possible {
                            break;
                        }
                    }
                }
                let Some((trust, validator)) = chosen else { continue };
                // The cache is only a guide: the store says where the fetch starts.
                let next = store.tip(&validator)?.map_or(0, |t| t.height + 1);
                fetching.insert(validator);
                if let (0, Trust::Vouched, Some(by)) = (next, trust, self.vouched.voucher(&validator)) {
                    *shares.entry(by.clone()).or_default() += 1;
                }
                if next > state.holds[&validator] {
                    self.held.as_mut().expect("read above").insert(validator, next);
                    started = true;
                    continue;
                }
                let request = self.next_request();
                let max_blocks = self.config.blocks_per_request.clamp(1, MAX_BLOCKS_PER_REQUEST);
                self.fetches.insert(
                    request,
                    Fetch {
                        peer: peer.clone(),
                        validator,
                        from_height: next,
                        deadline_ms: now_ms + self.config.request_timeout_ms,
                        probe: false,
                    },
                );
                let state = self.peers.get_mut(peer).expect("listed above");
                state.fetching += 1;
                state.sent = pace;
                self.turn = Some(peer.clone());
                let data = wire::encode_request(&Request::Blocks { validator, from_height: next, max_blocks });
                out.push(Output::SendRequest { to: peer.clone(), request, data });
                started = true;
            }
            if !started {
                return Ok(());
            }
        }
    }

    pub(super) fn on_request(
        &mut self,
        from: P,
        channel: ChannelToken,
        data: &[u8],
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let rate = self.config.peer_requests_per_s;
        if !self.peer(&from, now_ms).requests.take(now_ms, rate, 1000, rate.saturating_mul(2)) {
            self.misbehaved(from, format!("more than {rate} requests per second"), out);
            return Ok(());
        }
        let response = match wire::decode_request(data) {
            // A request cut off by a dropped connection proves nothing: drop it unanswered.
            Err(e) if e.is_truncated() => return Ok(()),
            Err(e) => {
                self.misbehaved(from, format!("bad request: {e}"), out);
                return Ok(());
            }
            Ok(Request::Tips) => {
                // Trust first (`trust.rs`): what the answer leaves out past `MAX_TIPS` is
                // strangers' chains, and a fresh node that fetches in our order takes the
                // validators we vouch for before junk we hold.
                let held = self.vouched.answer_order(store.tips()?, |validator| self.trust(validator));
                let mut tips = Vec::new();
                for (validator, tip) in held.into_iter().take(MAX_TIPS) {
                    if let Some((header, signature)) = store.signed_header(&validator, tip.height)? {
                        tips.push(SignedHeader { header, signature });
                    }
                }
                Response::Tips(tips)
            }
            Ok(Request::Blocks { validator, from_height, max_blocks }) => {
                let mut blocks = Vec::new();
                let mut bytes = 0u64;
                let max_blocks = max_blocks.min(MAX_BLOCKS_PER_REQUEST);
                for height in from_height..from_height.saturating_add(u64::from(max_blocks)) {
                    // A pruned body is not served (peers fetch old blocks from others,
                    // the owner above all): the answer ends before it.
                    let block = match store.block_bytes(&validator, height) {
                        Ok(Some(block)) => block,
                        Ok(None) | Err(StoreError::Pruned { .. }) => break,
                        Err(other) => return Err(other.into()),
                    };
                    if !blocks.is_empty() && bytes + block.len() as u64 > self.config.response_bytes {
                        break;
                    }
                    bytes += block.len() as u64;
                    blocks.push(block);
                }
                Response::Blocks(blocks)
            }
        };
        let data = wire::encode_response(&response).expect("responses are built within the limits");
        self.counters.bytes_served += data.len() as u64;
        out.push(Output::Respond { channel, data });
        Ok(())
    }

    pub(super) fn on_response(
        &mut self,
        from: P,
        request: RequestId,
        data: &[u8],
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let tips_request = self.tips_requests.remove(&request);
        let fetch = self.end_request(request);
        self.counters.bytes_received += data.len() as u64;
        if fetch.is_none() && tips_request.is_none() {
            return Ok(()); // timed out already, or not ours
        }
        let response = match wire::decode_response(data) {
            Ok(response) => response,
            // Cut off in transit (a dropped connection): the fetch is retried, nobody blamed.
            Err(e) if e.is_truncated() => return Ok(()),
            Err(e) => {
                self.misbehaved(from, format!("bad response: {e}"), out);
                return Ok(());
            }
        };
        match (response, fetch) {
            (Response::Tips(tips), None) => {
                for signed in tips {
                    if self.already_claimed(&from, &signed) {
                        continue;
                    }
                    match self.consider_header(&from, &signed, now_ms, store, out)? {
                        HeaderVerdict::Invalid(reason) => {
                            self.misbehaved(from, format!("bad tip: {reason}"), out);
                            return Ok(());
                        }
                        HeaderVerdict::NotAllowed => continue,
                        HeaderVerdict::News | HeaderVerdict::Known | HeaderVerdict::Equivocation => {
                            self.claim(&from, signed.validator(), signed.header.height);
                            if let Some(state) = self.peers.get_mut(&from) {
                                if state.seen.len() < MAX_TIPS || state.seen.contains_key(&signed.validator()) {
                                    state.seen.insert(signed.validator(), signed.hash());
                                }
                            }
                        }
                    }
                }
            }
            (Response::Blocks(blocks), Some(fetch)) => {
                self.store_blocks(from, &fetch, blocks, now_ms, store, out)?;
            }
            _ => self.misbehaved(from, "response of the wrong kind".into(), out),
        }
        self.resolve_pending(now_ms, store, out)?;
        Ok(())
    }

    pub(super) fn store_blocks(
        &mut self,
        from: P,
        fetch: &Fetch<P>,
        blocks: Vec<Vec<u8>>,
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        if blocks.is_empty() {
            // The peer does not hold what it was thought to: forget the claim, so the
            // next fetch goes to someone else (or waits for the next tips round).
            if let Some(state) = self.peers.get_mut(&from) {
                state.holds.insert(fetch.validator, fetch.from_height.saturating_sub(1));
                if fetch.from_height == 0 {
                    state.holds.remove(&fetch.validator);
                }
            }
        }
        // Decoding and checking signatures is the expensive part: all blocks at once.
        let decoded: Vec<(u64, Result<SealedBlock, crate::ledger::BlockError>)> =
            blocks.into_par_iter().map(|bytes| (bytes.len() as u64, SealedBlock::from_bytes(bytes))).collect();
        let mut checked: Vec<SealedBlock> = Vec::with_capacity(decoded.len());
        let mut sizes: Vec<u64> = Vec::with_capacity(decoded.len());
        // Why the blocks after the checked ones are not stored, if they are not.
        let mut stop: Option<Option<String>> = None;
        for (expected_height, (n_bytes, result)) in (fetch.from_height..).zip(decoded) {
            let sealed = match result {
                Ok(sealed) => sealed,
                // A later protocol version's block (ledger-spec/15): this build cannot judge
                // it, so it neither stores it nor blames the peer; the peer is not asked for
                // that chain again until a tips round claims it afresh.
                Err(crate::ledger::BlockError::NewerEventKind { .. }) => {
                    self.counters.blocks_of_later_versions += 1;
                    if let Some(state) = self.peers.get_mut(&from) {
                        state.holds.insert(fetch.validator, expected_height.saturating_sub(1));
                    }
                    stop = Some(None);
                    break;
                }
                Err(e) => {
                    stop = Some(Some(format!("bad block: {e}")));
                    break;
                }
            };
            let header = &sealed.decoded().block.header;
            if header.validator != fetch.validator || header.height != expected_height {
                stop = Some(Some("a block other than the one asked for".into()));
                break;
            }
            if !self.allowed(&header.validator)
                || !self.accepts_height(&header.validator, header.height)
                || self.too_early(header.time_ms, now_ms)
            {
                stop = Some(None);
                break;
            }
            checked.push(sealed);
            sizes.push(n_bytes);
        }
        // The good prefix goes to the store in one durable write.
        let (appended, refused) = store.append_batch(&checked)?;
        for (done, n_bytes) in appended.iter().zip(&sizes) {
            if matches!(done, Appended::New(_)) {
                self.counters.blocks_stored += 1;
                self.counters.bytes_stored += n_bytes;
            }
        }
        if !appended.is_empty() {
            self.refresh_held(fetch.validator, store)?;
        }
        if let Some((index, error)) = refused {
            let sealed = &checked[index];
            let header = sealed.decoded().block.header.clone();
            match error {
                StoreError::Conflict { .. } => {
                    let (stored_header, stored_signature) =
                        store.signed_header(&header.validator, header.height)?.expect("a conflicting block is stored");
                    let evidence = Evidence {
                        validator: header.validator,
                        height: header.height,
                        header_a: stored_header,
                        signature_a: stored_signature,
                        header_b: header,
                        signature_b: sealed.decoded().block.signature,
                    };
                    self.equivocation(&from, evidence, now_ms, out);
                }
                // Validly signed, the peer's next block after our tip, but not linking to
                // it: the validator signed two blocks at our tip's height (or below) and
                // the peer, honest or not, holds the other branch. Blaming it would let one
                // forking validator split the honest nodes; instead its block at our tip's
                // height is asked for, which proves the fork (`Conflict` above).
                StoreError::Rejected { source: BlockError::BrokenLink { .. }, .. }
                    if index == 0 && !fetch.probe && fetch.from_height > 0 =>
                {
                    self.probe_fork(from, fetch.validator, fetch.from_height - 1, now_ms, out);
                }
                StoreError::Rejected { source, .. } => {
                    // A block that does not link to the peer's own previous one, or a
                    // probe answered with something that does not conflict: not a chain an
                    // honest peer stores.
                    self.misbehaved(from, format!("block does not link: {source}"), out);
                }
                other => return Err(other.into()),
            }
            return Ok(());
        }
        if let Some(Some(reason)) = stop {
            self.misbehaved(from, reason, out);
        } else if fetch.probe && appended.iter().any(|done| !matches!(done, Appended::New(_))) {
            // Its block at our tip's height is ours, yet its next block did not link to it.
            self.misbehaved(from, "a block that does not link to its own previous block".into(), out);
        }
        Ok(())
    }

    /// Asks `peer` for its block of `validator` at `height` (our tip there), after its
    /// next block did not link to ours. Not paced: it takes the peer's fetch slot that
    /// the answered fetch just freed, at most one probe per answered fetch.
    pub(super) fn probe_fork(
        &mut self,
        peer: P,
        validator: ValidatorKey,
        height: u64,
        now_ms: u64,
        out: &mut Vec<Output<P>>,
    ) {
        self.counters.forks_probed += 1;
        let Some(state) = self.peers.get_mut(&peer) else { return };
        // Not fetched from this peer again until a tips round claims it afresh.
        state.holds.insert(validator, height);
        state.fetching += 1;
        let request = self.next_request();
        self.fetches.insert(
            request,
            Fetch {
                peer: peer.clone(),
                validator,
                from_height: height,
                deadline_ms: now_ms + self.config.request_timeout_ms,
                probe: true,
            },
        );
        let data = wire::encode_request(&Request::Blocks { validator, from_height: height, max_blocks: 1 });
        out.push(Output::SendRequest { to: peer, request, data });
    }

    /// Gossip messages waiting for their blocks: accept those whose block is now stored.
    /// If a different block was stored at that height, the announcement is evidence.
    pub(super) fn resolve_pending(
        &mut self,
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        self.held(store)?;
        let held = self.held.as_ref().expect("read above");
        let done: Vec<MessageToken> = self
            .pending
            .iter()
            .filter(|(_, p)| held.get(&p.signed.validator()).is_some_and(|n| *n > p.signed.header.height))
            .map(|(token, _)| *token)
            .collect();
        for token in done {
            let pending = self.pending.remove(&token).expect("listed above");
            // Known (stored as announced) or equivocation (evidence recorded): both
            // forwarded; evidence deferred by the rate is not.
            let result = match self.consider_header(&pending.from, &pending.signed, now_ms, store, out)? {
                HeaderVerdict::Known | HeaderVerdict::Equivocation => Validation::Accept,
                _ => Validation::Ignore,
            };
            out.push(Output::Validate { token, from: pending.from, result });
        }
        Ok(())
    }
}
