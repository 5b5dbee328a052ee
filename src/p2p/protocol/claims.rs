//! What peers claim: tips and gossiped headers checked against what we store (news, known,
//! or two signed headers at one height, which is equivocation evidence), and the record
//! of which peer holds which chain how far, which the fetch side schedules from.

use super::*;

impl<P: Ord + Clone + std::fmt::Debug> Sync<P> {
    /// Records that `peer` holds `validator`'s chain up to `height` (at most `MAX_TIPS`
    /// chains per peer: a peer cannot make us remember more than one tips answer).
    pub(super) fn claim(&mut self, peer: &P, validator: ValidatorKey, height: u64) {
        let Some(state) = self.peers.get_mut(peer) else { return };
        let room = state.holds.len() < MAX_TIPS;
        match state.holds.get_mut(&validator) {
            Some(known) if height > *known => {
                *known = height;
                self.schedule = true;
            }
            Some(_) => {}
            None if room => {
                state.holds.insert(validator, height);
                if state.order.len() >= 2 * MAX_TIPS {
                    let mut kept = BTreeSet::new();
                    let holds = &state.holds;
                    state.order.retain(|v| holds.contains_key(v) && kept.insert(*v));
                }
                state.order.push(validator);
                self.schedule = true;
            }
            None => {
                self.counters.announcements_ignored += 1;
                return;
            }
        }
        if self.vouches(peer) {
            self.vouched.vouch(validator, peer);
        }
    }

    /// Whether `peer` already told us of exactly this header of a chain we hold that far:
    /// a tips round repeating what we know costs a hash and a lookup, not a store read.
    pub(super) fn already_claimed(&self, peer: &P, signed: &SignedHeader) -> bool {
        let validator = signed.validator();
        let held = self.held.as_ref().and_then(|h| h.get(&validator)).copied().unwrap_or(0);
        signed.header.height < held && self.peers.get(peer).and_then(|s| s.seen.get(&validator)) == Some(&signed.hash())
    }

