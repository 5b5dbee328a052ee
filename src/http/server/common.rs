//! What every handler of the node's API shares: its limits, the state it serves from
//! (`Served`), error answers, caching headers, and the building of an answer on the
//! blocking pool, held against the memory budget until written.

use super::chain_reads::ChainReads;
use super::replayer::Replayer;
use crate::budget::{Held, MemoryBudget, Reservation};
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::OwnLog;
use crate::metrics::Metrics;
use crate::p2p::net::NetStatus;
use crate::replay::Replay;
use crate::validator::state::{fold_new_blocks, ValidatorState};
use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// The largest page of transcript entries (each carries its proofs).
pub const MAX_ENTRIES_PAGE: usize = 100;
/// The most bytes of JSON a transcripts page holds: it stops before an entry that would
/// take it past this (but always holds its first entry; an entry is never split).
pub const MAX_ENTRIES_PAGE_BYTES: usize = 8 << 20;
/// The largest page of matches in `state`.
pub const MAX_MATCHES_PAGE: usize = 1000;
pub(super) const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Answers read or built for one reader at a time, at most this many at once (blocks,
/// pages of transcripts or of state, match pages, consistency proofs, the log list):
/// each is held against the memory
/// budget before its permit goes, so a crowd waits instead of piling up answers.
pub(super) const ANSWER_BUILDS: usize = 4;
pub(super) const MUTABLE: &str = "no-cache";
#[derive(Clone, Debug)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// Connections kept for `/healthz` and `/metrics` when the others are all taken.
    pub reserved_connections: usize,
    /// The whole request head must arrive within this (slow-header clients are dropped).
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub idle_timeout: Duration,
    /// The replayed state is recomputed at most this often (folds are reused, so a
    /// refresh costs only the new blocks).
    pub state_refresh: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 256,
            max_connections_per_ip: 32,
            reserved_connections: 8,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(30),
            state_refresh: Duration::from_secs(2),
        }
    }
}
pub(super) struct Served {
    pub(super) log: Arc<OwnLog>,
    pub(super) status: Option<watch::Receiver<NetStatus>>,
    /// The chain's facts for the pages (identities, the queue), when the node reads one.
    pub(super) chain_reads: Option<ChainReads>,
    pub(super) limits: HttpLimits,
    pub(super) metrics: Arc<Metrics>,
    /// Block bytes waiting for slow readers are reserved here: the readers' own budget,
    /// apart from the network's, so readers cannot starve sync.
    pub(super) budget: Arc<MemoryBudget>,
    /// The network's budget, shown in the metrics beside the readers'.
    pub(super) network_budget: Option<Arc<MemoryBudget>>,
    /// Store reads of whole blocks at once: a block is read before its size is known, so
    /// at most this many are in memory unreserved.
    pub(super) builds: Arc<Semaphore>,
    pub(super) ratio_params: RatioParams,
    /// The clock (IO at the edge): the ratio's decay and the health check's heartbeat age.
    pub(super) now_ms: fn() -> u64,
    /// Our own chain folded so far (`live`): each request folds only the new blocks.
    pub(super) own: Arc<std::sync::Mutex<ValidatorState>>,
    pub(super) replayer: Replayer,
    /// The first page of `state`, serialized, for the replay it was made from (weak: it
    /// must not keep an old replay alive).
    pub(super) state_page: tokio::sync::Mutex<Option<(std::sync::Weak<Replay>, Bytes, String)>>,
    /// The subnet pages, drawn once per replay by a few readers at a time (`history.html`
    /// replays the logs' prefixes, up to 48 combines; the others walk every match).
    pub(super) pages: crate::http::page_cache::DrawnPages,
}
/// An error answer: its status and a JSON `{"error": ...}` body.
pub(super) struct ApiError(pub(super) StatusCode, pub(super) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

pub(super) fn problem(status: StatusCode, message: &str) -> ApiError {
    ApiError(status, message.to_string())
}

pub(super) type Answer = Result<Response, ApiError>;

pub(super) fn internal(error: impl std::fmt::Display) -> ApiError {
    problem(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string())
}

/// A validator in a path: 64 lowercase hex digits, its one spelling (others are 404).
pub(super) fn parse_validator(text: &str) -> Result<ValidatorKey, ApiError> {
    ValidatorKey::from_hex(text)
        .map_err(|_| problem(StatusCode::NOT_FOUND, "the validator must be 64 lowercase hex digits"))
}

/// A height in a path: one spelling per height, so "+1", "01" and the like are not its URL.
pub(super) fn parse_height(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .ok()
        .filter(|h: &u64| h.to_string() == text)
        .ok_or_else(|| problem(StatusCode::NOT_FOUND, "the height is a decimal number without sign or leading zeros"))
}

/// A response with caching headers, or 304 when the client's copy is current.
pub(super) fn cached(
    request: &HeaderMap,
    etag: &str,
    cache: &'static str,
    content_type: &'static str,
    body: Body,
) -> Response {
    let etag = format!("\"{etag}\"");
    let fresh = request.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes());
    let mut response = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { body.into_response() };
    let headers = response.headers_mut();
    if !fresh {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    response
}

pub(super) fn json_cached(request: &HeaderMap, value: &impl serde::Serialize) -> Answer {
    let body = serde_json::to_vec(value).map_err(internal)?;
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    Ok(cached(request, &etag, MUTABLE, "application/json", Body::from(body)))
}

/// Runs store reads on the blocking pool: redb reads are synchronous.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(internal)?
}

