//! The reference miner: an OpenAI-compatible HTTP server on loopback answering with a
//! [`Policy`]. Used by tests, benchmarks and the devnet in place of real models.

use super::openai::{ChatRequest, ChatResponse, Choice, ResponseMessage, COMPLETIONS_PATH};
use super::policy::{Policy, Solver};
use super::stats::SERVER_TIMING_METRIC;
use crate::bytes::Hash32;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Largest request body accepted (a long multi-turn conversation fits easily).
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

struct MinerState {
    policy: Policy,
    model: String,
    solver: Solver,
    seed: Hash32,
    requests: AtomicU64,
}

/// The server's routes; serve with `axum::serve(listener, router(..))`.
pub fn router(policy: Policy, model: String, seed: Hash32) -> Router {
    let state = Arc::new(MinerState { policy, model, solver: Solver::new(), seed, requests: AtomicU64::new(0) });
    Router::new()
        .route(COMPLETIONS_PATH, post(complete))
        .route("/v1/models", get(models))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state)
}

async fn models(State(state): State<Arc<MinerState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "object": "list", "data": [{ "id": state.model, "object": "model" }] }))
}

async fn complete(State(state): State<Arc<MinerState>>, Json(request): Json<ChatRequest>) -> Response {
    let started = std::time::Instant::now();
    let number = state.requests.fetch_add(1, Ordering::Relaxed);
    // Each request gets its own seed, so random policies differ across requests but a
    // server started with the same seed answers the same sequence the same way.
    let seed = Hash32(blake3::keyed_hash(&state.seed.0, &number.to_le_bytes()).into());
    match state.policy {
        Policy::Slow { delay_ms } => tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await,
        Policy::Flaky { p } if (u64::from(seed.0[0]) << 8 | u64::from(seed.0[1])) as f64 / 65536.0 < p => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "flaky reference miner: simulated failure").into_response();
        }
        // A 200 whose body is not a chat completion: a protocol error for the client.
        Policy::Garbage => return (StatusCode::OK, "\u{0}\u{1}not json {{{{").into_response(),
        _ => {}
    }
    let content = state.solver.answer(state.policy, &request.messages, &seed);
    // Tells the client how long the answer took us, so it can tell its own overhead
    // (HTTP, sockets, queueing) from the miner's time.
    let timing = format!("{};dur={:.3}", SERVER_TIMING_METRIC, started.elapsed().as_secs_f64() * 1000.0);
    let body = Json(ChatResponse {
        id: format!("chatcmpl-{number}"),
        object: "chat.completion".into(),
        created: 0,
        model: request.model,
        choices: vec![Choice {
            index: 0,
            message: ResponseMessage { role: "assistant".into(), content: Some(content) },
            finish_reason: Some("stop".into()),
        }],
    });
    ([("server-timing", timing)], body).into_response()
}
