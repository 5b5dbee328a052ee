//! The miner client: OpenAI-compatible chat completions over HTTP, with a per-request
//! timeout, retries with exponential backoff and jitter (on connect errors, 429 and 5xx
//! only), bounds on concurrent requests per miner and overall, and a cap on response
//! bytes. Every attempt's latency, status and error are kept; a failing miner yields an
//! error in its completion, never an error that stops the validator.

use super::openai::{ChatChunk, ChatRequest, ChatResponse, COMPLETIONS_PATH};
use super::stats::{parse_server_timing, RequestStats};
use crate::envs::Message;
use crate::metrics::{classify_request, Metrics};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    pub timeout_ms: u64,
    pub max_attempts: u32,
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    pub max_response_bytes: usize,
    pub max_concurrent_per_miner: usize,
    pub max_concurrent_total: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout_ms: 600_000,
            max_attempts: 3,
            backoff_base_ms: 250,
            backoff_max_ms: 10_000,
            max_response_bytes: 4 * 1024 * 1024,
            max_concurrent_per_miner: 32,
            max_concurrent_total: 256,
        }
    }
}

/// Where a miner's model is served.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// e.g. `http://127.0.0.1:8001` (the client appends `/v1/chat/completions`).
    pub base_url: String,
    pub model: String,
    /// Name of an environment variable holding a bearer token, if the endpoint needs one.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// One HTTP attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attempt {
    pub latency_ms: u64,
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// The outcome of asking a miner once, after any retries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Completion {
    /// The answer text, or why there is none.
    pub answer: Result<String, String>,
    pub attempts: Vec<Attempt>,
    /// From the first attempt's start to the end of the last.
    pub latency_ms: u64,
}

impl Completion {
    /// How it ended, as the metrics' `outcome` label: from the last attempt's status and
    /// the failure, while the status is still at hand.
    pub fn outcome(&self) -> &'static str {
        let status = self.attempts.last().and_then(|a| a.status);
        classify_request(status, self.answer.as_ref().err().map(String::as_str))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

#[derive(Clone)]
pub struct MinerClient {
    http: reqwest::Client,
    config: ClientConfig,
    total: Arc<Semaphore>,
    per_miner: Arc<Mutex<BTreeMap<String, Arc<Semaphore>>>>,
    stats: Arc<RequestStats>,
    metrics: Arc<Metrics>,
}

enum AttemptOutcome {
    Done(Result<String, String>),
    /// Try again, after the server's `Retry-After` if it gave one.
    Retry(String, Option<Duration>),
}

/// What kind of transport failure `error` is, in words an operator can act on: a timeout,
/// a refused or failed connection, a connection reset, or a body cut short, rather than
/// reqwest's catch-all "error decoding response body".
pub fn transport_error_kind(error: &reqwest::Error, timeout_ms: u64) -> String {
    if error.is_timeout() {
        return format!("timeout: no complete response within {timeout_ms} ms");
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut text = String::new();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::TimedOut => return format!("timeout: no complete response within {timeout_ms} ms"),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    return "connection reset by the miner".into()
                }
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::UnexpectedEof => {
                    return "short body: the connection closed before the response was complete".into()
                }
                _ => {}
            }
        }
        text = cause.to_string();
        source = cause.source();
    }
    // hyper says these in words only.
    if text.contains("closed before message completed") || text.contains("end of file before message length") {
        return "short body: the connection closed before the response was complete".into();
    }
    if error.is_connect() {
        return format!("connect failed: {}", crate::bytes::quote_prefix(&text));
    }
    format!("transport error: {}", crate::bytes::quote_prefix(&text))
}

/// The answer of a streamed chat completion (OpenAI's `chat.completion.chunk` events):
/// the first choice's content deltas in order, up to `data: [DONE]`. The body is already
/// bounded by the response cap; a stream without `[DONE]` or with a bad chunk is an error.
async fn streamed_answer(body: Vec<u8>) -> Result<String, String> {
    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    let mut events =
        futures::stream::iter([Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(body))]).eventsource();
    let mut answer = String::new();
    let mut n_chunks = 0u64;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| format!("not a chat completion: a bad event stream: {e}"))?;
        if event.data.trim() == "[DONE]" {
            return if n_chunks == 0 { Err("chat completion without chunks (streamed)".into()) } else { Ok(answer) };
        }
        let chunk: ChatChunk = serde_json::from_str(&event.data).map_err(|e| {
            format!(
                "not a chat completion chunk ({:?} at line {} column {}): data starts {}",
                e.classify(),
                e.line(),
                e.column(),
                crate::bytes::quote_prefix(&event.data)
            )
        })?;
        n_chunks += 1;
        if let Some(content) = chunk.choices.into_iter().find(|c| c.index == 0).and_then(|c| c.delta.content) {
            answer.push_str(&content);
        }
    }
    Err("not a chat completion: the event stream ended without data: [DONE]".into())
}