/// A JSON answer built for one reader on the blocking pool: room for `estimate` bytes (a
/// bound on what building it holds: the value and its JSON) is reserved from the memory
/// budget before the build starts, so what a crowd of readers makes the node build is
/// counted while it is built, not after; the reservation then becomes the body's exact
/// size (grown, waiting for room, if the estimate fell short) and is held until written.
/// Built with one of the answer permits. For answers that grow with the logs (the log
/// list, consistency proofs, state pages).
pub(super) async fn built_json<T: serde::Serialize>(
    served: &Served,
    request: &HeaderMap,
    estimate: u64,
    build: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Answer {
    let mut reservation = room_for(served, estimate as usize).await?;
    let _permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let body = blocking(move || serde_json::to_vec(&build()?).map_err(internal)).await?;
    let len = body.len() as u64;
    if len > reservation.bytes() {
        let more = room_for(served, (len - reservation.bytes()) as usize).await?;
        reservation.absorb(more);
    }
    reservation.shrink_to(len);
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    Ok(cached(request, &etag, MUTABLE, "application/json", Body::from(Bytes::from_owner(Held::new(body, reservation)))))
}
/// What a reader is told when the memory budget has no room for its answer in time.
pub(super) fn budget_spent() -> ApiError {
    problem(StatusCode::SERVICE_UNAVAILABLE, "the node's memory budget for readers is spent; try again")
}
/// Room in the memory budget for an answer of `bytes`, waiting up to the request timeout
/// for it; a reader that cannot get it is told the node is busy.
pub(super) async fn room_for(served: &Served, bytes: usize) -> Result<Reservation, ApiError> {
    // One that could never fit is told at once, not after waiting out its patience.
    if bytes as u64 > served.budget.limit() {
        return Err(problem(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "this answer needs about {bytes} bytes, more than the node's whole memory budget for readers ({}): ask for less (a shorter span or page)",
                served.budget.limit()
            ),
        ));
    }
    served.budget.reserve_within(bytes as u64, served.limits.request_timeout).await.ok_or_else(budget_spent)
}
/// `bytes` as a response body held against the memory budget until it is written.
pub(super) async fn held_body(served: &Served, bytes: Vec<u8>) -> Result<Body, ApiError> {
    let reservation = room_for(served, bytes.len()).await?;
    Ok(Body::from(Bytes::from_owner(Held::new(bytes, reservation))))
}
/// The latest replay of the store, made by the background replayer. A request only
/// asks for a fresh one; it waits only when there is none yet.
pub(super) async fn replayed(served: &Arc<Served>) -> Result<Arc<Replay>, ApiError> {
    served.replayer.demand();
    let mut latest = served.replayer.latest.clone();
    let wait = tokio::time::timeout(served.limits.request_timeout, latest.wait_for(|r| r.is_some())).await;
    match wait {
        Ok(Ok(replay)) => Ok(replay.clone().expect("waited for Some")),
        _ => Err(problem(StatusCode::SERVICE_UNAVAILABLE, "the first replay of the logs is not ready yet")),
    }
}

/// What the live page shows: our own log's champion, ratio, open match with each env's
/// tally so far, and last chain records (all folded from our signed log), plus vTrust
/// from the latest replay and peers' lag (as peers claim it).
/// Folds our own log's new blocks into the state kept between requests, then reads
/// `read` from it under the lock: only its answer leaves, never a copy of the state.
pub(super) async fn with_own_state<T: Send + 'static>(
    served: &Served,
    read: impl FnOnce(&ValidatorState) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let (own, log) = (served.own.clone(), served.log.clone());
    blocking(move || {
        let mut state = own.lock().unwrap_or_else(|e| e.into_inner());
        fold_new_blocks(&mut state, &log.store, &log.validator()).map_err(internal)?;
        Ok(read(&state))
    })
    .await
}
