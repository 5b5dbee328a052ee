//! Archives as sites: what `af ledger publish` leaves on a site that already holds more,
//! and how `af mirror` answers a site whose answers it refuses.

use crate::af_bin;
use af::http::{archive::Site, layout, publish};
use af::ledger::block::SealedBlock;
use af::ledger::Store;
use af::synthetic_logs::{write_network, NetworkSpec};
use std::process::Command;

const START_MS: u64 = 1_790_000_000_000;

/// Publishing an older copy of the same logs (a restored backup) never moves the site's
/// tips back: each chain the site holds further, the same history as far as the copy
/// goes, is left as it is and named.
#[test]
fn publishing_an_older_copy_leaves_the_sites_longer_chains_as_they_are() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 8, ..NetworkSpec::small(2) }).unwrap();
    let site = Site::open(dirs[1].path().join("site").to_str().unwrap()).unwrap();
    publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    let tip_bytes =
        |v: &af::bytes::ValidatorKey| std::fs::read(dirs[1].path().join("site").join(layout::tip_path(v))).unwrap();
    let tips = store.tips().unwrap();
    let before: Vec<Vec<u8>> = tips.iter().map(|(v, _)| tip_bytes(v)).collect();
    // The older copy: every chain cut 5 blocks short.
    let older = Store::create(dirs[2].path()).unwrap();
    for (validator, tip) in &tips {
        for height in 0..tip.height - 4 {
            let bytes = store.block_bytes(validator, height).unwrap().unwrap();
            older.append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
        }
    }
    let report = publish::publish(&older, None, &site, &mut |_| {}).unwrap();
    assert_eq!(report.chains_behind.len(), tips.len(), "{report:?}");
    for ((validator, tip), (behind, ours, theirs)) in tips.iter().zip(&report.chains_behind) {
        assert_eq!((behind, *ours, *theirs), (validator, tip.height - 4, tip.height + 1));
    }
    let after: Vec<Vec<u8>> = tips.iter().map(|(v, _)| tip_bytes(v)).collect();
    assert_eq!(after, before, "no tip moved back");
    assert!(report.summary(&site).contains("left as they are"));
    // The log list still names the site's sizes.
    let list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dirs[1].path().join("site").join(layout::log_list_path())).unwrap())
            .unwrap();
    let sizes: Vec<u64> = list["logs"].as_array().unwrap().iter().map(|l| l["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, tips.iter().map(|(_, t)| t.height + 1).collect::<Vec<_>>());
}

/// A log list the mirror refuses is a check that failed, exit 3, as a refused tip or
/// bundle is: not a server that could not be reached (exit 1).
#[test]
fn a_refused_log_list_exits_as_a_refused_tip_does() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    let list = site.join(layout::log_list_path());
    std::fs::create_dir_all(list.parent().unwrap()).unwrap();
    std::fs::write(&list, b"{\"not\": \"a log list\"}").unwrap();
    let out = Command::new(af_bin())
        .args(["mirror", "--from", &format!("file://{}", site.display()), "--data"])
        .arg(dir.path().join("copy"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("not a log list"), "{said}");
}

/// An object store whose answer stops half way: the mirror gives up on it by the stall
/// deadline (30 s, as for HTTP, ledger-spec/11), not by its whole time limit (here 300 s).
#[test]
fn a_stalled_object_costs_the_stall_deadline_not_the_mirrors_time() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    // The stand-in store: every request (the log list first) is answered with headers
    // promising 100,000 bytes, 1,000 of them, then nothing.
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nETag: \"e\"\r\n\
                            Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\nContent-Type: application/json\r\n\r\n";
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&[b' '; 1000]);
                let _ = stream.flush();
                std::thread::sleep(std::time::Duration::from_secs(120));
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = Command::new(af_bin())
        .args(["mirror", "--from", "s3://bucket/site", "--timeout", "300", "--data"])
        .arg(dir.path().join("copy"))
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT", &endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("stalled"), "{said}");
    assert!((29.0..45.0).contains(&took), "{took:.1} s: {said}");
}

