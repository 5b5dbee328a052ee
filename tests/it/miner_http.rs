//! The miner client against real HTTP servers on loopback: our reference miners, and
//! small hostile servers (oversized bodies, counting concurrency).

use af::bytes::Hash32;
use af::envs::{self, challenge_id_for_seed};
use af::miner::client::{ClientConfig, Endpoint, MinerClient};
use af::miner::policy::Policy;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

async fn spawn(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{address}")
}

async fn reference(policy: Policy) -> Endpoint {
    let base_url = spawn(af::miner::server::router(policy, "ref".into(), Hash32([0; 32]))).await;
    Endpoint { base_url, model: "ref".into(), api_key_env: None }
}

fn mult_prompt() -> (Hash32, Vec<envs::Message>) {
    let registry = envs::registry();
    let env = registry.get("mult").unwrap();
    let id = challenge_id_for_seed("mult", 1, 3);
    let (_, observation, _) = env.reset(&id);
    (id, envs::opening_messages(env.spec(), &observation))
}

fn fast_config() -> ClientConfig {
    ClientConfig { timeout_ms: 2_000, backoff_base_ms: 5, backoff_max_ms: 20, ..ClientConfig::default() }
}

#[tokio::test]
async fn perfect_miner_answers_correctly_over_http() {
    let client = MinerClient::new(fast_config()).unwrap();
    let endpoint = reference(Policy::Perfect).await;
    let (id, messages) = mult_prompt();
    let completion = client.complete(&endpoint, &messages).await;
    let answer = completion.answer.expect("an answer");
    let registry = envs::registry();
    assert_eq!(envs::score_answer(registry.get("mult").unwrap(), &id, &answer).1, 1000);
    assert_eq!(completion.attempts.len(), 1);
    assert_eq!(completion.attempts[0].status, Some(200));
    // The reference miner reports its handling time, so the client can separate its own
    // overhead from the miner's time.
    let stats = client.stats().snapshot();
    assert_eq!((stats.attempts, stats.failed, stats.timed_attempts), (1, 0, 1));
    assert!(stats.overhead_p50_us <= stats.latency_p50_us);
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let client = MinerClient::new(fast_config()).unwrap();
    let endpoint = reference(Policy::Flaky { p: 1.0 }).await;
    let completion = client.complete(&endpoint, &mult_prompt().1).await;
    assert!(completion.answer.unwrap_err().contains("gave up after 3 attempts"));
    assert_eq!(completion.attempts.len(), 3);
    assert!(completion.attempts.iter().all(|a| a.status == Some(500)));
    let stats = client.stats().snapshot();
    assert_eq!((stats.attempts, stats.failed, stats.timed_attempts), (3, 3, 0));
}

#[tokio::test]
async fn timeouts_are_reported_not_retried() {
    let client = MinerClient::new(ClientConfig { timeout_ms: 100, ..fast_config() }).unwrap();
    let endpoint = reference(Policy::Slow { delay_ms: 2_000 }).await;
    let completion = client.complete(&endpoint, &mult_prompt().1).await;
    assert!(completion.answer.unwrap_err().contains("timeout"));
    assert_eq!(completion.attempts.len(), 1);
}

#[tokio::test]
async fn refused_connections_are_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener); // nothing listens there now
    let client = MinerClient::new(fast_config()).unwrap();
    let endpoint = Endpoint { base_url: format!("http://{address}"), model: "x".into(), api_key_env: None };
    let completion = client.complete(&endpoint, &mult_prompt().1).await;
    assert_eq!(completion.attempts.len(), 3);
    assert!(completion
        .attempts
        .iter()
        .all(|a| a.status.is_none() && a.error.as_deref().unwrap().starts_with("connect")));
}

#[tokio::test]
async fn oversized_and_malformed_bodies_are_errors() {
    use axum::routing::post;
    let huge = axum::Router::new().route("/v1/chat/completions", post(|| async { "x".repeat(5 * 1024 * 1024) }));
    let big_garbage = axum::Router::new().route("/v1/chat/completions", post(|| async { "x".repeat(3 * 1024 * 1024) }));
    let malformed = axum::Router::new().route("/v1/chat/completions", post(|| async { "{\"choices\": 5}" }));
    let client = MinerClient::new(fast_config()).unwrap();
    for (router, expect) in
        [(huge, "larger than"), (big_garbage, "not a chat completion"), (malformed, "not a chat completion")]
    {
        let endpoint = Endpoint { base_url: spawn(router).await, model: "x".into(), api_key_env: None };
        let completion = client.complete(&endpoint, &mult_prompt().1).await;
        let error = completion.answer.unwrap_err();
        assert!(error.contains(expect), "{error}");
        assert!(error.len() < 400, "a bad body is quoted by a short prefix only: {} bytes", error.len());
        assert_eq!(completion.attempts.len(), 1, "a bad body is not retried");
    }
}

#[tokio::test]
async fn garbage_miner_is_a_protocol_error() {
    let client = MinerClient::new(fast_config()).unwrap();
    let endpoint = reference(Policy::Garbage).await;
    let completion = client.complete(&endpoint, &mult_prompt().1).await;
    assert!(completion.answer.unwrap_err().contains("not a chat completion"));
}

