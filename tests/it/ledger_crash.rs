//! Crash test: a child process appends blocks and is killed with SIGKILL at random
//! moments, 50 times; after each kill a read-only `af ledger verify` must verify the store
//! as redb's recovery will leave it, say it needs recovery and write nothing, and a
//! writer's reopen must hold every block whose append had been acknowledged (a valid
//! prefix of what was written, nothing lost). Every other round writes several blocks per
//! transaction (group commit, as the validator's writer does under load).

use crate::{af, af_bin, test_seed, TestRng};
use af::ledger::{verify, LedgerKey, Store};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigkill_never_loses_an_acknowledged_block() {
    let seed = test_seed("sigkill_never_loses_an_acknowledged_block");
    let mut rng = TestRng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert!(af(&["ledger", "init", "--data", data]).status.success());
    let validator = LedgerKey::load(&dir.path().join("validator.key")).unwrap().validator();
    let mut acknowledged: Option<u64> = None;
    let mut kills_mid_run = 0;
    let mut needed_recovery = 0;
    for round in 0..50 {
        let per_commit = if round % 2 == 1 { 1 + rng.below(16) } else { 1 };
        let mut child = Command::new(af_bin())
            .args([
                "ledger",
                "demo",
                "--data",
                data,
                "--blocks",
                "100000",
                "--events-per-block",
                "16",
                "--event-bytes",
                "512",
                "--blocks-per-commit",
                &per_commit.to_string(),
                "--ack",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(height) = line.strip_prefix("appended ") {
                    last = Some(height.parse::<u64>().unwrap());
                }
            }
            last
        });
        let wait = Duration::from_millis(5 + rng.below(120));
        let started = Instant::now();
        while started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(1));
        }
        if child.try_wait().unwrap().is_none() {
            kills_mid_run += 1;
        }
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        if let Some(height) = reader.join().unwrap() {
            acknowledged = Some(acknowledged.map_or(height, |h: u64| h.max(height)));
        }

        // A reader first, before any writer recovers the store: a crash is not damage.
        // It verifies what redb's recovery will leave, says the store needs recovery,
        // and writes nothing.
        let file = dir.path().join(af::ledger::store::STORE_FILE);
        let before = std::fs::read(&file).unwrap();
        let output = af(&["ledger", "verify", "--data", data, "--json"]);
        assert!(
            output.status.success(),
            "seed {seed} round {round}: a killed writer's store read as damaged: {} {}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        let read: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        if read["recovery_needed"].is_string() {
            needed_recovery += 1;
        }
        if let Some(acked) = acknowledged {
            let tip = read["chains"][0]["verified_tip"]["height"].as_u64();
            assert!(tip.is_some_and(|t| t >= acked), "seed {seed} round {round}: acknowledged {acked}, read {tip:?}");
        }
        assert!(std::fs::read(&file).unwrap() == before, "seed {seed} round {round}: the reader wrote to the store");

        let store = Store::open(dir.path()).unwrap_or_else(|e| panic!("seed {seed} round {round}: reopen failed: {e}"));
        let report = verify::verify_store(&store, &|_, _| {}).unwrap();
        assert!(report.ok, "seed {seed} round {round}: {report:?}");
        let tip = store.tip(&validator).unwrap();
        if let Some(acked) = acknowledged {
            let tip =
                tip.unwrap_or_else(|| panic!("seed {seed} round {round}: acknowledged {acked} but the chain is empty"));
            assert!(
                tip.height >= acked,
                "seed {seed} round {round}: acknowledged {acked}, store ends at {}",
                tip.height
            );
        }
    }
    assert!(kills_mid_run >= 40, "most kills must land while appending ({kills_mid_run} of 50)");
    // A kill after the child opened the store leaves it marked open (one before it opened
    // leaves the previous round's clean close).
    eprintln!("{kills_mid_run} kills mid-run; the reader found {needed_recovery} stores needing recovery");
    assert!(needed_recovery > 0, "no kill left a store needing recovery ({kills_mid_run} kills mid-run)");
    assert!(acknowledged.is_some_and(|h| h > 50), "the child made progress: {acknowledged:?}");
}
