//! Tests of the metrics: names, labels, both exposition formats, bounded label sets.

use super::*;

#[test]
fn requests_are_classified_by_status_then_error() {
    assert_eq!(classify_request(Some(200), None), "ok");
    assert_eq!(classify_request(Some(503), Some("HTTP 503")), "http_5xx");
    assert_eq!(classify_request(Some(429), Some("HTTP 429")), "http_429");
    assert_eq!(classify_request(Some(404), Some("HTTP 404")), "http_4xx");
    assert_eq!(classify_request(None, Some("timeout: no complete response within 5 ms")), "timeout");
    assert_eq!(classify_request(Some(200), Some("reading the response: timeout: no complete")), "timeout");
    assert_eq!(classify_request(None, Some("connection refused")), "connect");
    assert_eq!(classify_request(None, Some("gave up after 3 attempts: connection refused")), "connect");
    assert_eq!(classify_request(Some(200), Some("response larger than 10 bytes")), "too_large");
    assert_eq!(classify_request(Some(200), Some("not a chat completion (Syntax at line 1)")), "unparsable");
    assert_eq!(classify_request(Some(200), Some("chat completion without choices")), "unparsable");
    assert_eq!(classify_request(None, Some("connection reset by the miner")), "transport");
    assert_eq!(classify_request(None, Some("gave up after 3 attempts: HTTP 503 Service Unavailable")), "http_5xx");
    assert_eq!(classify_request(None, Some("HTTP 404 Not Found")), "http_4xx");
    assert_eq!(classify_request(None, Some("HTTP 429 Too Many Requests")), "http_429");
}

#[test]
fn the_exposition_names_every_family_with_its_labels() {
    let metrics = Metrics::new();
    metrics.miner_request("5Fminer", outcome::TIMEOUT);
    metrics.game("SAT", "win");
    metrics.match_decided("contender_wins");
    metrics.block_appended(1000, 0.002);
    metrics.chain_send("weights", "refused", "commit_reveal");
    metrics.chain_rpc_error("set_weights");
    metrics.chain_lag_blocks.get_or_create(&PeerChain { validator: "ab".into() }).set(3);
    let text = metrics.encode();
    for line in [
        "af_miner_requests_total{miner=\"5Fminer\",outcome=\"timeout\"} 1",
        "af_games_total{env=\"SAT\",outcome=\"win\"} 1",
        "af_matches_decided_total{verdict=\"contender_wins\"} 1",
        "af_blocks_appended_total 1",
        "af_block_bytes_appended_total 1000",
        "af_chain_sends_total{kind=\"weights\",result=\"refused\",reason=\"commit_reveal\"} 1",
        "af_chain_rpc_errors_total{call=\"set_weights\"} 1",
        "af_chain_lag_blocks{validator=\"ab\"} 3",
        "af_append_seconds_count 1",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn the_classic_format_names_counters_by_their_samples_and_has_no_eof() {
    let metrics = Metrics::new();
    metrics.game("SAT", "win");
    metrics.miner_attempt("5Fminer", 0.25, Some(0.2));
    let text = metrics.encode_classic();
    assert!(text.contains("# TYPE af_games_total counter\n"), "{text}");
    assert!(text.contains("# HELP af_games_total Paired games"), "{text}");
    assert!(text.contains("af_games_total{env=\"SAT\",outcome=\"win\"} 1\n"), "{text}");
    assert!(text.contains("# TYPE af_miner_latency_seconds histogram\n"), "{text}");
    assert!(text.contains("af_miner_overhead_seconds_count{miner=\"5Fminer\"} 1"), "{text}");
    assert!(!text.contains("# EOF") && !text.contains("# TYPE af_games counter"), "{text}");
    // Every line but the families' own is unchanged.
    let open = metrics.encode();
    let samples = |t: &str| t.lines().filter(|l| !l.starts_with('#')).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(samples(&text), samples(&open));
}

#[test]
fn miner_label_sets_are_bounded_dropping_the_least_recently_labelled() {
    let metrics = Metrics::new();
    for i in 0..MAX_MINER_LABELS {
        metrics.miner_request(&format!("m{i}"), outcome::OK);
        metrics.miner_attempt(&format!("m{i}"), 0.1, None);
    }
    metrics.miner_request("m0", outcome::TIMEOUT); // m0 is now the most recent
    metrics.miner_attempt("new", 0.1, None);
    let text = metrics.encode();
    assert!(text.contains("miner=\"m0\",outcome=\"timeout\""), "m0 was labelled last but one");
    assert!(!text.contains("miner=\"m1\""), "m1 was the least recently labelled");
    assert!(text.contains("af_miner_latency_seconds_count{miner=\"new\"} 1"));
    assert_eq!(metrics.miner_labels.lock().unwrap().len(), MAX_MINER_LABELS);
}

/// The dashboard and alert rules in `deploy/` name only series this node exports.
#[test]
fn the_shipped_dashboard_and_alerts_name_only_exported_series() {
    // As the binary built with its default allocator exports them, heap gauges included.
    let text =
        Metrics::with_log_counter(Counter::default()).with_heap_probe(|| Some(HeapSample::default())).encode_classic();
    let mut families: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
    families.sort();
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut named = 0;
    for file in ["grafana-dashboard.json", "prometheus-alerts.yml", "prometheus-alerts.test.yml"] {
        let body = std::fs::read_to_string(deploy.join(file)).unwrap();
        for (at, _) in body.match_indices("af_") {
            if at > 0 && (body.as_bytes()[at - 1].is_ascii_alphanumeric() || body.as_bytes()[at - 1] == b'_') {
                continue;
            }
            let name: String = body[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let series = ["_bucket", "_count", "_sum"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(&name);
            assert!(families.binary_search(&series).is_ok(), "{file} names {name}, not among {families:?}");
            named += 1;
        }
    }
    assert!(named >= 20, "the files name {named} series");
}