#[tokio::test]
async fn random_answers_arrive_and_score_zero() {
    let client = MinerClient::new(fast_config()).unwrap();
    let endpoint = reference(Policy::Random).await;
    let (id, messages) = mult_prompt();
    let answer = client.complete(&endpoint, &messages).await.answer.unwrap();
    let registry = envs::registry();
    assert_eq!(envs::score_answer(registry.get("mult").unwrap(), &id, &answer).1, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_per_miner_is_bounded() {
    use axum::routing::post;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (a, b) = (in_flight.clone(), peak.clone());
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let (in_flight, peak) = (a.clone(), b.clone());
            async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(30)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                axum::Json(serde_json::json!({ "id": "x", "choices": [{ "message": { "role": "assistant", "content": "1" } }] }))
            }
        }),
    );
    let endpoint = Endpoint { base_url: spawn(router).await, model: "x".into(), api_key_env: None };
    let client = Arc::new(MinerClient::new(ClientConfig { max_concurrent_per_miner: 3, ..fast_config() }).unwrap());
    let messages = mult_prompt().1;
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (client, endpoint, messages) = (client.clone(), endpoint.clone(), messages.clone());
            tokio::spawn(async move { client.complete(&endpoint, &messages).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().answer.unwrap(), "1");
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "peak in flight {peak}");
}

/// Requests abandoned by their caller (an env decided while they were in flight) still
/// hold the miner when the miner does not stop on a closed connection, as many servers do
/// not: the per-miner limit must count them until they end, or the miner sees more than
/// the limit. Requests still waiting for room are cancelled and never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_requests_count_against_the_limit_until_the_miner_is_done() {
    use axum::routing::post;
    let (in_flight, peak, received) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let counters = (in_flight.clone(), peak.clone(), received.clone());
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let (in_flight, peak, received) = counters.clone();
            async move {
                received.fetch_add(1, Ordering::SeqCst);
                // The work goes on whether or not the client is still there.
                let work = tokio::spawn(async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                });
                let _ = work.await;
                axum::Json(serde_json::json!({ "id": "x", "choices": [{ "message": { "role": "assistant", "content": "1" } }] }))
            }
        }),
    );
    let endpoint = Endpoint { base_url: spawn(router).await, model: "x".into(), api_key_env: None };
    let client = Arc::new(MinerClient::new(ClientConfig { max_concurrent_per_miner: 3, ..fast_config() }).unwrap());
    let messages = mult_prompt().1;
    let ask = |n: usize| -> Vec<tokio::task::JoinHandle<_>> {
        (0..n)
            .map(|_| {
                let (client, endpoint, messages) = (client.clone(), endpoint.clone(), messages.clone());
                tokio::spawn(async move { client.complete(&endpoint, &messages).await })
            })
            .collect()
    };
    let abandoned = ask(6);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    for task in abandoned {
        task.abort();
    }
    for task in ask(6) {
        assert_eq!(task.await.unwrap().answer.unwrap(), "1");
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "the miner saw {peak} requests at once, over the limit of 3");
    assert_eq!(received.load(Ordering::SeqCst), 9, "the 3 abandoned while waiting for room were never sent");
}

/// A raw TCP server that reads a request, then does `respond` with the socket.
async fn raw_server(respond: fn(std::net::TcpStream)) -> Endpoint {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut buf = [0u8; 65536];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            respond(stream);
        }
    });
    Endpoint { base_url: format!("http://{address}"), model: "m".into(), api_key_env: None }
}

