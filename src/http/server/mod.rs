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
//!
//! Rooms: `connections` (accepting under the limits), `common` (what handlers share),
//! `logs` (the log handlers and the state), `replayer` (the replay thread), `chain_reads`
//! (the chain's facts for the pages), `health` (healthz, metrics, peers), `html` (pages).

mod chain_reads;
mod common;
mod connections;
mod folds;
mod health;
mod html;
mod logs;
mod replayer;

use crate::budget::MemoryBudget;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::OwnLog;
use crate::metrics::Metrics;
use crate::p2p::net::NetStatus;
use crate::replay::latest_replay::LatestReplay;
use crate::validator::state::ValidatorState;
use axum::extract::{Query, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::Arc;
use tokio::sync::{watch, Semaphore};

use chain_reads::ChainReads;
use common::{problem, Served, ANSWER_BUILDS};
pub use common::{HttpLimits, MAX_ENTRIES_PAGE, MAX_ENTRIES_PAGE_BYTES, MAX_MATCHES_PAGE};
pub use connections::{serve, serve_probes};
pub use health::{chain_trouble, ANCHOR_FAILING_BLOCKS, CHAIN_STALE_MS, HEARTBEAT_STALE_MS};
use health::{healthz, metrics_text, peers};
use html::{explorer_page, explorer_script, live, live_page, match_page, subnet_page, PageQuery};
use logs::{block, bundle, checkpoint, consistency_proof, logs, state, tip, transcripts};
use replayer::Replayer;

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
    /// The network's budget, apart from the readers' (`budget::Budgets`): shown in the
    /// metrics with theirs.
    pub network_budget: Option<Arc<MemoryBudget>>,
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
    let Feeds { status, chain, replays, network_budget } = feeds;
    let replays = replays.unwrap_or_default();
    // Our own log's sets of who played go to the spill file, as the validator's do.
    let own = ValidatorState::spilling_to(&ratio_params, replays.sets_file());
    let replayer = Replayer::start(log.clone(), ratio_params, limits.state_refresh, replays);
    let served = Arc::new(Served {
        log,
        status,
        chain_reads: chain.map(|chain| ChainReads { chain, last: tokio::sync::Mutex::new(None) }),
        limits,
        metrics,
        budget,
        network_budget,
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
        .route("/explorer.html", get(explorer_page))
        .route("/explorer.js", get(explorer_script))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/af/v1/live", get(live))
        .route("/af/v1/logs", get(logs))
        .route("/af/v1/log/{validator}/tip", get(tip))
        .route("/af/v1/log/{validator}/checkpoint", get(checkpoint))
        .route("/af/v1/log/{validator}/tile/entries/{*index}", get(bundle))
        .route("/af/v1/log/{validator}/block/{height}", get(block))
        .route("/af/v1/log/{validator}/consistency", get(consistency_proof))
        .route("/af/v1/log/{validator}/fold/{height}", get(folds::fold))
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
