//! What an operator probes: `/healthz` (the network and chain sides), `/metrics`
//! (Prometheus text or OpenMetrics), and the peers the node is connected to.

use super::common::*;
use crate::metrics::PeerChain;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// A heartbeat older than this (the writer beats once per block interval) is a stalled loop.
pub const HEARTBEAT_STALE_MS: u64 = 60_000;
/// The chain unanswered, or its head unmoved, for longer than this is unhealthy
/// (subtensor makes a block every 12 s).
pub const CHAIN_STALE_MS: u64 = 60_000;
/// An anchoring round (head, limits, commitment, weights) taking longer than this, in
/// progress or done, is unhealthy: with the other tasks' reads beside it, a round took
/// about 45 s on a node answering each request in 1 to 1.5 s, and over a minute at 1.5
/// to 5 s (`a_serving_validator_rides_out_a_node_restart`).
pub const ANCHOR_ROUND_MS: u64 = 60_000;
/// A due commitment, or weights, failing for more chain blocks than this is unhealthy
/// (commitments are due every `COMMIT_EVERY_BLOCKS`; weights once per tempo of 360).
pub const ANCHOR_FAILING_BLOCKS: u64 = 720;

/// Why the chain side of a validator is unhealthy, if it is.
pub fn chain_trouble(seen: &crate::metrics::ChainSeen, now_ms: u64) -> Option<String> {
    if let Some(why) = &seen.deregistered {
        return Some(why.clone());
    }
    let head = seen.head.unwrap_or(0);
    // The same age as the `af_chain_head_age_seconds` gauge, so its alert fires with this.
    if seen.head_age_ms(now_ms) <= CHAIN_STALE_MS {
        // The head answers; the reads a validator works by may not (a node that answers
        // each request in seconds, and a chain of them never within their deadline).
        if let Some(since) = seen.miners_failing_since_ms.filter(|since| now_ms.saturating_sub(*since) > CHAIN_STALE_MS)
        {
            return Some(format!(
                "the chain answers, but reading its miners has failed for {} s: too slow or failing for the reads a validator works by",
                now_ms.saturating_sub(since) / 1000
            ));
        }
        let round_ms = seen.round_ms(now_ms);
        if round_ms > ANCHOR_ROUND_MS {
            return Some(format!(
                "the chain answers, but one anchoring round (its head, limits, commitment and weights) has taken {:.1} s, over {} s: too slow to commit and set weights on",
                round_ms as f64 / 1000.0,
                ANCHOR_ROUND_MS / 1000
            ));
        }
        return anchor_trouble(seen, head);
    }
    match (seen.last_read_ms, seen.head_since_ms) {
        (None, _) if now_ms.saturating_sub(seen.expected_ms) > CHAIN_STALE_MS => {
            return Some(format!(
                "the chain has not answered in the {} s since start",
                now_ms.saturating_sub(seen.expected_ms) / 1000
            ))
        }
        (None, _) => {}
        (Some(read), _) if now_ms.saturating_sub(read) > CHAIN_STALE_MS => {
            return Some(format!("the chain has not answered for {} s", now_ms.saturating_sub(read) / 1000))
        }
        (_, Some(since)) if now_ms.saturating_sub(since) > CHAIN_STALE_MS => {
            return Some(format!(
                "the chain's head has stayed at block {head} for {} s",
                now_ms.saturating_sub(since) / 1000
            ))
        }
        _ => {}
    }
    anchor_trouble(seen, head)
}

/// Why our anchors are unhealthy: a due commitment, or weights, failing too long.
fn anchor_trouble(seen: &crate::metrics::ChainSeen, head: u64) -> Option<String> {
    for (what, failing) in
        [("committing our tip", seen.commitment_failing_since), ("setting weights", seen.weights_failing_since)]
    {
        if let Some(since) = failing.filter(|since| head.saturating_sub(*since) > ANCHOR_FAILING_BLOCKS) {
            return Some(format!("{what} has failed since chain block {since} ({} blocks)", head - since));
        }
    }
    None
}

