//! The node's read-only HTTP API (ledger-spec/11-http.md): every chain it holds as the
//! static layout of [`super::layout`] (log list, signed tips, our own checkpoint,
//! immutable entry bundles), plus what only a running node can answer: single blocks,
//! consistency proofs, transcript entries with proofs, the replayed state, and peers.
//!
//! Bounded against slow or hostile clients: at most `max_connections` connections and
//! `max_connections_per_ip` from one address; a request head must arrive within
//! `header_timeout`; a connection with no progress for `idle_timeout` is dropped; a
//! request's handler gets `request_timeout`; what is read or built for one reader (a
//! block, a page of transcripts or of state, a match page, a consistency proof, the log
//! list) is made by at most `ANSWER_BUILDS` at once and reserved from the node's memory
//! budget until written (a reader that cannot get room within `request_timeout` is
//! answered 503); bundles stream one block at a time; every list is paginated with a
//! hard maximum page; the subnet pages are drawn once per replay (`super::drawn`). When
//! every slot is taken, `reserved_connections` more are kept for `/healthz` and
//! `/metrics` (one request each, a short head deadline), so an operator's probes work
//! under load. Every URL has one spelling; others are 404.

use super::layout::{self, LogList, LogSummary, LOG_LIST_FORMAT, TILE_WIDTH};
use crate::budget::{Held, MemoryBudget, Reservation};
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::checkpoint::Checkpoint;
use crate::ledger::consistency;
use crate::ledger::proof::signed_headers;
use crate::ledger::OwnLog;
use crate::metrics::{Metrics, PeerChain};
use crate::p2p::net::NetStatus;
use crate::replay::latest::LatestReplay;
use crate::replay::Replay;
use crate::validator::state::{fold_new_blocks, ValidatorState};
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// The largest page of transcript entries (each carries its proofs).
pub const MAX_ENTRIES_PAGE: usize = 100;
/// The most bytes of JSON a transcripts page holds: it stops before an entry that would
/// take it past this (but always holds its first entry; an entry is never split).
pub const MAX_ENTRIES_PAGE_BYTES: usize = 8 << 20;
/// The largest page of matches in `state`.
pub const MAX_MATCHES_PAGE: usize = 1000;
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Answers read or built for one reader at a time, at most this many at once (blocks,
/// pages of transcripts or of state, match pages, consistency proofs, the log list):
/// each is held against the memory
/// budget before its permit goes, so a crowd waits instead of piling up answers.
const ANSWER_BUILDS: usize = 4;
const MUTABLE: &str = "no-cache";

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

struct Served {
    log: Arc<OwnLog>,
    status: Option<watch::Receiver<NetStatus>>,
    /// The chain's facts for the pages (identities, the queue), when the node reads one.
    chain_reads: Option<ChainReads>,
    limits: HttpLimits,
    metrics: Arc<Metrics>,
    /// Block bytes waiting for slow readers are reserved here (shared with the network).
    budget: Arc<MemoryBudget>,
    /// Store reads of whole blocks at once: a block is read before its size is known, so
    /// at most this many are in memory unreserved.
    builds: Arc<Semaphore>,
    ratio_params: RatioParams,
    /// The clock (IO at the edge): the ratio's decay and the health check's heartbeat age.
    now_ms: fn() -> u64,
    /// Our own chain folded so far (`live`): each request folds only the new blocks.
    own: Arc<std::sync::Mutex<ValidatorState>>,
    replayer: Replayer,
    /// The first page of `state`, serialized, for the replay it was made from (weak: it
    /// must not keep an old replay alive).
    state_page: tokio::sync::Mutex<Option<(std::sync::Weak<Replay>, Bytes, String)>>,
    /// The subnet pages, drawn once per replay by a few readers at a time (`history.html`
    /// replays the logs' prefixes, up to 48 combines; the others walk every match).
    pages: super::drawn::DrawnPages,
}

/// What a node feeds its HTTP API besides its store, each when it has one: the network's
/// status, the chain it reads (for the validators' uids and hotkeys on the pages), and
/// the replay it shares.
#[derive(Clone, Default)]
pub struct Feeds {
    pub status: Option<watch::Receiver<NetStatus>>,
    pub chain: Option<Arc<dyn crate::chain::Chain>>,
    /// The process's one replay of the store, when others in it replay too (the
    /// validator's anchoring): one set of folds for both. A fresh one without.
    pub replays: Option<Arc<LatestReplay>>,
}

/// How often the pages' chain facts (validators' identities, the queue) are read from
/// the chain again, and how long one read may take: page requests never cost more than
/// one chain read a minute.
const CHAIN_REFRESH: Duration = Duration::from_secs(60);
const CHAIN_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The chain's neurons and commitments, read at most once per [`CHAIN_REFRESH`]; a
/// failed read keeps the last one (or none) and waits as long before trying again.
struct ChainReads {
    chain: Arc<dyn crate::chain::Chain>,
    last: tokio::sync::Mutex<Option<(Instant, ChainRead)>>,
}

type ChainRead = Arc<(Vec<crate::chain::Neuron>, Vec<crate::chain::CommitmentRecord>)>;

impl ChainReads {
    async fn get(&self) -> Option<ChainRead> {
        let mut last = self.last.lock().await;
        if let Some((_, read)) = last.as_ref().filter(|(at, _)| at.elapsed() < CHAIN_REFRESH) {
            return Some(read.clone());
        }
        let read = tokio::time::timeout(CHAIN_READ_TIMEOUT, async {
            Ok::<_, crate::chain::ChainError>((self.chain.neurons().await?, self.chain.commitments().await?))
        })
        .await;
        let read = match read {
            Ok(Ok(read)) => Arc::new(read),
            Ok(Err(error)) => {
                tracing::warn!(event = "chain_unread", error = %error, "could not read the chain for the pages");
                return last.as_ref().map(|(_, read)| read.clone());
            }
            Err(_) => {
                tracing::warn!(event = "chain_unread", "reading the chain for the pages timed out");
                return last.as_ref().map(|(_, read)| read.clone());
            }
        };
        *last = Some((Instant::now(), read.clone()));
        Some(read)
    }
}

/// The routes over `log`'s store, with what `feeds` gives.
pub fn router(
    log: Arc<OwnLog>,
    feeds: Feeds,
    ratio_params: RatioParams,
    metrics: Arc<Metrics>,
    budget: Arc<MemoryBudget>,
    now_ms: fn() -> u64,
    limits: HttpLimits,
) -> Router {
    let timeout = limits.request_timeout;
    let Feeds { status, chain, replays } = feeds;
    let replays = replays.unwrap_or_default();
    // Our own log's sets of who played go to the match file, as the validator's do.
    let own = ValidatorState::spilling_to(&ratio_params, replays.cold());
    let replayer = Replayer::start(log.clone(), ratio_params, limits.state_refresh, replays);
    let served = Arc::new(Served {
        log,
        status,
        chain_reads: chain.map(|chain| ChainReads { chain, last: tokio::sync::Mutex::new(None) }),
        limits,
        metrics,
        budget,
        builds: Arc::new(Semaphore::new(ANSWER_BUILDS)),
        ratio_params,
        now_ms,
        own: Arc::new(std::sync::Mutex::new(own)),
        replayer,
        state_page: tokio::sync::Mutex::new(None),
        pages: Default::default(),
    });
    Router::new()
        .route("/", get(live_page))
        .route("/subnet.html", get(|s| subnet_page(s, "subnet.html", PageQuery::default())))
        .route("/miners.html", get(|s, Query(q): Query<PageQuery>| subnet_page(s, "miners.html", q)))
        .route("/matches.html", get(|s, Query(q): Query<PageQuery>| subnet_page(s, "matches.html", q)))
        .route("/history.html", get(|s| subnet_page(s, "history.html", PageQuery::default())))
        .route("/match.html", get(match_page))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/af/v1/live", get(live))
        .route("/af/v1/logs", get(logs))
        .route("/af/v1/log/{validator}/tip", get(tip))
        .route("/af/v1/log/{validator}/checkpoint", get(checkpoint))
        .route("/af/v1/log/{validator}/tile/entries/{*index}", get(bundle))
        .route("/af/v1/log/{validator}/block/{height}", get(block))
        .route("/af/v1/log/{validator}/consistency", get(consistency_proof))
        .route("/af/v1/transcripts", get(transcripts))
        .route("/af/v1/state", get(state))
        .route("/af/v1/peers", get(peers))
        .fallback(|| async {
            problem(StatusCode::NOT_FOUND, "no such path (see ledger-spec/11-http.md)").into_response()
        })
        .layer(middleware::from_fn(move |request: Request, next: Next| async move {
            match tokio::time::timeout(timeout, next.run(request)).await {
                Ok(response) => response,
                Err(_) => problem(StatusCode::SERVICE_UNAVAILABLE, "the request took too long").into_response(),
            }
        }))
        .with_state(served)
}

/// Serves `router` on `listener` until `stop` turns true, under `limits`: each
/// connection gets a slot (in total and for its IP), else one of the reserved slots that
/// answer only `/healthz` and `/metrics`, else it is closed at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: &HttpLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let reserved = Arc::new(Semaphore::new(limits.reserved_connections));
    let waiting = Arc::new(Semaphore::new(RESERVED_WAITERS));
    let per_ip: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>> = Default::default();
    let probes_only = router.clone().layer(middleware::from_fn(probes_only));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        let (stream, address) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ip = address.ip();
        let ip_slot = IpSlot::take(&per_ip, ip, limits.max_connections_per_ip);
        let normal = ip_slot.and_then(|ip_slot| slots.clone().try_acquire_owned().ok().map(|p| (p, ip_slot)));
        let (service, head_timeout, keep_alive) = match normal {
            Some(_) => (router.clone(), limits.header_timeout, true),
            None => (probes_only.clone(), RESERVED_HEADER_TIMEOUT, false),
        };
        // Past every slot, a connection may wait a moment for a reserved one (a probe
        // arriving while attackers' connections are being cut); a few wait, the rest
        // are closed at once.
        let waiter = match normal {
            Some(_) => None,
            None => match waiting.clone().try_acquire_owned() {
                Ok(waiter) => Some(waiter),
                Err(_) => continue,
            },
        };
        let reserved = reserved.clone();
        let idle = limits.idle_timeout;
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let slot = match normal {
                Some((permit, ip)) => Slot::Normal { _permit: permit, _ip: ip },
                None => match tokio::time::timeout(RESERVED_HEADER_TIMEOUT, reserved.acquire_owned()).await {
                    Ok(Ok(permit)) => Slot::Reserved { _permit: permit },
                    _ => return,
                },
            };
            drop(waiter);
            let _ = stream.set_nodelay(true);
            let deadline = Box::pin(tokio::time::sleep(idle));
            let stream = LimitedStream { stream, idle, deadline };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(head_timeout)
                .keep_alive(keep_alive)
                .writev(true)
                .max_buf_size(64 * 1024);
            let connection = builder.serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            );
            let _ = watcher.watch(connection).await;
            drop(slot);
        });
    }
    // Requests in flight finish (bounded by their own deadlines), new ones are refused.
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