/// The wait a `Retry-After` header asks for (delta-seconds or an HTTP date), if any.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

impl MinerClient {
    pub fn new(config: ClientConfig) -> Result<MinerClient, ClientError> {
        MinerClient::with_stats(config, Arc::default())
    }

    /// A client that records every attempt into `stats`.
    pub fn with_stats(config: ClientConfig, stats: Arc<RequestStats>) -> Result<MinerClient, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .pool_max_idle_per_host(config.max_concurrent_per_miner)
            .build()
            .map_err(|e| ClientError::Build(e.to_string()))?;
        Ok(MinerClient {
            http,
            total: Arc::new(Semaphore::new(config.max_concurrent_total.max(1))),
            per_miner: Arc::default(),
            config,
            stats,
            metrics: Arc::default(),
        })
    }

    /// Also counts every request in `metrics` (by miner and outcome, with latencies).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> MinerClient {
        self.metrics = metrics;
        self
    }

    pub fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    fn miner_semaphore(&self, base_url: &str) -> Arc<Semaphore> {
        let mut map = self.per_miner.lock().expect("the semaphore map is never poisoned");
        map.entry(base_url.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.max_concurrent_per_miner.max(1))))
            .clone()
    }

    /// Asks `endpoint` for the next assistant message of `messages`.
    pub async fn complete(&self, endpoint: &Endpoint, messages: &[Message]) -> Completion {
        self.complete_for(&endpoint.base_url, endpoint, messages).await
    }

    /// As `complete`, counted in the metrics under `miner` (its hotkey).
    pub async fn complete_for(&self, miner: &str, endpoint: &Endpoint, messages: &[Message]) -> Completion {
        let completion = self.ask(miner, endpoint, messages).await;
        self.metrics.miner_request(miner, completion.outcome());
        completion
    }

    /// Waits for room under both limits, then makes the exchange. A caller that gives up
    /// (its env decided: the task is aborted) cancels a request still waiting for room,
    /// which is never sent; one already sent runs on to its answer or timeout, unread,
    /// with its room held: many miners go on working on a request whose connection
    /// closed, and the limits count the requests a miner is working on, not the ones a
    /// caller still waits for.
    async fn ask(&self, miner_label: &str, endpoint: &Endpoint, messages: &[Message]) -> Completion {
        let miner = self.miner_semaphore(&endpoint.base_url);
        let miner_permit = miner.acquire_owned().await.expect("semaphores are never closed");
        let total_permit = self.total.clone().acquire_owned().await.expect("semaphores are never closed");
        let (client, label, endpoint, messages) =
            (self.clone(), miner_label.to_owned(), endpoint.clone(), messages.to_vec());
        let exchange = tokio::spawn(async move {
            let completion = client.exchange(&label, &endpoint, &messages).await;
            drop((miner_permit, total_permit));
            completion
        });
        exchange.await.unwrap_or_else(|failed| Completion {
            answer: Err(format!("the request's task failed: {failed}")),
            attempts: Vec::new(),
            latency_ms: 0,
        })
    }

    /// One request's attempts, with retries, under the permits its caller holds.
    async fn exchange(&self, miner_label: &str, endpoint: &Endpoint, messages: &[Message]) -> Completion {
        let started = Instant::now();
        let url = format!("{}{COMPLETIONS_PATH}", endpoint.base_url.trim_end_matches('/'));
        let body = ChatRequest {
            model: endpoint.model.clone(),
            messages: messages.to_vec(),
            temperature: None,
            max_tokens: None,
            stream: None,
        };
        let token = endpoint.api_key_env.as_ref().and_then(|name| std::env::var(name).ok());
        let mut attempts = Vec::new();
        let mut last_error = String::new();
        let mut asked_wait: Option<Duration> = None;
        for attempt in 0..self.config.max_attempts.max(1) {
            if attempt > 0 {
                // The server's Retry-After is honoured, up to backoff_max_ms.
                let wait = match asked_wait.take() {
                    Some(asked) => asked.min(Duration::from_millis(self.config.backoff_max_ms)),
                    None => self.backoff(attempt),
                };
                tokio::time::sleep(wait).await;
            }
            let attempt_started = Instant::now();
            let mut request = self.http.post(&url).json(&body);
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let mut server_us = None;
            let (status, outcome) = match request.send().await {
                Err(e) if e.is_connect() && !e.is_timeout() => {
                    (None, AttemptOutcome::Retry(transport_error_kind(&e, self.config.timeout_ms), None))
                }
                Err(e) => (None, AttemptOutcome::Done(Err(transport_error_kind(&e, self.config.timeout_ms)))),
                Ok(response) => {
                    let status = response.status();
                    server_us = response
                        .headers()
                        .get("server-timing")
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_server_timing);
                    let outcome = if status.as_u16() == 429 || status.is_server_error() {
                        AttemptOutcome::Retry(format!("HTTP {status}"), retry_after(response.headers()))
                    } else if !status.is_success() {
                        AttemptOutcome::Done(Err(format!("HTTP {status}")))
                    } else {
                        AttemptOutcome::Done(self.read_answer(response).await)
                    };
                    (Some(status.as_u16()), outcome)
                }
            };
            let elapsed = attempt_started.elapsed();
            let latency_ms = elapsed.as_millis() as u64;
            let failed = !matches!(outcome, AttemptOutcome::Done(Ok(_)));
            self.stats.record(elapsed.as_micros() as u64, server_us, failed);
            self.metrics.miner_attempt(miner_label, elapsed.as_secs_f64(), server_us.map(|us| us as f64 / 1e6));
            match outcome {
                AttemptOutcome::Done(answer) => {
                    attempts.push(Attempt { latency_ms, status, error: answer.as_ref().err().cloned() });
                    return Completion { answer, attempts, latency_ms: started.elapsed().as_millis() as u64 };
                }
                AttemptOutcome::Retry(error, wait) => {
                    attempts.push(Attempt { latency_ms, status, error: Some(error.clone()) });
                    last_error = error;
                    asked_wait = wait;
                }
            }
        }
        let answer = Err(format!("gave up after {} attempts: {last_error}", attempts.len()));
        Completion { answer, attempts, latency_ms: started.elapsed().as_millis() as u64 }
    }

    /// Exponential backoff with full jitter: uniform in [base * 2^(n-1) / 2, base * 2^(n-1)],
    /// capped. Jitter keeps retries of many validators from arriving together.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling =
            self.config.backoff_base_ms.saturating_mul(1u64 << (attempt - 1).min(20)).min(self.config.backoff_max_ms);
        let mut random = [0u8; 8];
        let _ = getrandom::getrandom(&mut random);
        let jitter = u64::from_le_bytes(random) % (ceiling / 2 + 1);
        Duration::from_millis(ceiling / 2 + jitter)
    }

    /// Reads the body up to the cap and takes the first choice's content.
    async fn read_answer(&self, mut response: reqwest::Response) -> Result<String, String> {
        let cap = self.config.max_response_bytes;
        // A miner that only streams answers with server-sent events even when not asked to.
        let is_event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        if response.content_length().is_some_and(|n| n as usize > cap) {
            return Err(format!("response larger than {cap} bytes"));
        }
        let mut body = Vec::new();
        let timeout_ms = self.config.timeout_ms;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the response: {}", transport_error_kind(&e, timeout_ms)))?
        {
            if body.len() + chunk.len() > cap {
                return Err(format!("response larger than {cap} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        if is_event_stream {
            return streamed_answer(body).await;
        }
        // serde's message names the position, never the content: a 50 MB bad body must not
        // come back as a 50 MB error.
        let parsed: ChatResponse = serde_json::from_slice(&body).map_err(|e| {
            format!(
                "not a chat completion ({:?} at line {} column {}): body starts {}",
                e.classify(),
                e.line(),
                e.column(),
                crate::bytes::quote_prefix(&String::from_utf8_lossy(&body[..body.len().min(200)]))
            )
        })?;
        let choice = parsed.choices.into_iter().next().ok_or("chat completion without choices")?;
        choice.message.content.ok_or_else(|| "chat completion without content".to_string())
    }
}

/// The largest `/v1/models` reply `list_models` reads.
pub const MAX_MODELS_BYTES: usize = 1024 * 1024;

/// `GET {base_url}/v1/models` as a validator would send it: the ids listed, or why not
/// (timeout, refused, status, a body over 1 MiB or not an OpenAI model list).
pub async fn list_models(endpoint: &Endpoint, timeout_ms: u64) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    #[derive(serde::Deserialize)]
    struct Models {
        data: Vec<Model>,
    }
    let client =
        reqwest::Client::builder().timeout(Duration::from_millis(timeout_ms)).build().map_err(|e| e.to_string())?;
    let mut request = client.get(format!("{}/v1/models", endpoint.base_url.trim_end_matches('/')));
    if let Some(token) = endpoint.api_key_env.as_ref().and_then(|name| std::env::var(name).ok()) {
        request = request.bearer_auth(token);
    }
    let mut response = request.send().await.map_err(|e| transport_error_kind(&e, timeout_ms))?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport_error_kind(&e, timeout_ms))? {
        if body.len() + chunk.len() > MAX_MODELS_BYTES {
            return Err(format!("reply larger than {MAX_MODELS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    let models: Models = serde_json::from_slice(&body).map_err(|e| format!("not an OpenAI model list ({e})"))?;
    Ok(models.data.into_iter().map(|m| m.id).collect())
}