/// 200 `ok` while our log is writable and the validator loop (if this node runs one)
/// beat recently; 503 with the reason otherwise.
pub(super) async fn healthz(State(served): State<Arc<Served>>) -> Response {
    let now = (served.now_ms)();
    let failing = match (served.metrics.log_failure(), served.metrics.last_heartbeat_ms()) {
        // First: no other repair helps a build that must be upgraded.
        _ if served.metrics.upgrade_required().is_some() => served.metrics.upgrade_required(),
        (Some(why), _) => Some(format!("our log is not writable: {why}")),
        (None, Some(beat)) if now.saturating_sub(beat) > HEARTBEAT_STALE_MS => {
            Some(format!("the validator loop last showed life {} s ago", now.saturating_sub(beat) / 1000))
        }
        _ => None,
    };
    // A validator that anchors on a chain is unhealthy when it cannot.
    let failing = failing.or_else(|| served.metrics.chain_seen().and_then(|seen| chain_trouble(&seen, now)));
    match failing {
        None => (StatusCode::OK, [(header::CACHE_CONTROL, MUTABLE)], "ok\n").into_response(),
        Some(why) => problem(StatusCode::SERVICE_UNAVAILABLE, &why).into_response(),
    }
}

/// Prometheus text exposition: OpenMetrics when the scraper asks for it, else the
/// classic 0.0.4 format. Gauges of the network's status, our own log (folded now) and
/// the latest replay are set just before encoding.
pub(super) async fn metrics_text(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let metrics = &served.metrics;
    let budgets = std::iter::once(&served.budget).chain(served.network_budget.as_ref());
    let (used, limit) = budgets.fold((0, 0), |(used, limit), b| (used + b.used(), limit + b.limit()));
    metrics.budget_used_bytes.set(used as i64);
    metrics.budget_limit_bytes.set(limit as i64);
    metrics.sample_heap();
    metrics.sample_disk(served.log.store.path());
    metrics.sample_chain((served.now_ms)());
    if let Some(status) = &served.status {
        let status = status.borrow().clone();
        metrics.peers.set(status.peers.len() as i64);
        for (validator, _, lag) in status.lags() {
            let labels = PeerChain { validator: validator.to_hex() };
            metrics.chain_lag_blocks.get_or_create(&labels).set(lag as i64);
        }
    }
    let ratio_params = served.ratio_params;
    let (champion_uid, ratio_ppm, size) = with_own_state(&served, move |state| {
        let ratio_ppm = state.ratio_now(&ratio_params);
        (state.champion.as_ref().map(|c| c.uid), ratio_ppm, state.next_height)
    })
    .await?;
    metrics.champion_uid.set(champion_uid.map_or(-1, i64::from));
    metrics.ratio_to_beat.set(f64::from(ratio_ppm) / 1e6);
    metrics.tip_height.set(size as i64 - 1);
    served.replayer.demand();
    if let Some(replay) = served.replayer.latest.borrow().as_ref() {
        metrics.store_block_bytes.set(replay.folds.iter().map(|f| f.n_bytes).sum::<u64>() as i64);
        metrics.replay_matches.set(replay.folds.iter().map(|f| f.matches.len()).sum::<usize>() as i64);
        metrics
            .replay_matches_in_memory
            .set(replay.folds.iter().map(|f| f.matches.held_in_memory()).sum::<usize>() as i64);
        metrics.state_matches.set(replay.state.matches.len() as i64);
        for v in &replay.state.validators {
            let labels = PeerChain { validator: v.validator.to_hex() };
            metrics.vtrust.get_or_create(&labels).set(f64::from(v.vtrust_ppm) / 1e6);
        }
    }
    let (content_type, text) = if wants_openmetrics(&request) {
        ("application/openmetrics-text; version=1.0.0; charset=utf-8", metrics.encode())
    } else {
        ("text/plain; version=0.0.4; charset=utf-8", metrics.encode_classic())
    };
    Ok(([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, MUTABLE)], text).into_response())
}