/// Each transport failure is named for what it is, not "error decoding response body".
#[tokio::test]
async fn transport_failures_say_which_kind_they_are() {
    let config = ClientConfig { timeout_ms: 500, max_attempts: 1, ..fast_config() };
    let client = MinerClient::new(config).unwrap();
    let (_, messages) = mult_prompt();
    let short = raw_server(|mut s| {
        let _ = std::io::Write::write_all(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n{\"choices\":");
    })
    .await;
    let reset = raw_server(|s| {
        // SO_LINGER 0 makes close send RST instead of FIN.
        let socket = socket2::SockRef::from(&s);
        socket.set_linger(Some(std::time::Duration::ZERO)).unwrap();
        drop(s);
    })
    .await;
    let silent = raw_server(|s| {
        std::thread::sleep(std::time::Duration::from_secs(3));
        drop(s);
    })
    .await;
    for (endpoint, expected) in [(short, "short body"), (reset, "reset"), (silent, "timeout")] {
        let error = client.complete(&endpoint, &messages).await.answer.unwrap_err();
        assert!(error.contains(expected), "expected {expected:?}, got {error:?}");
        assert!(!error.contains("error decoding response body"), "{error}");
    }
}

/// A 429 with Retry-After is retried after the time asked (capped at backoff_max_ms),
/// not after the short jittered backoff.
#[tokio::test]
async fn retry_after_is_honoured_up_to_the_backoff_cap() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let counter = counter.clone();
            async move {
                if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                    (axum::http::StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], String::new())
                } else {
                    (
                        axum::http::StatusCode::OK,
                        [("retry-after", "0")],
                        r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"Answer: 1"},"finish_reason":"stop"}]}"#
                            .to_string(),
                    )
                }
            }
        }),
    );
    let endpoint = Endpoint { base_url: spawn(router).await, model: "m".into(), api_key_env: None };
    let (_, messages) = mult_prompt();
    // The server asks for 1 s; the cap allows 5 s: the retry comes after about 1 s.
    let client = MinerClient::new(ClientConfig { backoff_base_ms: 1, backoff_max_ms: 5_000, ..fast_config() }).unwrap();
    let started = std::time::Instant::now();
    let completion = client.complete(&endpoint, &messages).await;
    assert_eq!(completion.answer.as_deref(), Ok("Answer: 1"));
    assert!(started.elapsed() >= std::time::Duration::from_millis(950), "{:?}", started.elapsed());
    // With a 200 ms cap, the wait is cut to the cap.
    calls.store(0, Ordering::SeqCst);
    let client = MinerClient::new(ClientConfig { backoff_base_ms: 1, backoff_max_ms: 200, ..fast_config() }).unwrap();
    let started = std::time::Instant::now();
    client.complete(&endpoint, &messages).await.answer.unwrap();
    let took = started.elapsed();
    assert!(took >= std::time::Duration::from_millis(190) && took < std::time::Duration::from_millis(900), "{took:?}");
}

/// What an OpenAI client expects of `af miner serve`: JSON error objects, `usage`, one
/// model by id, the served model only, and streaming as server-sent events.
#[tokio::test]
async fn the_reference_miner_speaks_openai() {
    let endpoint = reference(Policy::Perfect).await;
    let http = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", endpoint.base_url);
    let (_, messages) = mult_prompt();
    let body =
        |model: &str, stream: bool| serde_json::json!({ "model": model, "messages": messages, "stream": stream });

    let ok: serde_json::Value =
        http.post(url("/v1/chat/completions")).json(&body("ref", false)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ok["object"], "chat.completion");
    assert!(ok["usage"]["total_tokens"].as_u64().unwrap() > 0, "{ok}");

    let unknown = http.post(url("/v1/chat/completions")).json(&body("gpt-x", false)).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    let error: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(error["error"]["code"], "model_not_found");

    let bad = http.post(url("/v1/chat/completions")).body("{not json").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.json::<serde_json::Value>().await.unwrap()["error"]["message"].is_string());

    let model: serde_json::Value = http.get(url("/v1/models/ref")).send().await.unwrap().json().await.unwrap();
    assert_eq!((model["id"].as_str(), model["object"].as_str()), (Some("ref"), Some("model")));
    assert_eq!(http.get(url("/v1/models/other")).send().await.unwrap().status(), 404);
    assert_eq!(http.get(url("/v1/nothing")).send().await.unwrap().status(), 404);

    let stream = http.post(url("/v1/chat/completions")).json(&body("ref", true)).send().await.unwrap();
    assert!(stream.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = stream.text().await.unwrap();
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{text}");
    let content: String = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
        .map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(content, ok["choices"][0]["message"]["content"].as_str().unwrap());

    let legacy: serde_json::Value = http
        .post(url("/v1/completions"))
        .json(&serde_json::json!({ "model": "ref", "prompt": "hello" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["object"], "text_completion");
    assert!(legacy["choices"][0]["text"].is_string());
}

/// A miner that only streams: whatever it is asked, it answers with the reference
/// miner's own server-sent events (`stream: true`). `cut` drops the closing `[DONE]`.
async fn stream_only(cut: bool) -> Endpoint {
    use axum::routing::post;
    let upstream = reference(Policy::Perfect).await;
    let url = format!("{}/v1/chat/completions", upstream.base_url);
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |axum::Json(mut body): axum::Json<serde_json::Value>| {
            let url = url.clone();
            async move {
                body["stream"] = serde_json::json!(true);
                let text = reqwest::Client::new().post(&url).json(&body).send().await.unwrap().text().await.unwrap();
                let text = if cut { text.replace("data: [DONE]", "") } else { text };
                ([("content-type", "text/event-stream")], text)
            }
        }),
    );
    Endpoint { base_url: spawn(router).await, model: "ref".into(), api_key_env: None }
}

#[tokio::test]
async fn a_miner_that_only_streams_is_understood() {
    let client = MinerClient::new(fast_config()).unwrap();
    let (id, messages) = mult_prompt();
    let answer = client.complete(&stream_only(false).await, &messages).await.answer.unwrap();
    let registry = envs::registry();
    assert_eq!(envs::score_answer(registry.get("mult").unwrap(), &id, &answer).1, 1000, "{answer}");
    // A stream that never says [DONE] may have been cut short: no answer.
    let cut = client.complete(&stream_only(true).await, &messages).await.answer.unwrap_err();
    assert!(cut.contains("without data: [DONE]"), "{cut}");
}
