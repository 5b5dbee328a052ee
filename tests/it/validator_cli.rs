//! `af validate` as operators run it, against reference miner processes on loopback:
//! a full run, and a run stopped by SIGINT and by SIGKILL and resumed from the ledger.

use crate::{af, af_bin, stdout};
use af::ledger::{verify, Event, LedgerKey, Store};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct Miner(Child, pub String);

impl Drop for Miner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn miner(policy: &str) -> Miner {
    let mut child = Command::new(af_bin())
        .args(["miner", "serve", "--listen", "127.0.0.1:0", "--policy", policy, "--model", "m"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let url = line.split_whitespace().nth(2).expect("listening on URL").to_string();
    Miner(child, url)
}

/// Runs `af validate --json` to the end of its queue; its summary.
fn validate_json(data: &std::path::Path, config: &std::path::Path) -> serde_json::Value {
    let output = Command::new(af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every event of the validator's own log in `data`, in order.
fn own_events(data: &std::path::Path) -> Vec<Event> {
    let store = Store::open_read_only(data).unwrap();
    let key = LedgerKey::load(&data.join("validator.key")).unwrap();
    let tip = store.tip(&key.validator()).unwrap().unwrap();
    (0..=tip.height).flat_map(|h| store.block(&key.validator(), h).unwrap().unwrap().block.events).collect()
}

fn config(dir: &std::path::Path, extra: &str, miners: &[(&str, &Miner)]) -> std::path::PathBuf {
    let mut text = format!("{extra}\n[ledger]\nblock_max_events = 16\nblock_max_ms = 50\n");
    for (i, (hotkey, miner)) in miners.iter().enumerate() {
        text += &format!("\n[[miners]]\nhotkey = \"{hotkey}\"\nuid = {i}\nbase_url = \"{}\"\nmodel = \"m\"\n", miner.1);
    }
    let path = dir.join("validator.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The queue tests' miners (a noisy champion, then a perfect and a random contender)
/// and a config naming them with a small cap; the miners stop when dropped.
fn three_miners(dir: &std::path::Path) -> ([Miner; 3], std::path::PathBuf) {
    let miners = [miner("noisy:0.3"), miner("perfect"), miner("random")];
    let named = [("5Noisy", &miners[0]), ("5Perfect", &miners[1]), ("5Random", &miners[2])];
    let config = config(dir, "[evaluation]\nwindow = 8", &named);
    (miners, config)
}

#[test]
fn validate_runs_the_queue_and_ratio_show_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_miners, config) = three_miners(dir.path());
    let data = dir.path().join("data");
    let output = Command::new(af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["champion"], "5Perfect");
    assert_eq!(summary["matches"].as_array().unwrap().len(), 3);
    assert_eq!(summary["n_matches"], 3, "{summary}");
    // Structured log lines on stderr (it is not a terminal here), one per match.
    let logs: Vec<serde_json::Value> =
        String::from_utf8_lossy(&output.stderr).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(logs.iter().filter(|l| l["event"] == "match_decided").count(), 3);

    let ratio: serde_json::Value =
        serde_json::from_str(&stdout(&af(&["ratio", "show", "--data", data.to_str().unwrap(), "--json"]))).unwrap();
    assert!(ratio["set_ppm"].as_u64().unwrap() > ratio["floor_ppm"].as_u64().unwrap(), "{ratio}\n{summary}");
    assert_eq!(ratio["champion"], "5Perfect");
    assert!(ratio["set_by_match"].is_string());
    assert!(af(&["ledger", "verify", "--data", data.to_str().unwrap()]).status.success());
    // Nothing left to play: a second run does nothing and succeeds.
    let again = Command::new(af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&again.stdout).unwrap()["matches"].as_array().unwrap().len(),
        0
    );
}

#[test]
fn missing_miners_and_bad_config_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let output = af(&["validate", "--data", data.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no miners to play"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[evaluation]\nrule = \"vibes\"\n").unwrap();
    let output = af(&["validate", "--data", data.to_str().unwrap(), "--config", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("evaluation.rule"));
}

/// (match, env, miner) -> challenge indices, in log order.
type Schedule = BTreeMap<(String, String, String), Vec<u64>>;

/// Every transcript of our log by (match, env, miner), and the match starts and decisions.
fn schedule(data: &std::path::Path) -> (Schedule, usize, usize) {
    let store = Store::open(data).unwrap();
    assert!(verify::verify_store(&store, &|_, _| {}).unwrap().ok);
    let validator = LedgerKey::load(&data.join("validator.key")).unwrap().validator();
    let mut indices: BTreeMap<(String, String, String), Vec<u64>> = BTreeMap::new();
    let (mut started, mut decided) = (0, 0);
    let tip = store.tip(&validator).unwrap().unwrap();
    for height in 0..=tip.height {
        for event in store.block(&validator, height).unwrap().unwrap().block.events {
            match event {
                Event::Transcript(t) => indices
                    .entry((t.match_id.to_hex(), t.env.name.clone(), t.miner.hotkey.clone()))
                    .or_default()
                    .push(t.challenge_index),
                Event::MatchStarted(_) => started += 1,
                Event::MatchDecided(_) => decided += 1,
                _ => {}
            }
        }
    }
    (indices, started, decided)
}

#[test]
fn an_interrupted_validator_resumes_from_its_ledger() {
    // Two identical slow miners: every game is a draw, so each env runs until the
    // network plan's futility stop dismisses the copy, long enough to be interrupted twice.
    let (a, b) = (miner("slow:60"), miner("slow:60"));
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "[evaluation]\nenvs = [\"mult\", \"coin\"]\nwindow = 2", &[("5A", &a), ("5B", &b)]);
    let data = dir.path().join("data");
    let args = ["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap()];

    // 1. SIGINT: the events handed over so far are sealed; exit 130.
    let child = Command::new(af_bin()).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(130), "Ctrl-C exits 130 after sealing");
    let (after_int, started, decided) = schedule(&data);
    assert_eq!((started, decided), (1, 0), "the match is open");
    assert!(!after_int.is_empty(), "some challenges were recorded before the stop");

    // 2. SIGKILL: whatever was not sealed is lost, never half-written.
    let mut child = Command::new(af_bin()).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    child.kill().unwrap();
    child.wait().unwrap();

    // 3. A config naming another plan than the network's is refused, naming the field,
    // before anything is written.
    self::config(
        dir.path(),
        "[evaluation]\nrule = \"mixture\"\nenvs = [\"mult\", \"coin\"]\nwindow = 2",
        &[("5A", &a), ("5B", &b)],
    );
    let before = own_events(&data).len();
    let output = Command::new(af_bin()).args(args).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("evaluation.rule") && stderr.contains("network's plan"), "{stderr}");
    assert_eq!(own_events(&data).len(), before, "nothing written");

    // 4. Run to the end under the network's plan: the open match ends under the plan its
    // log recorded.
    self::config(dir.path(), "[evaluation]\nenvs = [\"mult\", \"coin\"]\nwindow = 2", &[("5A", &a), ("5B", &b)]);
    let output = Command::new(af_bin()).args(args).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plans: Vec<String> = own_events(&data)
        .into_iter()
        .filter_map(|e| match e {
            Event::MatchStarted(m) => Some(m.rule),
            Event::EnvDecision(d) => Some(d.rule),
            _ => None,
        })
        .collect();
    assert!(plans.iter().all(|p| p.starts_with(af::evaluation::network_plan::NETWORK_PLAN_TEXT)), "{plans:?}");
    let (indices, started, decided) = schedule(&data);
    assert_eq!((started, decided), (1, 1), "one match, started once, decided once");
    for ((_, env, miner), list) in &indices {
        let expected: Vec<u64> = (0..list.len() as u64).collect();
        assert_eq!(list, &expected, "{env}/{miner}: indices 0..n, in order, none skipped or repeated");
        assert!(list.len() <= 121, "{env}/{miner}: the copy is dismissed by the futility stop");
    }
    // The contender needs both envs; the first the futility stop ends (a copy's 121
    // draws, ledger-spec/02: the dominance crown is out of reach there) decides the
    // match, and the other stops there.
    assert!(indices.values().any(|list| list.len() == 121), "{indices:?}");
    // Resumption continued where the log stopped, not from zero.
    for (key, list) in &after_int {
        assert_eq!(&indices[key][..list.len()], &list[..]);
    }
}

#[test]
fn env_play_scores_a_miner_as_a_validator_would() {
    let (perfect, garbage) = (miner("perfect"), miner("garbage"));
    for env in ["tictactoe", "mult", "sat", "coin", "abd", "ded"] {
        let output =
            af(&["env", "play", "--env", env, "--miner", &perfect.1, "--model", "m", "--count", "3", "--json"]);
        assert!(output.status.success(), "{env}: {}", String::from_utf8_lossy(&output.stderr));
        let lines: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&stdout(&output))
            .into_iter()
            .map(|v| v.expect("one JSON object per task"))
            .collect();
        assert_eq!(lines.len(), 3);
        for (seed, line) in lines.iter().enumerate() {
            assert_eq!(line["seed"], seed as u64);
            assert!(line["error"].is_null());
            // The expert's reward: perfect never loses, and on single-turn envs always wins.
            let reward = line["reward_milli"].as_i64().unwrap();
            assert!(if env == "tictactoe" { reward >= 0 } else { reward == 1000 }, "{env}: {line}");
        }
    }
    let output = af(&["env", "play", "--env", "mult", "--miner", &garbage.1, "--model", "m"]);
    assert_eq!(output.status.code(), Some(3), "a failing miner is a failed check");
    assert!(stdout(&output).contains("error: not a chat completion"), "{}", stdout(&output));
}

#[test]
fn print_config_shows_defaults_file_and_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.toml");
    std::fs::write(&path, "[evaluation]\nwindow = 3\n").unwrap();
    let output = Command::new(af_bin())
        .args(["validate", "--print-config", "--config", path.to_str().unwrap()])
        .env("AF_CLIENT__TIMEOUT_MS", "1234")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: toml::Table = stdout(&output).parse().expect("TOML");
    assert_eq!(printed["evaluation"]["window"].as_integer(), Some(3));
    assert_eq!(printed["client"]["timeout_ms"].as_integer(), Some(1234));
    assert_eq!(printed["evaluation"]["rule"].as_str(), Some("score"));
    // The printed config is itself a valid config.
    let again = dir.path().join("again.toml");
    std::fs::write(&again, stdout(&output)).unwrap();
    let output = af(&["validate", "--print-config", "--config", again.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(af(&["validate"]).status.code() == Some(2), "--data is required without --print-config");

    // Networking, HTTP, chain and wallet flags are config fields too: a flag replaces the
    // file's value, and what is printed runs the same validator without the flags.
    std::fs::write(&path, "[p2p]\npeers = [\"/ip4/10.0.0.1/tcp/1\"]\n[chain]\nnetuid = 5\n").unwrap();
    let key = "ab".repeat(32);
    let flags = [
        "validate",
        "--print-config",
        "--config",
        path.to_str().unwrap(),
        "--listen",
        "/ip4/127.0.0.1/tcp/4001",
        "--peer",
        "/ip4/127.0.0.1/tcp/4002",
        "--allow",
        &key,
        "--http",
        "127.0.0.1:7999",
        "--chain",
        "subtensor:ws://127.0.0.1:9945",
        "--wallet",
        "w",
        "--hotkey",
        "h",
    ];
    // Listening on 127.0.0.1 with a chain: subtensor would refuse that axon address, so
    // the validator refuses to start and names the way out.
    let output = af(&flags);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("InvalidIpAddress") && error.contains("--external-addr"), "{error}");
    // Listening on every address (0.0.0.0) is fine: it is simply not published
    // (ledger-spec/13).
    let everywhere: Vec<&str> =
        flags.iter().map(|f| if *f == "/ip4/127.0.0.1/tcp/4001" { "/ip4/0.0.0.0/tcp/4001" } else { f }).collect();
    let output = af(&everywhere);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let flags: Vec<&str> = flags.iter().copied().chain(["--external-addr", "203.0.113.7:4001"]).collect();
    let output = af(&flags);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: toml::Table = stdout(&output).parse().expect("TOML");
    assert_eq!(printed["p2p"]["listen"][0].as_str(), Some("/ip4/127.0.0.1/tcp/4001"));
    assert_eq!(printed["p2p"]["peers"].as_array().unwrap().len(), 1, "the flag replaced the file's list");
    assert_eq!(printed["p2p"]["peers"][0].as_str(), Some("/ip4/127.0.0.1/tcp/4002"));
    assert_eq!(printed["p2p"]["allow"][0].as_str(), Some(key.as_str()));
    assert_eq!(printed["http"]["listen"].as_str(), Some("127.0.0.1:7999"));
    assert_eq!(printed["chain"]["endpoint"].as_str(), Some("subtensor:ws://127.0.0.1:9945"));
    assert_eq!(printed["p2p"]["external"].as_str(), Some("203.0.113.7:4001"));
    assert_eq!(printed["chain"]["netuid"].as_integer(), Some(5), "the file's value where no flag is given");
    assert_eq!(printed["chain"]["wallet"].as_str(), Some("w"));
    assert!(stdout(&output).contains("# wallets_dir: unset"), "{}", stdout(&output));
    std::fs::write(&again, stdout(&output)).unwrap();
    let reprinted = af(&["validate", "--print-config", "--config", again.to_str().unwrap()]);
    assert_eq!(stdout(&reprinted), stdout(&output));
    // A bad value in the file is refused by its name.
    std::fs::write(&path, "[p2p]\nallow = [\"xyz\"]\n").unwrap();
    let refused = af(&["validate", "--print-config", "--config", path.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("p2p.allow[0]"), "{refused:?}");
}

/// Reasoning models' long answers: two correct miners with 60 kB of reasoning per answer,
/// then one answering with 800 kB. With the default block size (256 events) the run must
/// finish, record every transcript (the 60 kB answers in full, the 800 kB ones cut to the
/// recording cap with their full length and hash), verify, and audit clean.
#[test]
fn verbose_miners_are_recorded_and_the_log_audits_clean() {
    let (a, b, c) = (miner("verbose:60000"), miner("verbose:60000"), miner("verbose:800000"));
    let dir = tempfile::tempdir().unwrap();
    // One env: each match runs until the futility stop dismisses the copy (121 draws).
    let mut text = "[evaluation]\nenvs = [\"mult\"]\nwindow = 4\n".to_string();
    for (i, (hotkey, m)) in [("5VerboseA", &a), ("5VerboseB", &b), ("5Huge", &c)].iter().enumerate() {
        text += &format!("\n[[miners]]\nhotkey = \"{hotkey}\"\nuid = {i}\nbase_url = \"{}\"\nmodel = \"m\"\n", m.1);
    }
    let config = dir.path().join("validator.toml");
    std::fs::write(&config, text).unwrap();
    let data = dir.path().join("data");
    let summary = validate_json(&data, &config);
    assert_eq!(summary["matches"].as_array().unwrap().len(), 2, "{summary}");

    {
        let store = Store::open_read_only(&data).unwrap();
        let report = verify::verify_store(&store, &|_, _| {}).unwrap();
        assert!(report.ok, "{report:?}");
    }
    let (mut full, mut cut) = (0, 0);
    for event in own_events(&data) {
        match event {
            Event::Transcript(t) if t.miner.hotkey.starts_with("5Verbose") && t.error.is_none() => {
                assert!(t.answer.len() > 60_000, "a 60 kB answer is recorded in full");
                full += 1;
            }
            Event::TranscriptCut(x) => {
                assert_eq!(x.transcript.miner.hotkey, "5Huge");
                assert_eq!(x.transcript.answer.len(), af::limits::MAX_RECORDED_TEXT_BYTES);
                assert!(x.cuts.iter().all(|c| c.full_bytes > 800_000), "{:?}", x.cuts);
                cut += 1;
            }
            _ => {}
        }
    }
    assert!(full >= 48 && cut > 0, "{full} full and {cut} cut transcripts");
    let audit = af(&["audit", "--data", data.to_str().unwrap(), "--json"]);
    assert_eq!(audit.status.code(), Some(0), "{}", stdout(&audit));
}

/// With the default futility stop, a contender that answers exactly like the champion is
/// dismissed within 200 challenges per env (not the 4,000-challenge cap), each decision
/// records the plan, and the audit re-derives every decision from it.
#[test]
fn a_copy_of_the_champion_is_dismissed_early_and_the_audit_rederives_it() {
    let (a, b) = (miner("perfect"), miner("perfect"));
    let dir = tempfile::tempdir().unwrap();
    let config =
        config(dir.path(), "[evaluation]\nenvs = [\"mult\", \"sat\", \"coin\"]", &[("5Champ", &a), ("5Copy", &b)]);
    let data = dir.path().join("data");
    let summary = validate_json(&data, &config);
    assert_eq!(summary["champion"], "5Champ");
    let mut decisions = 0;
    for event in own_events(&data) {
        if let Event::EnvDecision(d) = event {
            assert!(d.n_challenges <= 200, "{d:?}");
            assert!(d.rule.contains("futility margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0"), "{}", d.rule);
            decisions += 1;
        }
    }
    assert!(decisions >= 2);
    let audit = af(&["audit", "--data", data.to_str().unwrap(), "--json"]);
    assert_eq!(audit.status.code(), Some(0), "{}", stdout(&audit));
}

/// `--max-matches` counts the decided matches in the log: a restart goes on toward the
/// same total, and a log already there ends at once.
#[test]
fn max_matches_counts_the_matches_in_the_log_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (_miners, config) = three_miners(dir.path());
    let data = dir.path().join("data");
    let run = |max: &str| {
        let output = Command::new(af_bin())
            .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap()])
            .args(["--max-matches", max, "--json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        summary["matches"].as_array().unwrap().len()
    };
    assert_eq!(run("1"), 1);
    assert_eq!(run("1"), 0, "the log already holds one decided match");
    assert_eq!(run("2"), 1, "one more, for two in the log");
    let decided = own_events(&data).iter().filter(|e| matches!(e, Event::MatchDecided(_))).count();
    assert_eq!(decided, 2);
}

/// `af ratio show` takes the decay from the plan the log records, never from this
/// machine's configuration: the demo's score plans name their own epsilon and half-life,
/// so an environment setting another epsilon changes nothing it prints; `--help` names
/// only settings that exist.
#[test]
fn ratio_show_reads_the_plan_from_the_log_not_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    assert!(af(&["demo", "--data", data.to_str().unwrap()]).status.success());
    let show = |env: &[(&str, &str)]| {
        let output = Command::new(af_bin())
            .args(["ratio", "show", "--data", data.to_str().unwrap(), "--json"])
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let plain = show(&[]);
    let lenient =
        show(&[("AF_EVALUATION__RATIO_EPSILON_PPM", "200000"), ("AF_EVALUATION__RATIO_HALF_LIFE_BLOCKS", "1")]);
    assert_eq!(plain["plan_from"], "log", "{plain}");
    for field in ["current_ppm", "set_ppm", "floor_ppm", "half_life_blocks"] {
        assert_eq!(plain[field], lenient[field], "{field}: {plain} vs {lenient}");
    }
    let help = stdout(&af(&["ratio", "show", "--help"]));
    assert!(!help.contains("[ratio]") && !help.contains("--config"), "it reads no config: {help}");
}

/// `[archive]`: a validator publishes its log to its archive (a folder here; an object
/// store through the same code) every `every_s` seconds while it serves, and the
/// archive mirrors back to the store's tip. A URL of another scheme is refused by name.
#[test]
fn a_serving_validator_keeps_its_archive_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let miners = [miner("noisy:0.3"), miner("perfect")];
    let archive = dir.path().join("archive");
    let bad = config(dir.path(), "[archive]\nurl = \"ftp://example.org/logs\"", &[("5Noisy", &miners[0])]);
    let data = dir.path().join("data");
    let refused = af(&["validate", "--data", data.to_str().unwrap(), "--config", bad.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("archive.url"), "{refused:?}");
    let extra = format!("[archive]\nurl = {:?}\nevery_s = 1\n[evaluation]\nwindow = 8", archive.to_str().unwrap());
    let config = config(dir.path(), &extra, &[("5Noisy", &miners[0]), ("5Perfect", &miners[1])]);
    let mut child = Command::new(af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--json"])
        .args(["--serve", "--listen", "/ip4/127.0.0.1/tcp/0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The summary is printed when the queue is played; the log then stands still.
    let (mut text, mut reader) = (String::new(), BufReader::new(child.stdout.take().unwrap()));
    let summary: serde_json::Value = loop {
        assert!(reader.read_line(&mut text).unwrap() > 0, "no summary: {text}");
        if let Ok(summary) = serde_json::from_str(&text) {
            break summary;
        }
    };
    let size = summary["tip"]["height"].as_u64().unwrap() + 1;
    let list = archive.join("af/v1/logs");
    let mut archived = 0;
    for _ in 0..300 {
        if let Ok(text) = std::fs::read_to_string(&list) {
            let logs: serde_json::Value = serde_json::from_str(&text).unwrap();
            archived = logs["logs"][0]["size"].as_u64().unwrap_or(0);
            if archived == size {
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert_eq!(archived, size, "the archive holds the whole log");
    let copy = dir.path().join("copy");
    let url = format!("file://{}", archive.display());
    let mirrored = af(&["mirror", "--from", &url, "--data", copy.to_str().unwrap(), "--json"]);
    assert!(mirrored.status.success(), "{}", String::from_utf8_lossy(&mirrored.stderr));
    let tips = |data: &std::path::Path| Store::open_read_only(data).unwrap().tips().unwrap();
    assert_eq!(tips(&copy), tips(&data));
}
