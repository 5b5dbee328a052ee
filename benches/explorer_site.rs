//! Writes the explorer's scale site: one miner with 1,024 matches over 64 logs,
//! published as `af ledger publish` does (run through scripts/bench-explorer.sh, which
//! then times the explorer on it in Chromium). Not a timed test: the figures go in the
//! closing notes.
//!
//! 64 validators (the most validator permits a subnet has) each play 16 matches, a new
//! random contender against the perfect champion each time (dismissed after a few
//! challenges: the common case), so the champion, `5SynthPerfect`, played 1,024 matches
//! and its transcripts fill thousands of the site's pages. The site goes to
//! `<bench dir>/explorer-site/site`; one JSON line on stdout says what it holds.

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::Store;
use af::miner::policy::Policy;
use af::replay;
use af::synthetic_logs;
use std::time::Instant;

#[allow(dead_code)]
mod common;

const HOTKEY: &str = "5SynthPerfect";

fn main() {
    // `cargo bench` passes --bench: the full site; the test suite runs a small one (4
    // logs of 2 matches) through the same code.
    let full = std::env::args().any(|a| a == "--bench");
    let (n_validators, matches_per_log) = if full { (64, 16) } else { (4, 2) };
    let mut spec = synthetic_logs::NetworkSpec::small(n_validators);
    let champion = 1; // 5SynthPerfect
    let first = spec.miners.len();
    spec.matches.clear();
    for i in 0..matches_per_log {
        spec.miners.push(synthetic_logs::SynthMiner {
            hotkey: format!("5SynthContender{i:06}"),
            uid: (first + i) as u16,
            policy: Policy::Random,
        });
        spec.matches.push((first + i, champion));
    }
    let root = common::bench_data_dir().join(if full { "explorer-site" } else { "explorer-site-test" });
    let (data, site) = (root.join("data"), root.join("site"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&data).unwrap();
    let started = Instant::now();
    let store = Store::create(&data).unwrap();
    synthetic_logs::write_network(&store, &spec).unwrap();
    drop(store);
    let written_s = started.elapsed().as_secs_f64();
    let store = Store::open_read_only(&data).unwrap();
    let started = Instant::now();
    // Validator 0's data directory: its checkpoint is published beside its tip.
    let target = af::http::archive::Site::open(site.to_str().unwrap()).unwrap();
    let report =
        af::http::publish::publish(&store, Some(&synthetic_logs::validator_key(0)), &target, &mut |_| {}).unwrap();
    let replayed = replay::replay(&store, &envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap();
    af::http::publish::publish_miner_entries(&replayed, &store, &target, false).unwrap();
    let published_s = started.elapsed().as_secs_f64();
    let (total, _) = store.locate_miner_page(HOTKEY, 0, 0).unwrap();
    let matches: usize = replayed.folds.iter().map(|f| f.matches.len()).sum();
    let site_bytes = dir_bytes(&site);
    assert_eq!(report.chains, n_validators as u64);
    assert_eq!(matches, n_validators * matches_per_log);
    assert!(total > 0 && site.join("explorer.html").exists());
    if !full {
        let _ = std::fs::remove_dir_all(&root);
    }
    println!(
        "{}",
        serde_json::json!({
            "site": site,
            "hotkey": HOTKEY,
            "logs": report.chains,
            "blocks": report.blocks,
            "matches": matches,
            "transcripts": total,
            "site_bytes": site_bytes,
            "written_s": written_s,
            "published_s": published_s,
        })
    );
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                dir_bytes(&entry.path())
            } else {
                entry.metadata().unwrap().len()
            }
        })
        .sum()
}