/// Whether `Accept` names OpenMetrics with a non-zero quality at least that of the
/// classic text format (Prometheus sends both, OpenMetrics preferred).
fn wants_openmetrics(request: &HeaderMap) -> bool {
    let mut open = 0.0f32;
    let mut classic = 0.0f32;
    for value in request.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()) {
        for range in value.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let kind = parts.next().unwrap_or("").to_ascii_lowercase();
            let quality = parts.filter_map(|p| p.strip_prefix("q=")).find_map(|q| q.parse::<f32>().ok()).unwrap_or(1.0);
            match kind.as_str() {
                "application/openmetrics-text" => open = open.max(quality),
                "text/plain" | "*/*" | "text/*" => classic = classic.max(quality),
                _ => {}
            }
        }
    }
    open > 0.0 && open >= classic
}
pub(super) async fn peers(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let Some(status) = &served.status else {
        return Err(problem(StatusCode::NOT_FOUND, "this node runs without networking"));
    };
    let status = status.borrow().clone();
    json_cached(&request, &status)
}
#[cfg(test)]
mod health_tests {
    use super::*;
    use crate::metrics::ChainSeen;

    #[test]
    fn the_chain_side_is_unhealthy_when_unanswered_stalled_or_failing_to_anchor() {
        let now = 1_000_000;
        let fresh = ChainSeen { expected_ms: now - 1_000, ..ChainSeen::default() };
        assert_eq!(chain_trouble(&fresh, now), None, "just started");
        let silent = ChainSeen { expected_ms: now - 61_000, ..ChainSeen::default() };
        assert!(chain_trouble(&silent, now).unwrap().contains("not answered"));
        let good = ChainSeen {
            expected_ms: 0,
            last_read_ms: Some(now - 1_000),
            head: Some(5_000),
            head_since_ms: Some(now - 5_000),
            first_head: Some(4_000),
            ..ChainSeen::default()
        };
        assert_eq!(chain_trouble(&good, now), None);
        assert_eq!(good.blocks_since_commitment(), Some(1_000), "from the first head seen");
        // A head is read only from an answer, so it has stood at least as long as the chain
        // has been silent.
        let gone = ChainSeen { last_read_ms: Some(now - 61_000), head_since_ms: Some(now - 65_000), ..good.clone() };
        assert!(chain_trouble(&gone, now).unwrap().contains("has not answered for 61 s"));
        let stalled = ChainSeen { head_since_ms: Some(now - 70_000), ..good.clone() };
        assert!(chain_trouble(&stalled, now).unwrap().contains("stayed at block 5000"));
        let failing = ChainSeen { weights_failing_since: Some(5_000 - ANCHOR_FAILING_BLOCKS - 1), ..good.clone() };
        assert!(chain_trouble(&failing, now).unwrap().contains("setting weights has failed"));
        let recent = ChainSeen { commitment_failing_since: Some(4_900), ..good.clone() };
        assert_eq!(chain_trouble(&recent, now), None, "a failure younger than the threshold is retried quietly");
        // The head answers, the miners' reads do not (issue 74: 200 for four minutes).
        let slow = ChainSeen { miners_failing_since_ms: Some(now - 61_000), ..good.clone() };
        assert!(chain_trouble(&slow, now).unwrap().contains("reading its miners has failed for 61 s"));
        let slow_briefly = ChainSeen { miners_failing_since_ms: Some(now - 5_000), ..good.clone() };
        assert_eq!(chain_trouble(&slow_briefly, now), None);
        // Each read answers, but a round of them takes over a minute, in progress or done.
        let slow_round = ChainSeen { round_started_ms: Some(now - 61_000), ..good.clone() };
        assert!(chain_trouble(&slow_round, now).unwrap().contains("anchoring round"), "{slow_round:?}");
        let slow_last = ChainSeen { last_round_ms: 62_000, ..good.clone() };
        assert!(chain_trouble(&slow_last, now).unwrap().contains("has taken 62.0 s"));
        let quick = ChainSeen { round_started_ms: Some(now - 20_000), last_round_ms: 50_000, ..good.clone() };
        assert_eq!(chain_trouble(&quick, now), None);

        // The gauge an alert reads crosses 60 s exactly when /healthz fails on the chain.
        for (seen, stale) in [(&fresh, false), (&silent, true), (&good, false), (&gone, true), (&stalled, true)] {
            let metrics = crate::metrics::Metrics::new();
            metrics.set_chain_seen(seen.clone());
            metrics.sample_chain(now);
            let age = metrics.chain_head_age_seconds.get();
            assert_eq!(age > CHAIN_STALE_MS as f64 / 1e3, stale, "{seen:?}: {age} s");
            assert_eq!(chain_trouble(seen, now).is_some(), stale, "{seen:?}");
        }
    }
}
