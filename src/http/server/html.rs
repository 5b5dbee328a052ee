//! The pages the node draws: the live page and its feed, the subnet pages (drawn once per
//! replay, `crate::http::page_cache`), and a match's answers side by side.

use super::common::*;
use super::health::chain_trouble;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;

/// Which match `match.html` shows, and which page of its challenges (1-based).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MatchQuery {
    id: String,
    page: Option<usize>,
}

/// One match's challenges with both answers side by side (`crate::http::pages::match_page`),
/// read from the store a page at a time.
pub(super) async fn match_page(State(served): State<Arc<Served>>, Query(query): Query<MatchQuery>) -> Answer {
    if query.id.len() > 64 {
        return Err(problem(StatusCode::BAD_REQUEST, "the match id is longer than 64 hex digits"));
    }
    let replay = replayed(&served).await?;
    let log = served.log.clone();
    // Its blocks are read one at a time, with one of the answer permits.
    let permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let html = blocking(move || {
        let match_id = crate::replay::transcript_entries::resolve_match_id(&replay.folds, &query.id)
            .map_err(|why| problem(StatusCode::NOT_FOUND, &why))?;
        let mut found = None;
        for fold in &replay.folds {
            if let Some(m) = fold.matches.get(&match_id).map_err(internal)? {
                found = Some((fold.validator, m));
                break;
            }
        }
        let (validator, played) =
            found.ok_or_else(|| problem(StatusCode::NOT_FOUND, "no log held names this match"))?;
        let page = query.page.unwrap_or(1);
        if page == 0 {
            return Err(problem(StatusCode::NOT_FOUND, "pages start at 1"));
        }
        let offset = (page - 1).saturating_mul(crate::http::pages::PAIRS_PER_PAGE);
        let (total, pairs) = crate::replay::transcript_entries::match_pairs(
            &log.store,
            &validator,
            &match_id,
            &played,
            (offset, crate::http::pages::PAIRS_PER_PAGE),
            crate::http::pages::ANSWER_CHARS,
        )
        .map_err(internal)?;
        if offset > 0 && offset >= total {
            return Err(problem(
                StatusCode::NOT_FOUND,
                &format!(
                    "no page {page}: the match has {} page(s)",
                    total.div_ceil(crate::http::pages::PAIRS_PER_PAGE)
                ),
            ));
        }
        Ok(crate::http::pages::match_page(&validator, &match_id, &played, &pairs, page, total))
    })
    .await?;
    // Up to fifty pairs of answers' first 2,000 characters: this reader's own page.
    let html = held_body(&served, html.into_bytes()).await?;
    drop(permit);
    Ok(html_page(html))
}

/// A page rendered on the server: never cached, and it may load nothing (no scripts, no
/// outside styles or images).
fn html_page(html: impl Into<Body>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, MUTABLE),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'"),
        ],
        html.into(),
    )
        .into_response()
}

/// Which page of matches or miners a reader asks for (`matches.html?page=K`, 1-based).
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct PageQuery {
    page: Option<usize>,
}

/// One of the subnet's pages (`super::pages`), folded from the latest replay; the matches
/// and miners pages one page at a time. Drawn once per replay and chain read, by at most
/// `drawn::PAGE_DRAWS` readers at a time; every other reader gets the same bytes.
pub(super) async fn subnet_page(State(served): State<Arc<Served>>, name: &'static str, query: PageQuery) -> Answer {
    use crate::http::pages::{FromChain, Paging};
    let replay = replayed(&served).await?;
    let read = match &served.chain_reads {
        Some(reads) if name == "subnet.html" || name == "miners.html" => reads.get().await,
        _ => None,
    };
    // The queue is the one this validator plays (its own log's champion and plays); on a
    // node, which plays nothing, the one a validator following the network would play.
    let validator = served.metrics.last_heartbeat_ms().is_some();
    let chain = match read {
        Some(read) if validator => {
            with_own_state(&served, move |own| FromChain::read(&read.0, &read.1, read.2, Some(own))).await?
        }
        Some(read) => {
            let (replay, params) = (replay.clone(), served.ratio_params);
            blocking(move || {
                let following =
                    crate::validator::state::ValidatorState::following(&replay.state, &params).map_err(internal)?;
                let mut chain = FromChain::read(&read.0, &read.1, read.2, Some(&following));
                chain.queue_by_network = true;
                Ok(chain)
            })
            .await?
        }
        None => FromChain::default(),
    };
    let key = crate::http::page_cache::PageKey { name, number: query.page, chain };
    if let Some(html) = served.pages.get(&key, &replay, Instant::now()) {
        return Ok(html_page(html));
    }
    let _turn = served.pages.turn().await;
    // Another reader may have drawn it while this one waited for its turn.
    if let Some(html) = served.pages.get(&key, &replay, Instant::now()) {
        return Ok(html_page(html));
    }
    let drawn_at = Instant::now();
    let paging = if name == "history.html" { Paging::Whole } else { Paging::Page(query.page) };
    let (for_render, chain) = (replay.clone(), key.chain.clone());
    let html = blocking(move || {
        use crate::http::pages::{pages_of, render, PageError};
        match render(name, &for_render, &chain, paging) {
            Ok(html) => Ok(html),
            Err(PageError::NotFound) => {
                let pages = pages_of(name, &for_render, &chain).map_err(internal)?;
                let message = format!("no page {} of {name}: there are {pages}", query.page.unwrap_or(0));
                Err(ApiError(StatusCode::NOT_FOUND, message))
            }
            Err(PageError::Unread(e)) => Err(internal(e)),
        }
    })
    .await?;
    let html = Bytes::from(html);
    served.pages.keep(key, &replay, html.clone(), drawn_at, drawn_at.elapsed());
    Ok(html_page(html))
}