/// A reserved connection's whole request head must arrive this fast, and a connection
/// past every slot waits at most this long for a reserved one.
const RESERVED_HEADER_TIMEOUT: Duration = Duration::from_secs(1);
/// Connections past every slot allowed to wait for a reserved one at once.
const RESERVED_WAITERS: usize = 64;

async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            // Nobody can stop us any more: serve on.
            std::future::pending::<()>().await;
        }
    }
}

/// What a connection holds while it is open.
enum Slot {
    Normal { _permit: OwnedSemaphorePermit, _ip: IpSlot },
    Reserved { _permit: OwnedSemaphorePermit },
}

/// One connection counted against its IP address; uncounted when dropped.
struct IpSlot {
    counts: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl IpSlot {
    fn take(counts: &Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, limit: usize) -> Option<IpSlot> {
        let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = map.entry(ip).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(IpSlot { counts: counts.clone(), ip })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = map.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// On a reserved connection, only the operator's probes are answered.
async fn probes_only(request: Request, next: Next) -> Response {
    match request.uri().path() {
        "/healthz" | "/metrics" => next.run(request).await,
        _ => problem(StatusCode::SERVICE_UNAVAILABLE, "every connection slot is taken; try again shortly")
            .into_response(),
    }
}

/// An error answer: its status and a JSON `{"error": ...}` body.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

fn problem(status: StatusCode, message: &str) -> ApiError {
    ApiError(status, message.to_string())
}

type Answer = Result<Response, ApiError>;

/// Refuses what was drawn from `replay` if a spilled match (a log's, or one of the
/// state's) failed to read back meanwhile:
/// a page short of a match is never served as whole.
fn whole(replay: &Replay) -> Result<(), ApiError> {
    let faulted =
        replay.folds.iter().any(crate::replay::fold::ChainFold::spill_faulted) || replay.state.matches.faulted();
    match faulted {
        true => Err(internal("a spilled match failed to read back from the replay's match file (see the log)")),
        false => Ok(()),
    }
}

fn internal(error: impl std::fmt::Display) -> ApiError {
    problem(StatusCode::INTERNAL_SERVER_ERROR, &error.to_string())
}

/// A validator in a path: 64 lowercase hex digits, its one spelling (others are 404).
fn parse_validator(text: &str) -> Result<ValidatorKey, ApiError> {
    ValidatorKey::from_hex(text)
        .map_err(|_| problem(StatusCode::NOT_FOUND, "the validator must be 64 lowercase hex digits"))
}

/// A response with caching headers, or 304 when the client's copy is current.
fn cached(request: &HeaderMap, etag: &str, cache: &'static str, content_type: &'static str, body: Body) -> Response {
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

fn json_cached(request: &HeaderMap, value: &impl serde::Serialize) -> Answer {
    let body = serde_json::to_vec(value).map_err(internal)?;
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    Ok(cached(request, &etag, MUTABLE, "application/json", Body::from(body)))
}

/// Runs store reads on the blocking pool: redb reads are synchronous.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(internal)?
}

/// A JSON answer built for one reader on the blocking pool: built with one of the answer
/// permits, and held against the memory budget (reserved before the permit goes) until
/// written. For answers that grow with the logs (the log list, consistency proofs).
async fn built_json<T: serde::Serialize>(
    served: &Served,
    request: &HeaderMap,
    build: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Answer {
    let _permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let body = blocking(move || serde_json::to_vec(&build()?).map_err(internal)).await?;
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    Ok(cached(request, &etag, MUTABLE, "application/json", held_body(served, body).await?))
}

async fn logs(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let log = served.log.clone();
    built_json(&served, &request, move || log_list(&log)).await
}

/// The log list of a store: every chain and its tip.
fn log_list(log: &OwnLog) -> Result<LogList, ApiError> {
    let tips = log.store.tips().map_err(internal)?;
    let logs = tips
        .into_iter()
        .map(|(validator, tip)| LogSummary { validator, size: tip.height + 1, tip_hash: tip.hash })
        .collect();
    Ok(LogList { format: LOG_LIST_FORMAT.into(), own: Some(log.validator()), logs })
}

async fn tip(State(served): State<Arc<Served>>, Path(validator): Path<String>, request: HeaderMap) -> Answer {
    let validator = parse_validator(&validator)?;
    let log = served.log.clone();
    let signed = blocking(move || {
        let tip = log.store.tip(&validator).map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        signed_headers(&log.store, &validator, tip.height, tip.height).map_err(internal).map(|mut h| h.remove(0))
    })
    .await?;
    json_cached(&request, &signed)
}

fn no_chain(validator: &ValidatorKey) -> ApiError {
    problem(StatusCode::NOT_FOUND, &format!("no chain of validator {validator} here"))
}

async fn checkpoint(State(served): State<Arc<Served>>, Path(validator): Path<String>, request: HeaderMap) -> Answer {
    let validator = parse_validator(&validator)?;
    if validator != served.log.validator() {
        return Err(problem(
            StatusCode::NOT_FOUND,
            "a node signs checkpoints of its own chain only; every chain's signed tip is at .../tip",
        ));
    }
    let log = served.log.clone();
    let note = blocking(move || {
        let tip = log.tip().map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        Ok(Checkpoint::of_tip(validator, &tip).sign(log.key()))
    })
    .await?;
    let etag = blake3::hash(note.as_bytes()).to_hex()[..32].to_string();
    Ok(cached(&request, &etag, MUTABLE, "text/plain; charset=utf-8", Body::from(note)))
}

/// `x001/234` or `x001/234.p/17`: the tile index and the bundle's width.
fn parse_bundle(path: &str) -> Result<(u64, u64), ApiError> {
    let bad = |why: String| problem(StatusCode::NOT_FOUND, &why);
    let (index, width) = match path.split_once(".p/") {
        Some((index, width)) => {
            let parsed: u64 = width.parse().map_err(|_| bad(format!("bad partial width {width:?}")))?;
            if parsed == 0 || parsed >= TILE_WIDTH || width != parsed.to_string() {
                return Err(bad(format!(
                    "a partial bundle's width is 1..={} without leading zeros, not {width:?}",
                    TILE_WIDTH - 1
                )));
            }
            (index, parsed)
        }
        None => (path, TILE_WIDTH),
    };
    let n = layout::parse_tile_index(index).map_err(|e| bad(e.to_string()))?;
    Ok((n, width))
}

async fn bundle(
    State(served): State<Arc<Served>>,
    Path((validator, index)): Path<(String, String)>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    let (n, width) = parse_bundle(&index)?;
    let first = n.checked_mul(TILE_WIDTH).ok_or_else(|| no_chain(&validator))?;
    let last = first + width - 1;
    let log = served.log.clone();
    // The bundle's ETag is its last block's hash, which commits to every block before it.
    let etag = blocking(move || {
        let tip = log.store.tip(&validator).map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        if last > tip.height {
            return Err(problem(
                StatusCode::NOT_FOUND,
                &format!("the chain has {} blocks; this bundle needs {}", tip.height + 1, last + 1),
            ));
        }
        let bytes = log.store.block_bytes(&validator, last).map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        crate::ledger::store::stored_header(&bytes).map(|(h, _)| h.hash()).map_err(internal)
    })
    .await?;
    let quoted = format!("\"{}\"", etag.to_hex());
    if request.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == quoted.as_bytes()) {
        return Ok(cached(&request, &etag.to_hex(), IMMUTABLE, "application/octet-stream", Body::empty()));
    }
    // One block at a time through a channel of one: a slow reader holds at most two
    // records (one queued, one being written), each reserved from the memory budget.
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let served = served.clone();
    tokio::spawn(async move {
        for height in first..=last {
            let item = match read_held(&served, validator, height, true).await {
                Ok(Some(record)) => Ok(Bytes::from_owner(record)),
                Ok(None) => Err(std::io::Error::other(format!("block {height} is missing"))),
                Err(ApiError(_, why)) => Err(std::io::Error::other(why)),
            };
            let failed = item.is_err();
            if sender.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(receiver, |mut r| async move { r.recv().await.map(|item| (item, r)) });
    Ok(cached(&request, &etag.to_hex(), IMMUTABLE, "application/octet-stream", Body::from_stream(stream)))
}

/// What a reader is told when the memory budget has no room for its answer in time.
fn budget_spent() -> ApiError {
    problem(StatusCode::SERVICE_UNAVAILABLE, "the node's memory budget for readers is spent; try again")
}

/// One block's bytes (as a bundle record, with its length prefix, if `record`), read with
/// one of the few answer permits and held against the memory budget until written.
/// A reader that cannot get room within the request timeout is told the node is busy.
async fn read_held(
    served: &Arc<Served>,
    validator: ValidatorKey,
    height: u64,
    record: bool,
) -> Result<Option<Held>, ApiError> {
    let _permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let log = served.log.clone();
    let Some(block) = blocking(move || log.store.block_bytes(&validator, height).map_err(internal)).await? else {
        return Ok(None);
    };
    let bytes = if record {
        let mut framed = Vec::with_capacity(block.len() + 4);
        layout::push_record(&mut framed, &block);
        framed
    } else {
        block
    };
    let reservation = room_for(served, bytes.len()).await?;
    Ok(Some(Held::new(bytes, reservation)))
}

/// Room in the memory budget for an answer of `bytes`, waiting up to the request timeout
/// for it; a reader that cannot get it is told the node is busy.
async fn room_for(served: &Served, bytes: usize) -> Result<Reservation, ApiError> {
    served.budget.reserve_within(bytes as u64, served.limits.request_timeout).await.ok_or_else(budget_spent)
}

async fn block(
    State(served): State<Arc<Served>>,
    Path((validator, height)): Path<(String, String)>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    // One spelling per block: "+1", "01" and the like are not this URL.
    let height: u64 = height.parse().ok().filter(|h: &u64| h.to_string() == height).ok_or_else(|| {
        problem(StatusCode::NOT_FOUND, "the height is a decimal number without sign or leading zeros")
    })?;
    let held = read_held(&served, validator, height, false)
        .await?
        .ok_or_else(|| problem(StatusCode::NOT_FOUND, &format!("no block {height} of validator {validator} here")))?;
    let hash = crate::ledger::store::stored_header(&held.bytes).map_err(internal)?.0.hash();
    Ok(cached(&request, &hash.to_hex(), IMMUTABLE, "application/octet-stream", Body::from(Bytes::from_owner(held))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsistencyQuery {
    old: u64,
    new: Option<u64>,
}

async fn consistency_proof(
    State(served): State<Arc<Served>>,
    Path(validator): Path<String>,
    Query(query): Query<ConsistencyQuery>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    let log = served.log.clone();
    // Up to MAX_CONSISTENCY_HEADERS headers: about 16 MiB of JSON.
    built_json(&served, &request, move || {
        consistency::prove(&log.store, &validator, query.old, query.new)
            .map_err(|e| problem(StatusCode::BAD_REQUEST, &e.to_string()))
    })
    .await
}

/// The latest replay of the store, made by the background replayer. A request only
/// asks for a fresh one; it waits only when there is none yet.
async fn replayed(served: &Arc<Served>) -> Result<Arc<Replay>, ApiError> {
    served.replayer.demand();
    let mut latest = served.replayer.latest.clone();
    let wait = tokio::time::timeout(served.limits.request_timeout, latest.wait_for(|r| r.is_some())).await;
    match wait {
        Ok(Ok(replay)) => Ok(replay.clone().expect("waited for Some")),
        _ => Err(problem(StatusCode::SERVICE_UNAVAILABLE, "the first replay of the logs is not ready yet")),
    }
}

/// Replays the store on one background thread at the lowest CPU priority, when asked and
/// at most every `state_refresh`, so that readers of `state` never take the cores the
/// validator plays on. The replay is the process's shared [`LatestReplay`]: it folds only
/// blocks that are new since the last replay anyone in the process made. The thread ends
/// when the router is dropped.
struct Replayer {
    latest: watch::Receiver<Option<Arc<Replay>>>,
    wanted: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Replayer {
    fn start(log: Arc<OwnLog>, params: RatioParams, every: Duration, replays: Arc<LatestReplay>) -> Replayer {
        let (sender, latest) = watch::channel(None);
        let wanted = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let signal = wanted.clone();
        let spawned = std::thread::Builder::new().name("af-http-replay".into()).spawn(move || {
            lower_priority();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
            let mut last = Instant::now() - every;
            while !sender.is_closed() {
                {
                    let (flag, condvar) = &*signal;
                    let mut asked = flag.lock().unwrap_or_else(|e| e.into_inner());
                    if !*asked || last.elapsed() < every {
                        let _ = condvar.wait_timeout(asked, Duration::from_millis(250));
                        continue;
                    }
                    *asked = false;
                }
                last = Instant::now();
                let run = || replays.get(&log.store, &params);
                let fresh = match &pool {
                    Ok(pool) => pool.install(run),
                    Err(_) => run(),
                };
                if let Ok(fresh) = fresh {
                    let _ = sender.send(Some(fresh));
                }
            }
        });
        if spawned.is_err() {
            eprintln!("af: could not start the HTTP API's replay thread; /af/v1/state will answer 503");
        }
        Replayer { latest, wanted }
    }

    fn demand(&self) {
        let (flag, condvar) = &*self.wanted;
        *flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        condvar.notify_one();
    }
}

/// Background work yields to the validator: this thread gets the lowest priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's own id only changes its nice value.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Page {
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

async fn state(State(served): State<Arc<Served>>, Query(page): Query<Page>, request: HeaderMap) -> Answer {
    let replay = replayed(&served).await?;
    // The first page, which dashboards poll, is serialized once per replay.
    let first_page = page.offset == 0 && page.limit.is_none();
    if first_page {
        let cached = served.state_page.lock().await;
        if let Some((of, body, etag)) = cached.as_ref() {
            // A weak pointer keeps its allocation, so an equal address is the same replay.
            if std::ptr::eq(of.as_ptr(), Arc::as_ptr(&replay)) {
                return Ok(self::cached(&request, etag, MUTABLE, "application/json", Body::from(body.clone())));
            }
        }
    }
    let limit = page.limit.unwrap_or(100).min(MAX_MATCHES_PAGE);
    if !first_page {
        // This reader's own page (up to 1,000 matches, each with every vote).
        return built_json(&served, &request, move || state_page(&replay, page.offset, limit)).await;
    }
    let body = Bytes::from(serde_json::to_vec(&state_page(&replay, page.offset, limit)?).map_err(internal)?);
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    *served.state_page.lock().await = Some((Arc::downgrade(&replay), body.clone(), etag.clone()));
    Ok(cached(&request, &etag, MUTABLE, "application/json", Body::from(body)))
}

/// `af/v1/state` with the page of `limit` matches from `offset`.
fn state_page(replay: &Replay, offset: usize, limit: usize) -> Result<serde_json::Value, ApiError> {
    let state = &replay.state;
    let matches: Vec<_> = state.matches.iter_from(offset).take(limit).collect();
    whole(replay)?;
    let tips: Vec<_> = replay.folds.iter().map(|f| (f.validator, f.tip)).collect();
    Ok(serde_json::json!({
            "note": "computed by this node from the logs it holds; mirror them and run `af audit` to check",
            "state_hash": replay.state_hash,
            "tips": tips,
            "champion": state.champion,
            "champion_history": state.champion_history,
            "ratio_set_ppm": state.ratio_set_ppm,
            "ratio_set_at_block": state.ratio_set_at_block,
            "validators": state.validators,
            "weights": state.weights,
            "discrepancies": state.discrepancies.len(),
            "matches_total": state.matches.len(),
            "matches_offset": offset,
            "matches": matches,
    }))
}

/// `bytes` as a response body held against the memory budget until it is written.
async fn held_body(served: &Served, bytes: Vec<u8>) -> Result<Body, ApiError> {
    let reservation = room_for(served, bytes.len()).await?;
    Ok(Body::from(Bytes::from_owner(Held::new(bytes, reservation))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TranscriptQuery {
    miner: Option<String>,
    challenge: Option<String>,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

async fn transcripts(
    State(served): State<Arc<Served>>,
    Query(query): Query<TranscriptQuery>,
    request: HeaderMap,
) -> Answer {
    if query.miner.is_some() == query.challenge.is_some() {
        return Err(problem(StatusCode::BAD_REQUEST, "give exactly one of ?miner=HOTKEY and ?challenge=ID"));
    }
    if query.miner.as_ref().is_some_and(|m| m.len() > crate::limits::MAX_NAME_BYTES) {
        return Err(problem(StatusCode::BAD_REQUEST, "the hotkey is too long"));
    }
    if query.challenge.as_ref().is_some_and(|c| c.len() > 64) {
        return Err(problem(StatusCode::BAD_REQUEST, "the challenge id is longer than 64 hex digits"));
    }
    let replay = replayed(&served).await?;
    let log = served.log.clone();
    let limit = query.limit.unwrap_or(20).min(MAX_ENTRIES_PAGE);
    // A page reads its blocks one at a time, with one of the answer permits (a crowd
    // of readers builds that many pages at once), and holds each entry against the memory
    // budget before it adds it, until the page is written.
    let permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let mut reservation = served.budget.try_reserve(0).ok_or_else(budget_spent)?;
    let (body, reservation) = blocking(move || {
        use crate::replay::entries::{entries_page, resolve_challenge_id, EntriesError, Filter, Found};
        // 64 hex digits, or a unique prefix of at least 16, as on the command line.
        let found = match (&query.miner, &query.challenge) {
            (Some(miner), _) => Found::Miner(miner),
            (None, Some(text)) => Found::Challenge(
                resolve_challenge_id(&log.store, text).map_err(|why| problem(StatusCode::BAD_REQUEST, &why))?,
            ),
            (None, None) => return Err(problem(StatusCode::BAD_REQUEST, "give ?miner=HOTKEY or ?challenge=ID")),
        };
        let filter = Filter::default();
        let mut room = |bytes: usize| reservation.grow(bytes as u64);
        let page = (query.offset, limit);
        match entries_page(&log.store, &replay.folds, (found, &filter), page, MAX_ENTRIES_PAGE_BYTES, &mut room) {
            Ok(body) => whole(&replay).map(|()| (body, reservation)),
            Err(EntriesError::NoRoom) => Err(budget_spent()),
            Err(error) => Err(internal(error)),
        }
    })
    .await?;
    drop(permit);
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    let body = Body::from(Bytes::from_owner(Held::new(body, reservation)));
    Ok(cached(&request, &etag, MUTABLE, "application/json", body))
}

/// A heartbeat older than this (the writer beats once per block interval) is a stalled loop.
pub const HEARTBEAT_STALE_MS: u64 = 60_000;
/// The chain unanswered, or its head unmoved, for longer than this is unhealthy
/// (subtensor makes a block every 12 s).
pub const CHAIN_STALE_MS: u64 = 60_000;
/// A due commitment, or weights, failing for more chain blocks than this is unhealthy
/// (commitments are due every `COMMIT_EVERY_BLOCKS`; weights once per tempo of 360).
pub const ANCHOR_FAILING_BLOCKS: u64 = 720;

/// Why the chain side of a validator is unhealthy, if it is.
pub fn chain_trouble(seen: &crate::metrics::ChainSeen, now_ms: u64) -> Option<String> {
    let head = seen.head.unwrap_or(0);
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
async fn healthz(State(served): State<Arc<Served>>) -> Response {
    let now = (served.now_ms)();
    let failing = match (served.metrics.log_failure(), served.metrics.last_heartbeat_ms()) {
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
async fn metrics_text(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let metrics = &served.metrics;
    metrics.budget_used_bytes.set(served.budget.used() as i64);
    metrics.budget_limit_bytes.set(served.budget.limit() as i64);
    metrics.sample_heap();
    metrics.sample_disk(served.log.store.path());
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
        let ratio_ppm = ratio_params.current_ppm(&state.ratio, state.latest_chain_block);
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
        metrics.state_matches_in_memory.set(replay.state.matches.held_in_memory() as i64);
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

/// Which match `match.html` shows, and which page of its challenges (1-based).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchQuery {
    id: String,
    page: Option<usize>,
}

/// One match's challenges with both answers side by side (`super::pages::match_page`),
/// read from the store a page at a time.
async fn match_page(State(served): State<Arc<Served>>, Query(query): Query<MatchQuery>) -> Answer {
    if query.id.len() > 64 {
        return Err(problem(StatusCode::BAD_REQUEST, "the match id is longer than 64 hex digits"));
    }
    let replay = replayed(&served).await?;
    let log = served.log.clone();
    // Its blocks are read one at a time, with one of the answer permits.
    let permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let html = blocking(move || {
        let match_id = crate::replay::entries::resolve_match_id(&replay.folds, &query.id)
            .map_err(|why| problem(StatusCode::NOT_FOUND, &why))?;
        let (validator, played) = replay
            .folds
            .iter()
            .find_map(|f| f.matches.get(&match_id).map(|m| (f.validator, m)))
            .ok_or_else(|| problem(StatusCode::NOT_FOUND, "no log held names this match"))?;
        let page = query.page.unwrap_or(1);
        if page == 0 {
            return Err(problem(StatusCode::NOT_FOUND, "pages start at 1"));
        }
        let offset = (page - 1).saturating_mul(super::pages::PAIRS_PER_PAGE);
        let (total, pairs) = crate::replay::entries::match_pairs(
            &log.store,
            &validator,
            &match_id,
            &played,
            (offset, super::pages::PAIRS_PER_PAGE),
            super::pages::ANSWER_CHARS,
        )
        .map_err(internal)?;
        if offset > 0 && offset >= total {
            return Err(problem(
                StatusCode::NOT_FOUND,
                &format!("no page {page}: the match has {} page(s)", total.div_ceil(super::pages::PAIRS_PER_PAGE)),
            ));
        }
        whole(&replay)?;
        Ok(super::pages::match_page(&validator, &match_id, &played, &pairs, page, total))
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
struct PageQuery {
    page: Option<usize>,
}

/// One of the subnet's pages (`super::pages`), folded from the latest replay; the matches
/// and miners pages one page at a time. Drawn once per replay and chain read, by at most
/// `drawn::PAGE_DRAWS` readers at a time; every other reader gets the same bytes.
async fn subnet_page(State(served): State<Arc<Served>>, name: &'static str, query: PageQuery) -> Answer {
    use super::pages::{FromChain, Paging};
    let replay = replayed(&served).await?;
    let read = match &served.chain_reads {
        Some(reads) if name == "subnet.html" || name == "miners.html" => reads.get().await,
        _ => None,
    };
    // The queue is the one this validator plays: its own log's champion and plays.
    let chain = match read {
        Some(read) => with_own_state(&served, move |own| FromChain::read(&read.0, &read.1, Some(own))).await?,
        None => FromChain::default(),
    };
    let key = super::drawn::PageKey { name, number: query.page, chain };
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
        super::pages::render(name, &for_render, &chain, paging)
            .ok_or_else(|| {
                ApiError(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no page {} of {name}: there are {}",
                        query.page.unwrap_or(0),
                        super::pages::pages_of(name, &for_render, &chain)
                    ),
                )
            })
            .and_then(|html| whole(&for_render).map(|()| html))
    })
    .await?;
    let html = Bytes::from(html);
    served.pages.keep(key, &replay, html.clone(), drawn_at, drawn_at.elapsed());
    Ok(html_page(html))
}

/// The live page: one self-contained HTML file that polls `af/v1/live`.
async fn live_page() -> Response {
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

const LIVE_PAGE: &str = include_str!("live.html");

/// What the live page shows: our own log's champion, ratio, open match with each env's
/// tally so far, and last chain records (all folded from our signed log), plus vTrust
/// from the latest replay and peers' lag (as peers claim it).
/// Folds our own log's new blocks into the state kept between requests, then reads
/// `read` from it under the lock: only its answer leaves, never a copy of the state.
async fn with_own_state<T: Send + 'static>(
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

async fn live(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
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
                "rule_in_words": crate::evaluation::stopping::plan_in_words(&open.started.rule),
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
            "ratio_to_beat_ppm": ratio_params.current_ppm(&state.ratio, state.latest_chain_block),
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

async fn peers(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let Some(status) = &served.status else {
        return Err(problem(StatusCode::NOT_FOUND, "this node runs without networking"));
    };
    let status = status.borrow().clone();
    json_cached(&request, &status)
}

/// A connection that is dropped after `idle` without progress.
struct LimitedStream {
    stream: TcpStream,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl LimitedStream {
    /// Progress pushes the deadline back; no progress past it ends the connection.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.deadline.as_mut().reset(tokio::time::Instant::now() + self.idle);
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle connection")))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        self.watch(cx, poll)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    /// Vectored writes let hyper queue body chunks as they are (its queue strategy)
    /// instead of copying them into its own buffer, so the bytes written are the very
    /// ones reserved from the memory budget, released when written.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
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
        let gone = ChainSeen { last_read_ms: Some(now - 61_000), ..good.clone() };
        assert!(chain_trouble(&gone, now).unwrap().contains("has not answered for 61 s"));
        let stalled = ChainSeen { head_since_ms: Some(now - 70_000), ..good.clone() };
        assert!(chain_trouble(&stalled, now).unwrap().contains("stayed at block 5000"));
        let failing = ChainSeen { weights_failing_since: Some(5_000 - ANCHOR_FAILING_BLOCKS - 1), ..good.clone() };
        assert!(chain_trouble(&failing, now).unwrap().contains("setting weights has failed"));
        let recent = ChainSeen { commitment_failing_since: Some(4_900), ..good };
        assert_eq!(chain_trouble(&recent, now), None, "a failure younger than the threshold is retried quietly");
    }
}