    /// Checks a signed header against what we store; records equivocation. Returns
    /// whether the header is news (above our tip) and acceptable.
    pub(super) fn consider_header(
        &mut self,
        from: &P,
        signed: &SignedHeader,
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<HeaderVerdict, SyncError> {
        let validator = signed.validator();
        if !self.allowed(&validator) {
            return Ok(HeaderVerdict::NotAllowed);
        }
        let max_chains = self.config.max_chains;
        let trust = self.trust_claimed_by(&validator, from);
        let held = self.held(store)?;
        if !held.contains_key(&validator) && !trust.room(held.len(), max_chains) {
            self.counters.announcements_ignored += 1;
            return Ok(HeaderVerdict::NotAllowed);
        }
        let height = signed.header.height;
        let tip = store.tip(&validator)?;
        // The same header as a stored block needs no second signature check: tips
        // rounds repeat what we hold, and verifying each again would dominate.
        let claimed = signed.hash();
        if tip.is_some_and(|t| height <= t.height) && store.hash_at(&validator, height)? == Some(claimed) {
            return Ok(HeaderVerdict::Known);
        }
        let hash = match signed.check() {
            Ok(hash) => hash,
            Err(e) => return Ok(HeaderVerdict::Invalid(e.to_string())),
        };
        if tip.is_some_and(|t| height <= t.height) {
            let (stored_header, stored_signature) =
                store.signed_header(&validator, height)?.expect("a height at or below the tip is stored");
            if stored_header.hash() == hash {
                return Ok(HeaderVerdict::Known);
            }
            let evidence = Evidence {
                validator,
                height,
                header_a: stored_header,
                signature_a: stored_signature,
                header_b: signed.header.clone(),
                signature_b: signed.signature,
            };
            if !self.equivocation(from, evidence, now_ms, out) {
                return Ok(HeaderVerdict::Known);
            }
            return Ok(HeaderVerdict::Equivocation);
        }
        if !self.accepts_height(&validator, height) {
            return Ok(HeaderVerdict::Known);
        }
        if self.too_early(signed.header.time_ms, now_ms) {
            // Not ours to judge yet (our clock may be the one that is wrong): not
            // fetched, forwarded or blamed; a tips round offers it again later.
            self.counters.announcements_ignored += 1;
            return Ok(HeaderVerdict::NotAllowed);
        }
        Ok(HeaderVerdict::News)
    }

    /// Records equivocation proven by what `from` sent, unless `from` (or, for a
    /// validator not on an allow-list, everyone) gave evidence too recently: then it is
    /// deferred (false), and recorded when the header comes again after the period
    /// (anti-entropy repeats it).
    pub(super) fn equivocation(&mut self, from: &P, evidence: Evidence, now_ms: u64, out: &mut Vec<Output<P>>) -> bool {
        let key = (evidence.validator, evidence.height);
        if !self.evidence_given.contains(&key) {
            let interval = self.config.evidence_interval_ms;
            let listed = self.config.allowed.as_ref().is_some_and(|set| set.contains(&evidence.validator));
            let state = self.peer(from, now_ms);
            let peer_ok = state.last_evidence_ms.is_none_or(|at| now_ms >= at.saturating_add(interval));
            let total_ok =
                peer_ok && (listed || self.evidence_unlisted.take(now_ms, EVIDENCE_BURST, 3_600_000, EVIDENCE_BURST));
            if !total_ok {
                self.counters.evidence_deferred += 1;
                return false;
            }
            self.peer(from, now_ms).last_evidence_ms = Some(now_ms);
            self.evidence_given.insert(key);
            self.counters.evidence += 1;
            out.push(Output::Evidence(Box::new(evidence.clone())));
        }
        let fork = self.forked.entry(evidence.validator).or_insert(evidence.height);
        *fork = (*fork).min(evidence.height);
        true
    }

    pub(super) fn on_gossip(
        &mut self,
        from: P,
        token: MessageToken,
        data: &[u8],
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let reject = |out: &mut Vec<Output<P>>, counters: &mut SyncCounters| {
            counters.gossip_rejected += 1;
            out.push(Output::Validate { token, from: from.clone(), result: Validation::Reject });
        };
        let rate = self.config.peer_gossip_per_s;
        let state = self.peer(&from, now_ms);
        if !state.gossip.take(now_ms, rate, 1000, rate.saturating_mul(2)) {
            // An honest peer bursts when a partition heals: it forwards at once what it
            // held back. So the excess is only ignored; a peer is blocked only once it has
            // spent the allowance faster than a tenth of the rate refills it.
            let allowance = rate.saturating_mul(GOSSIP_EXCESS_SECS);
            let sustained = !state.gossip_excess.take(now_ms, rate, 10_000, allowance);
            self.counters.announcements_over_rate += 1;
            out.push(Output::Validate { token, from: from.clone(), result: Validation::Ignore });
            if sustained {
                self.misbehaved(
                    from,
                    format!("more than {rate} announcements per second, past an allowance of {allowance} more"),
                    out,
                );
            }
            return Ok(());
        }
        let Ok(Gossip::Announce(signed)) = wire::decode_gossip(data) else {
            reject(out, &mut self.counters);
            return Ok(());
        };
        match self.consider_header(&from, &signed, now_ms, store, out)? {
            HeaderVerdict::Invalid(_) => reject(out, &mut self.counters),
            HeaderVerdict::Known | HeaderVerdict::NotAllowed => {
                out.push(Output::Validate { token, from, result: Validation::Ignore })
            }
            // Forward proof of equivocation so every validator learns of it.
            HeaderVerdict::Equivocation => out.push(Output::Validate { token, from, result: Validation::Accept }),
            HeaderVerdict::News => {
                self.peer(&from, now_ms);
                self.claim(&from, signed.validator(), signed.header.height);
                if self.pending.len() >= MAX_PENDING_GOSSIP {
                    self.counters.announcements_ignored += 1;
                    out.push(Output::Validate { token, from, result: Validation::Ignore });
                    return Ok(());
                }
                self.pending.insert(
                    token,
                    PendingGossip { from, signed, deadline_ms: now_ms + self.config.request_timeout_ms },
                );
            }
        }
        Ok(())
    }
}

pub(super) enum HeaderVerdict {
    Invalid(String),
    /// A log we do not keep (not on the allow-list, which may change with the chain):
    /// ignored, its sender not blamed.
    NotAllowed,
    Known,
    News,
    Equivocation,
}