/// A bundle damaged below the site's tip is skipped by a plain publish (the tip covers
/// it) and written again by a repairing one (`af ledger publish --repair`), from the
/// store's verified blocks.
#[test]
fn publish_repair_rewrites_a_damaged_bundle_below_the_tip() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(2) }).unwrap();
    let root = dirs[1].path().join("site");
    let site = Site::open(root.to_str().unwrap()).unwrap();
    publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    let (validator, _) = store.tips().unwrap()[0];
    let bundle = root.join(layout::bundle_path(&validator, 5, 16));
    let good = std::fs::read(&bundle).unwrap();
    let mut bad = good.clone();
    bad[40] ^= 1;
    std::fs::write(&bundle, &bad).unwrap();
    let plain = publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    assert_eq!(plain.bundles_written, 0, "{plain:?}");
    assert_eq!(std::fs::read(&bundle).unwrap(), bad, "a plain publish skips what its tip covers");
    let repaired = publish::publish_with(&store, None, &site, true, &mut |_| {}).unwrap();
    assert_eq!((repaired.bundles_written, repaired.bundles_repaired), (1, 1), "{repaired:?}");
    assert_eq!(std::fs::read(&bundle).unwrap(), good);
}

/// Issue 73, item 8: a published site's miner pages grow with the log, not its square.
/// Each entry's proof runs to its own block (where no commitment covers it), and a page
/// counts the entries through itself, so old pages keep their bytes; a proof to the tip,
/// as a node serves, made every page grow with the log. Both are measured here, at 100,
/// 200 and 400 demo blocks of four events (the table is printed, and in docs). A
/// republish writes only the pages that changed, and reads none it does not write: a
/// damaged old page stays damaged (nothing read it) until `--repair` reads it back.
#[test]
fn published_miner_pages_grow_with_the_log_and_a_republish_reads_only_what_it_writes() {
    use af::replay::transcript_entries::{entries_page, Filter, Found, Reach};
    let dir = tempfile::tempdir().unwrap();
    let af = |args: &[&str]| {
        let out = Command::new(af_bin()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_default()
    };
    let bytes_under =
        |path: &std::path::Path| -> u64 { walk(path).iter().map(|f| std::fs::metadata(f).unwrap().len()).sum() };
    let mut rows = Vec::new();
    for blocks in [100u64, 200, 400] {
        let data = dir.path().join(format!("data{blocks}"));
        let site = dir.path().join(format!("site{blocks}"));
        let (data_s, site_s) = (data.to_str().unwrap(), site.to_str().unwrap());
        af(&["ledger", "demo", "--data", data_s, "--blocks", &blocks.to_string(), "--events-per-block", "4"]);
        af(&["ledger", "publish", "--data", data_s, "--out", site_s, "--json"]);
        let published = bytes_under(&site.join("af/v1/miner"));
        let bundles = bytes_under(&site.join("af/v1/log"));
        // The same pages with proofs to the tip: what every page held before.
        let store = Store::open_read_only(&data).unwrap();
        let replayed = af::replay::replay(
            &store,
            &af::envs::registry(),
            None,
            &af::evaluation::ratio::DEFAULT_RATIO_PARAMS,
            &mut |_, _, _| {},
        )
        .unwrap();
        // (Measured at the two smaller sizes: at 400 blocks they are 163 MB of JSON.)
        let mut to_tip = 0;
        for hotkey in store.miner_hotkeys().unwrap().into_iter().filter(|_| blocks < 400) {
            let total = store.locate_miner_page(&hotkey, 0, 0).unwrap().0 as usize;
            for offset in (0..total).step_by(layout::MINER_PAGE_ENTRIES) {
                let how = (Found::Miner(&hotkey), &Filter::default(), Reach::Tip);
                let page = (offset, layout::MINER_PAGE_ENTRIES);
                to_tip +=
                    entries_page(&store, &replayed.folds, how, page, usize::MAX, &mut |_| true).unwrap().len() as u64;
            }
        }
        rows.push((blocks, bundles, to_tip, published));
    }
    eprintln!("| blocks | bundles | miner pages, proofs to the tip | miner pages, proofs to their block |");
    for (blocks, bundles, to_tip, published) in &rows {
        let to_tip = if *to_tip == 0 { "not measured".to_string() } else { to_tip.to_string() };
        eprintln!("| {blocks} | {bundles} | {to_tip} | {published} |");
    }
    let growth = |of: fn(&(u64, u64, u64, u64)) -> u64, to: usize| of(&rows[to]) as f64 / of(&rows[0]) as f64;
    assert!(growth(|r| r.3, 2) < 4.4, "4x the blocks, pages x{:.2}: {rows:?}", growth(|r| r.3, 2));
    assert!(growth(|r| r.3, 1) < 2.2, "2x the blocks, pages x{:.2}: {rows:?}", growth(|r| r.3, 1));
    assert!(growth(|r| r.2, 1) > 3.0, "proofs to the tip grow as the square: x{:.2}: {rows:?}", growth(|r| r.2, 1));

    // Republishing after 10 more blocks writes the changed pages alone.
    let data = dir.path().join("data100");
    let site = dir.path().join("site100");
    let (data_s, site_s) = (data.to_str().unwrap(), site.to_str().unwrap());
    let pages: Vec<std::path::PathBuf> =
        walk(&site.join("af/v1/miner")).into_iter().filter(|p| p.to_str().unwrap().contains("/entries/")).collect();
    let first_page = pages.iter().find(|p| p.ends_with("entries/0")).unwrap().clone();
    let good = std::fs::read(&first_page).unwrap();
    std::fs::write(&first_page, b"damaged").unwrap();
    af(&["ledger", "demo", "--data", data_s, "--blocks", "10", "--events-per-block", "4"]);
    let again = af(&["ledger", "publish", "--data", data_s, "--out", site_s, "--json"]);
    let written = again["miner_pages_written"].as_u64().unwrap();
    assert!(written <= 6, "{written} of {} pages written again: {again}", pages.len());
    assert_eq!(std::fs::read(&first_page).unwrap(), b"damaged", "an unchanged page is not read, nor written");
    let repaired = af(&["ledger", "publish", "--data", data_s, "--out", site_s, "--repair", "--json"]);
    assert_eq!(repaired["miner_pages_written"].as_u64(), Some(1), "{repaired}");
    assert_eq!(std::fs::read(&first_page).unwrap(), good, "--repair reads every page back");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

/// Issue 73, item 2: one log's bundle that stalls half way costs that log the stall
/// deadline, and the logs after it are mirrored whole. A static server of a published
/// site, which sends half of the first log's first bundle and then nothing.
#[test]
fn a_stalled_bundle_fails_its_log_alone_and_the_others_are_mirrored() {
    use af::http::mirror::{mirror, ChainOutcome, MirrorOptions};
    use std::io::{BufRead, Read, Write};
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let root = dirs[1].path().join("site");
    publish::publish(&store, None, &Site::open(root.to_str().unwrap()).unwrap(), &mut |_| {}).unwrap();
    let mut logs: Vec<_> = store.tips().unwrap().into_iter().map(|(v, _)| v).collect();
    logs.sort();
    let stalled = layout::bundle_path(&logs[0], 0, layout::TILE_WIDTH);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let served = root.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (root, stalled) = (served.clone(), stalled.clone());
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = std::io::BufReader::new(stream.try_clone().unwrap()).read_line(&mut line);
                let path = line.split(' ').nth(1).unwrap_or("/").trim_start_matches('/').to_string();
                let Ok(body) = std::fs::read(root.join(&path)) else {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    return;
                };
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes());
                if path == stalled {
                    let _ = stream.write_all(&body[..body.len() / 2]);
                    let _ = stream.flush();
                    std::thread::sleep(std::time::Duration::from_secs(60));
                    return;
                }
                let _ = stream.write_all(&body);
                let mut rest = Vec::new();
                let _ = stream.read_to_end(&mut rest);
            });
        }
    });
    let copy = std::sync::Arc::new(Store::create(&dirs[1].path().join("copy")).unwrap());
    let options = MirrorOptions { stall_timeout: std::time::Duration::from_secs(2), ..MirrorOptions::default() };
    let started = std::time::Instant::now();
    let report = crate::http_logs::runtime().block_on(mirror(copy.clone(), &url, options, &mut |_, _, _| {})).unwrap();
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    let outcome = |v| &report.chains.iter().find(|c| c.validator == v).unwrap().outcome;
    assert!(matches!(outcome(logs[0]), ChainOutcome::Failed { .. }), "{:?}", outcome(logs[0]));
    for other in &logs[1..] {
        assert!(matches!(outcome(*other), ChainOutcome::Updated { .. }), "{:?}", outcome(*other));
        assert_eq!(copy.tip(other).unwrap(), store.tip(other).unwrap(), "the log after the stalled one, whole");
    }
}