/// The live page: one self-contained HTML file that polls `af/v1/live`.
pub(super) async fn live_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, MUTABLE),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:"),
        ],
        LIVE_PAGE,
    )
        .into_response()
}

const LIVE_PAGE: &str = include_str!("../live.html");

/// The explorer (`explorer.html`, and its script built from `scripts/explorer/`): it
/// fetches only this node's own paths and checks every proof in the browser.
pub(super) async fn explorer_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, MUTABLE),
            (header::CONTENT_SECURITY_POLICY, EXPLORER_POLICY),
        ],
        crate::http::EXPLORER_HTML,
    )
        .into_response()
}

pub(super) async fn explorer_script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8"), (header::CACHE_CONTROL, MUTABLE)],
        crate::http::EXPLORER_JS,
    )
        .into_response()
}

const EXPLORER_POLICY: &str =
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:";

pub(super) async fn live(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let ratio_params = served.ratio_params;
    let validator = served.log.validator();
    let mut answer = with_own_state(&served, move |state| {
        let current = state.open.as_ref().map(|open| {
            serde_json::json!({
                "match_id": open.started.match_id,
                "contender": open.started.contender,
                "champion": open.started.champion,
                "ratio_to_beat_ppm": open.started.ratio_to_beat_ppm,
                "rule": open.started.rule,
                "rule_in_words": crate::evaluation::plan::plan_in_words(&open.started.rule),
                "envs": open.tallies(),
            })
        });
        let last = state.last_decided.as_ref().map(|d| {
            serde_json::json!({ "match_id": d.match_id, "contender_won": d.contender_won, "champion": d.champion_hotkey })
        });
        let anchors: Vec<_> = state.recent_anchors.iter().rev().collect();
        serde_json::json!({
            "validator": validator,
            "size": state.next_height,
            "champion": state.champion,
            "ratio_to_beat_ppm": state.ratio_now(&ratio_params),
            "chain_block": state.latest_chain_block,
            "matches_decided": state.n_decided,
            "last_decided": last,
            "match": current,
            "anchors": anchors,
        })
    })
    .await?;
    served.replayer.demand();
    let replay = served.replayer.latest.borrow().clone();
    let vtrust = replay.as_ref().map(|r| {
        r.state
            .validators
            .iter()
            .map(|v| serde_json::json!({ "validator": v.validator, "vtrust_ppm": v.vtrust_ppm, "tip_height": v.tip_height }))
            .collect::<Vec<_>>()
    });
    let peers = served.status.as_ref().map(|status| {
        let status = status.borrow();
        let lags: Vec<_> = status
            .lags()
            .into_iter()
            .map(|(validator, height, lag)| serde_json::json!({ "validator": validator, "height": height, "lag": lag }))
            .collect();
        serde_json::json!({ "connected": status.peers.len(), "chains": lags })
    });
    let vtrust_replay_size =
        replay.as_ref().map(|r| r.folds.iter().map(|f| f.tip.map_or(0, |t| t.height + 1)).sum::<u64>());
    answer["chain"] = served.metrics.chain_seen().map_or(serde_json::Value::Null, |seen| {
        serde_json::json!({
            "head": seen.head,
            "head_age_ms": seen.head_since_ms.map(|since| (served.now_ms)().saturating_sub(since)),
            "last_read_ms": seen.last_read_ms,
            "blocks_since_commitment": seen.blocks_since_commitment(),
            "blocks_since_weights": seen.blocks_since_weights(),
            "trouble": chain_trouble(&seen, (served.now_ms)()),
        })
    });
    answer["vtrust"] = serde_json::json!(vtrust);
    answer["vtrust_replay_size"] = serde_json::json!(vtrust_replay_size);
    answer["peers"] = serde_json::json!(peers);
    answer["af_version"] = serde_json::json!(env!("CARGO_PKG_VERSION"));
    // A validator's loop beats; a node without one (`af node`) never does.
    answer["role"] = serde_json::json!(if served.metrics.last_heartbeat_ms().is_some() { "validator" } else { "node" });
    json_cached(&request, &answer)
}
