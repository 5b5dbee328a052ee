//! Fault injection: seeded single-byte changes anywhere in a real store file (redb's
//! header, pages holding blocks, the tip record, the index tables, the rest of the file
//! including free space), each checked through the real binary. Every flip must be either
//! detected (`af ledger verify` exits 3 and names what) or harmless (export, show, prove
//! and find print byte-identical output). No panic, hang or abort; the seed is printed
//! (`AF_FAULT_SEED=N` replays one run).

use crate::{af_bin, TestRng};
use af::ledger::store::{encode_tip, Location, STORE_FILE};
use af::ledger::{demo, Event, LedgerKey, OwnLog, Store};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const N_BLOCKS: u64 = 40;
const EVENTS_PER_BLOCK: u32 = 20;
const N_FLIPS: usize = 300;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `af` with a deadline: a run that outlives it is a hang, and is killed. The
/// output is drained while it runs (a full pipe would otherwise stall the child).
fn run_af(args: &[&str]) -> Output {
    let child =
        Command::new(af_bin()).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run af");
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(child.wait_with_output()));
    match receiver.recv_timeout(TIMEOUT) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("af {args:?} hung for more than {TIMEOUT:?}");
        }
    }
}

/// Every offset where `needle` occurs in `haystack`.
fn positions(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// The outputs a flip must leave unchanged if verify calls it harmless.
fn reading_outputs(dir: &Path, validator: &str, challenge: &str, miner: &str) -> Vec<(String, Output)> {
    let data = dir.to_str().unwrap();
    let runs: Vec<Vec<&str>> = vec![
        vec!["ledger", "export", "--data", data, "--format", "jsonl"],
        vec!["ledger", "export", "--data", data, "--format", "blocks"],
        vec!["ledger", "show", "--data", data],
        vec!["ledger", "show", "--data", data, "--validator", validator],
        vec!["ledger", "show", "--data", data, "--validator", validator, "--height", "17", "--json"],
        vec!["ledger", "prove", "--data", data, "--validator", validator, "--height", "23", "--event", "5"],
        vec!["ledger", "find", "--data", data, "--challenge-id", challenge, "--json"],
        vec!["ledger", "find", "--data", data, "--miner", miner, "--json"],
    ];
    runs.into_iter().map(|args| (args.join(" "), run_af(&args))).collect()
}

#[test]
fn every_single_byte_flip_of_a_store_is_detected_or_harmless() {
    let seed: u64 = std::env::var("AF_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261122);
    eprintln!("fault injection seed {seed} (AF_FAULT_SEED={seed} replays it)");
    let mut rng = TestRng::new(seed);

    let pristine_dir = tempfile::tempdir().unwrap();
    let key = LedgerKey::from_seed([7; 32]);
    let validator = key.validator();
    let log = OwnLog::new(Store::create(pristine_dir.path()).unwrap(), LedgerKey::from_seed([7; 32]));
    let mut challenge = None;
    let mut locations = Vec::new();
    for height in 0..N_BLOCKS {
        let events = demo::demo_events(&validator, height, EVENTS_PER_BLOCK, 300);
        if let Event::Transcript(t) = &events[3] {
            challenge.get_or_insert(t.challenge_id);
        }
        locations.push(Location { validator, height, event_idx: 3 }.encode());
        log.append(events, 1_000 + height).unwrap();
    }
    let tip = log.tip().unwrap().unwrap();
    drop(log);
    let file = pristine_dir.path().join(STORE_FILE);
    let pristine = std::fs::read(&file).unwrap();
    let challenge = challenge.unwrap();

    // Where the interesting bytes are: found in the file itself, so the test follows
    // whatever layout the engine chose.
    let mut targets: Vec<(&str, Vec<usize>)> = vec![("redb header", (0..320).collect())];
    let tip_at = positions(&pristine, &encode_tip(&tip));
    assert!(!tip_at.is_empty(), "the tip record is in the file");
    targets.push(("tip record", tip_at.iter().flat_map(|p| *p..*p + 48).collect()));
    let mut index_bytes = Vec::new();
    for location in &locations {
        index_bytes.extend(positions(&pristine, location).into_iter().flat_map(|p| p..p + 44));
    }
    assert!(!index_bytes.is_empty(), "index entries are in the file");
    targets.push(("index entries", index_bytes));
    let challenge_at: Vec<usize> = positions(&pristine, &challenge.0).into_iter().flat_map(|p| p..p + 32).collect();
    targets.push(("challenge ids (index keys and block bytes)", challenge_at));
    let mut header_bytes = Vec::new();
    let store = Store::open_read_only(pristine_dir.path()).unwrap();
    for height in [0, 9, 20, 39] {
        let bytes = store.block_bytes(&validator, height).unwrap().unwrap();
        header_bytes.extend(positions(&pristine, &bytes[..64]).into_iter().flat_map(|p| p..p + 300));
    }
    drop(store);
    targets.push(("block headers and first events", header_bytes));
    let last_page = pristine.len() - 4096;
    targets.push(("the file's last page", (last_page..pristine.len()).collect()));
    let n_targeted = N_FLIPS / 2;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_string();
    let baseline_copy = tempfile::tempdir().unwrap();
    std::fs::write(baseline_copy.path().join(STORE_FILE), &pristine).unwrap();
    let (validator_hex, challenge_hex) = (validator.to_hex(), challenge.to_hex());
    let baseline = reading_outputs(baseline_copy.path(), &validator_hex, &challenge_hex, demo::DEMO_CHAMPION);
    for (what, output) in &baseline {
        assert!(output.status.success(), "baseline `{what}` fails: {}", String::from_utf8_lossy(&output.stderr));
    }

    let (mut detected, mut harmless) = (0usize, 0usize);
    let mut by_region: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for flip in 0..N_FLIPS {
        let (region, offset) = if flip < n_targeted {
            let (name, offsets) = &targets[flip % targets.len()];
            (*name, offsets[rng.pick(offsets.len())])
        } else {
            ("anywhere", rng.pick(pristine.len()))
        };
        let mask = (rng.pick(255) + 1) as u8;
        let mut bytes = pristine.clone();
        bytes[offset] ^= mask;
        std::fs::write(dir.path().join(STORE_FILE), &bytes).unwrap();
        let context = format!("flip {flip} (seed {seed}): byte {offset} ^= {mask:#04x} in {region}");
        let verify = run_af(&["ledger", "verify", "--data", &data, "--json"]);
        let stderr = String::from_utf8_lossy(&verify.stderr).into_owned();
        let entry = by_region.entry(region).or_default();
        match verify.status.code() {
            Some(3) => {
                let report: serde_json::Value = serde_json::from_slice(&verify.stdout)
                    .unwrap_or_else(|e| panic!("{context}: verify printed no JSON report ({e}); stderr {stderr}"));
                assert_eq!(report["ok"], false, "{context}");
                let named = report["error"].is_string()
                    || report["indexes"]["fault"].is_object()
                    || report["chains"].as_array().is_some_and(|c| c.iter().any(|c| c["fault"]["kind"].is_string()));
                assert!(named, "{context}: exit 3 without naming what failed: {report}");
                detected += 1;
                entry.0 += 1;
            }
            Some(0) => {
                let outputs = reading_outputs(dir.path(), &validator_hex, &challenge_hex, demo::DEMO_CHAMPION);
                for ((what, expected), (_, actual)) in baseline.iter().zip(&outputs) {
                    assert!(
                        actual.status.success() && actual.stdout == expected.stdout,
                        "{context}: verify said ok, but `{what}` changed (exit {:?}): {}",
                        actual.status.code(),
                        String::from_utf8_lossy(&actual.stderr)
                    );
                }
                harmless += 1;
                entry.1 += 1;
            }
            other => panic!("{context}: verify exited {other:?} (only 0 or 3 are allowed); stderr {stderr}"),
        }
    }
    eprintln!("{N_FLIPS} flips of a {}-byte store: {detected} detected, {harmless} harmless", pristine.len());
    for (region, (d, h)) in &by_region {
        eprintln!("  {region}: {d} detected, {h} harmless");
    }
    assert_eq!(detected + harmless, N_FLIPS);
    assert!(detected > N_FLIPS / 3, "most flips land in live data and must be detected");
}

/// `export --format blocks` writes the exact block bytes; `import` stores them only after
/// verifying every block and link, so a copy made from the export has the same chains,
/// and an export with any changed record is refused at that record, keeping what came
/// before it.
#[test]
fn block_export_round_trips_and_import_refuses_changed_records() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let demo = crate::af(&["demo", "--data", source.to_str().unwrap()]);
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let export = run_af(&["ledger", "export", "--data", source.to_str().unwrap(), "--format", "blocks"]);
    assert!(export.status.success());
    let bytes = export.stdout;
    assert!(bytes.starts_with(af::ledger::export::MAGIC));
    let file = dir.path().join("log.afblocks");
    std::fs::write(&file, &bytes).unwrap();
    let copy = dir.path().join("copy");
    let import =
        run_af(&["ledger", "import", "--data", copy.to_str().unwrap(), "--file", file.to_str().unwrap(), "--json"]);
    assert_eq!(import.status.code(), Some(0), "{}", String::from_utf8_lossy(&import.stdout));
    let show = |d: &std::path::Path| run_af(&["ledger", "show", "--data", d.to_str().unwrap(), "--json"]).stdout;
    assert_eq!(show(&source), show(&copy), "the imported copy holds the same chains");
    assert!(run_af(&["ledger", "verify", "--data", copy.to_str().unwrap()]).status.success());
    // Importing again adds nothing.
    let again =
        run_af(&["ledger", "import", "--data", copy.to_str().unwrap(), "--file", file.to_str().unwrap(), "--json"]);
    let summary: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(summary["blocks_new"], 0);

    // ledger-spec/08: a file that is not an export (empty, or without the magic) is bad
    // input and creates nothing; the magic alone is an export of no chain.
    let magic = af::ledger::export::MAGIC;
    for (name, content, code) in
        [("empty", &b""[..], 1), ("not-an-export", &b"hello\n"[..], 1), ("magic-only", magic, 0)]
    {
        let (input, target) = (dir.path().join(format!("{name}.afblocks")), dir.path().join(name));
        std::fs::write(&input, content).unwrap();
        let output =
            run_af(&["ledger", "import", "--data", target.to_str().unwrap(), "--file", input.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(code), "{name}: {}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(target.join(STORE_FILE).exists(), code == 0, "{name}: a store is created only for an export");
    }

    let mut rng = TestRng::new(99);
    for round in 0..24 {
        let mut changed = bytes.clone();
        let at = af::ledger::export::MAGIC.len() + rng.pick(bytes.len() - af::ledger::export::MAGIC.len());
        changed[at] ^= (rng.pick(255) + 1) as u8;
        std::fs::write(&file, &changed).unwrap();
        let target = dir.path().join(format!("bad{round}"));
        let refused = run_af(&[
            "ledger",
            "import",
            "--data",
            target.to_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(refused.status.code(), Some(3), "byte {at}: {}", String::from_utf8_lossy(&refused.stdout));
        // What was kept verifies.
        if target.join(STORE_FILE).exists() {
            assert!(run_af(&["ledger", "verify", "--data", target.to_str().unwrap()]).status.success());
        }
    }
}

/// A store that is fine but cannot be read says why, with exit 1 (could not run), never
/// the verification-failure code: missing, or held by a running writer. A read-only copy
/// is verified and audited.
#[test]
fn stores_that_cannot_be_opened_say_why_and_read_only_copies_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let missing = run_af(&["ledger", "verify", "--data", empty.to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no ledger store"));
    assert!(crate::af(&["demo", "--data", data.to_str().unwrap()]).status.success());

    // A writer holds the store (as a running validator does).
    let writer = Store::open(&data).unwrap();
    for args in [vec!["ledger", "verify"], vec!["ledger", "show"], vec!["ledger", "export"]] {
        let mut args = args.clone();
        args.extend(["--data", data.to_str().unwrap()]);
        let output = run_af(&args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("locked"), "{args:?}");
    }
    assert_eq!(run_af(&["audit", "--data", data.to_str().unwrap()]).status.code(), Some(2), "audit: could not run");
    drop(writer);

    // A read-only copy: file 0444 in a 0555 directory.
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.path().join("ro");
    std::fs::create_dir_all(&copy).unwrap();
    std::fs::copy(data.join(STORE_FILE), copy.join(STORE_FILE)).unwrap();
    std::fs::set_permissions(copy.join(STORE_FILE), std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = std::fs::read(copy.join(STORE_FILE)).unwrap();
    assert_eq!(run_af(&["ledger", "verify", "--data", copy.to_str().unwrap()]).status.code(), Some(0));
    let audit = run_af(&["audit", "--data", copy.to_str().unwrap()]);
    assert_eq!(audit.status.code(), Some(0), "{}", String::from_utf8_lossy(&audit.stderr));
    assert_eq!(std::fs::read(copy.join(STORE_FILE)).unwrap(), before, "reading never writes the file");
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The repro: a store emptied (a failed copy or restore) or put back from an older
/// copy must never become a new history signed with the old key; each writer refuses,
/// naming the recovery, and an import of the chain's export brings it back.
#[test]
fn a_store_that_lost_our_chain_is_never_signed_on_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let d = data.to_str().unwrap();
    let demo = |blocks: &str| {
        run_af(&["ledger", "demo", "--data", d, "--blocks", blocks, "--events-per-block", "1", "--json"])
    };
    assert!(demo("3").status.success());
    let older = std::fs::read(data.join(STORE_FILE)).unwrap();
    assert!(demo("2").status.success());
    let export = run_af(&["ledger", "export", "--data", d, "--format", "blocks"]);
    assert!(export.status.success());
    let export_file = dir.path().join("chain.afblocks");
    std::fs::write(&export_file, &export.stdout).unwrap();

    let refused = |args: &[&str], holds: &str| {
        let output = run_af(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(holds) && stderr.contains("up to height 4"), "{args:?}: {stderr}");
        assert!(stderr.contains("equivocation") && stderr.contains("af ledger import"), "{stderr}");
        assert!(!String::from_utf8_lossy(&output.stdout).contains("appended"), "{args:?} signed a block");
    };
    // Emptied: 0 bytes.
    std::fs::write(data.join(STORE_FILE), b"").unwrap();
    for args in [
        vec!["ledger", "demo", "--data", d, "--blocks", "1", "--events-per-block", "1", "--ack"],
        vec!["ledger", "init", "--data", d],
    ] {
        refused(&args, "is 0 bytes");
        // The refusal leaves the store as it found it, not a fresh empty one that
        // `af ledger verify` would call whole.
        assert_eq!(std::fs::metadata(data.join(STORE_FILE)).unwrap().len(), 0, "{args:?}");
    }
    assert_ne!(run_af(&["ledger", "verify", "--data", d]).status.code(), Some(0));
    // Gone: the same, and nothing is made.
    std::fs::remove_file(data.join(STORE_FILE)).unwrap();
    refused(&["ledger", "demo", "--data", d, "--blocks", "1", "--events-per-block", "1"], "is missing");
    assert!(!data.join(STORE_FILE).exists(), "no store was made");
    // Put back from a copy taken at height 2.
    std::fs::write(data.join(STORE_FILE), &older).unwrap();
    refused(&["ledger", "demo", "--data", d, "--blocks", "1", "--events-per-block", "1"], "only up to height 2");

    // The recovery the message names: import the export, then the chain goes on at 5.
    let import = run_af(&["ledger", "import", "--data", d, "--file", export_file.to_str().unwrap()]);
    assert!(import.status.success(), "{}", String::from_utf8_lossy(&import.stderr));
    let next = demo("1");
    assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&next.stdout).unwrap();
    assert_eq!(summary["tip_height"], 5);
    assert_eq!(run_af(&["ledger", "verify", "--data", d]).status.code(), Some(0));

    // A record that is not whole, or another key's, stops the writer too.
    let record = data.join(af::ledger::signed::SIGNED_FILE);
    let whole = std::fs::read(&record).unwrap();
    std::fs::write(&record, &whole[..whole.len() / 2]).unwrap();
    let output = run_af(&["ledger", "init", "--data", d]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unreadable"));
    let other = LedgerKey::from_seed([3; 32]).validator().to_hex();
    let mine = String::from_utf8(whole).unwrap();
    let theirs = mine.replace(
        &serde_json::from_str::<serde_json::Value>(&mine).unwrap()["validator"].as_str().unwrap().to_owned(),
        &other,
    );
    std::fs::write(&record, theirs).unwrap();
    let output = run_af(&["ledger", "init", "--data", d]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("belongs to validator"));
}

/// One zeroed page makes redb refuse the whole store; `af ledger salvage` still writes
/// every block before the damage that checks out, as a prefix of each chain's export
/// (never a changed or unverified block), which imports into a fresh store that verifies.
/// Where the engine's own pages are hit and nothing can be reached, it says so, exit 1,
/// and leaves no file.
#[test]
fn salvage_saves_every_verified_block_before_a_zeroed_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut salvaged_some = false;
    for (n, share) in [0.3, 0.4, 0.5, 0.6, 0.7].into_iter().enumerate() {
        let data = dir.path().join(format!("d{n}"));
        let d = data.to_str().unwrap();
        let demo = ["ledger", "demo", "--data", d, "--blocks", "120", "--events-per-block", "16"];
        assert!(run_af(&demo).status.success());
        let original = run_af(&["ledger", "export", "--data", d, "--format", "blocks"]).stdout;
        let file = data.join(STORE_FILE);
        let mut bytes = std::fs::read(&file).unwrap();
        let page = (bytes.len() as f64 * share) as usize / 4096 * 4096;
        bytes[page..page + 4096].fill(0);
        std::fs::write(&file, &bytes).unwrap();
        // A free page changes nothing (the flip test covers those): only damage is salvaged.
        if run_af(&["ledger", "verify", "--data", d]).status.code() == Some(0) {
            continue;
        }

        let out = dir.path().join(format!("s{n}.afblocks"));
        let salvage = run_af(&["ledger", "salvage", "--data", d, "--out", out.to_str().unwrap(), "--json"]);
        let stderr = String::from_utf8_lossy(&salvage.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        match salvage.status.code() {
            Some(0) | Some(3) => {
                let report: serde_json::Value = serde_json::from_slice(&salvage.stdout).unwrap();
                let written = std::fs::read(&out).unwrap();
                assert!(original.starts_with(&written), "a verified prefix of the chain's export");
                // 0 only when every chain is proven whole: with the recorded tips on a
                // damaged page nothing proves that, so a complete file still says 3.
                let tips_unknown = report["tips_unreadable"].is_string();
                assert_eq!(salvage.status.code() == Some(0), written == original && !tips_unknown, "{report}");
                let fresh = dir.path().join(format!("fresh{n}"));
                let import =
                    run_af(&["ledger", "import", "--data", fresh.to_str().unwrap(), "--file", out.to_str().unwrap()]);
                assert!(import.status.success(), "{}", String::from_utf8_lossy(&import.stderr));
                assert_eq!(run_af(&["ledger", "verify", "--data", fresh.to_str().unwrap()]).status.code(), Some(0));
                salvaged_some |= report["n_blocks"].as_u64().unwrap() > 0;
            }
            code => {
                assert_eq!(code, Some(1), "{stderr}");
                assert!(stderr.contains("af mirror") && !out.exists(), "{stderr}");
            }
        }
    }
    assert!(salvaged_some, "a zeroed data page leaves blocks to save");
}
