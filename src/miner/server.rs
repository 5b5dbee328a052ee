//! The reference miner: an OpenAI-compatible HTTP server on loopback answering with a
//! [`Policy`]. Used by tests, benchmarks and the devnet in place of real models.
//!
//! What an OpenAI client expects: `POST /v1/chat/completions` (with `stream: true` as
//! server-sent events of `chat.completion.chunk`s ending in `data: [DONE]`), the legacy
//! `POST /v1/completions`, `GET /v1/models` and `GET /v1/models/{id}`, `usage` in every
//! completion (whitespace-separated words: there is no tokenizer), and every error as
//! `{"error": {...}}`: a model other than the one served is a 404 `model_not_found`.

use super::openai::{
    error_body, ChatRequest, ChatResponse, Choice, CompletionRequest, Prompt, ResponseMessage, Usage, COMPLETIONS_PATH,
    TEXT_COMPLETIONS_PATH,
};
use super::policy::{Policy, Solver};
use super::stats::SERVER_TIMING_METRIC;
use crate::bytes::Hash32;
use axum::extract::{DefaultBodyLimit, Path, State};
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
        .route(TEXT_COMPLETIONS_PATH, post(complete_text))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(one_model))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route", "invalid_request_error", None, None) })
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(state)
}

fn error(status: StatusCode, message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Response {
    (status, Json(error_body(message, kind, param, code))).into_response()
}

fn model_object(id: &str) -> serde_json::Value {
    serde_json::json!({ "id": id, "object": "model", "created": 0, "owned_by": "af-reference" })
}

fn unknown_model(model: &str) -> Response {
    let message = format!("The model `{}` does not exist", crate::bytes::quote_prefix(model));
    error(StatusCode::NOT_FOUND, &message, "invalid_request_error", Some("model"), Some("model_not_found"))
}

async fn models(State(state): State<Arc<MinerState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "object": "list", "data": [model_object(&state.model)] }))
}

async fn one_model(State(state): State<Arc<MinerState>>, Path(id): Path<String>) -> Response {
    if id != state.model {
        return unknown_model(&id);
    }
    Json(model_object(&state.model)).into_response()
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn usage(prompt: u64, completion: u64) -> Usage {
    Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Parses a JSON body, or says why not (answered as OpenAI's 400 error by [`bad_request`]).
fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the request body is not valid: {e}"))
}

fn bad_request(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, &message, "invalid_request_error", None, None)
}

/// Server-sent events as OpenAI streams them: each chunk as `data: <json>`, then
/// `data: [DONE]`.
fn sse(chunks: Vec<serde_json::Value>) -> Response {
    use axum::response::sse::{Event, Sse};
    let mut events: Vec<Result<Event, std::convert::Infallible>> =
        chunks.into_iter().map(|chunk| Ok(Event::default().data(chunk.to_string()))).collect();
    events.push(Ok(Event::default().data("[DONE]")));
    Sse::new(futures::stream::iter(events)).into_response()
}

async fn complete_text(State(state): State<Arc<MinerState>>, body: axum::body::Bytes) -> Response {
    let request: CompletionRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(why) => return bad_request(why),
    };
    if request.model != state.model {
        return unknown_model(&request.model);
    }
    let prompt = match request.prompt {
        Prompt::One(text) => text,
        Prompt::Many(texts) => texts.join("\n"),
    };
    let number = state.requests.fetch_add(1, Ordering::Relaxed);
    let seed = Hash32(blake3::keyed_hash(&state.seed.0, &number.to_le_bytes()).into());
    let text = state.solver.answer(state.policy, &[crate::envs::Message::new("user", prompt.clone())], &seed);
    let (id, created) = (format!("cmpl-{number}"), now_seconds());
    let choice = |text: &str, finish: Option<&str>| serde_json::json!({ "text": text, "index": 0, "logprobs": null, "finish_reason": finish });
    if request.stream == Some(true) {
        let chunk = |choices| serde_json::json!({ "id": id, "object": "text_completion", "created": created, "model": state.model, "choices": choices });
        return sse(vec![chunk(vec![choice(&text, None)]), chunk(vec![choice("", Some("stop"))])]);
    }
    Json(serde_json::json!({
        "id": id, "object": "text_completion", "created": created, "model": state.model,
        "choices": [choice(&text, Some("stop"))], "usage": usage(words(&prompt), words(&text)),
    }))
    .into_response()
}

async fn complete(State(state): State<Arc<MinerState>>, body: axum::body::Bytes) -> Response {
    let request: ChatRequest = match parse_body(&body) {
        Ok(request) => request,
        Err(why) => return bad_request(why),
    };
    if request.model != state.model {
        return unknown_model(&request.model);
    }
    let started = std::time::Instant::now();
    let number = state.requests.fetch_add(1, Ordering::Relaxed);
    // Each request gets its own seed, so random policies differ across requests but a
    // server started with the same seed answers the same sequence the same way.
    let seed = Hash32(blake3::keyed_hash(&state.seed.0, &number.to_le_bytes()).into());
    match state.policy {
        Policy::Slow { delay_ms } => tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await,
        Policy::Flaky { p } if (u64::from(seed.0[0]) << 8 | u64::from(seed.0[1])) as f64 / 65536.0 < p => {
            let message = "flaky reference miner: simulated failure";
            return error(StatusCode::INTERNAL_SERVER_ERROR, message, "server_error", None, None);
        }
        // A 200 whose body is not a chat completion: a protocol error for the client.
        Policy::Garbage => return (StatusCode::OK, "\u{0}\u{1}not json {{{{").into_response(),
        _ => {}
    }
    let content = state.solver.answer(state.policy, &request.messages, &seed);
    // Tells the client how long the answer took us, so it can tell its own overhead
    // (HTTP, sockets, queueing) from the miner's time.
    let timing = format!("{};dur={:.3}", SERVER_TIMING_METRIC, started.elapsed().as_secs_f64() * 1000.0);
    let (id, created) = (format!("chatcmpl-{number}"), now_seconds());
    if request.stream == Some(true) {
        let chunk = |delta: serde_json::Value, finish: Option<&str>| {
            serde_json::json!({
                "id": id, "object": "chat.completion.chunk", "created": created, "model": request.model,
                "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
            })
        };
        let chunks = vec![
            chunk(serde_json::json!({ "role": "assistant", "content": "" }), None),
            chunk(serde_json::json!({ "content": content }), None),
            chunk(serde_json::json!({}), Some("stop")),
        ];
        return ([("server-timing", timing)], sse(chunks)).into_response();
    }
    let prompt_words = request.messages.iter().map(|m| words(&m.content)).sum();
    let body = Json(ChatResponse {
        id,
        object: "chat.completion".into(),
        created,
        model: request.model,
        usage: Some(usage(prompt_words, words(&content))),
        choices: vec![Choice {
            index: 0,
            message: ResponseMessage { role: "assistant".into(), content: Some(content) },
            finish_reason: Some("stop".into()),
        }],
    });
    ([("server-timing", timing)], body).into_response()
}
