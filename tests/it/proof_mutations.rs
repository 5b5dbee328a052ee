//! Seeded mutations of every kind of proof a user is handed: block inclusion proofs,
//! miners' transcript entries and signed checkpoints. Each mutation changes the document
//! (a JSON leaf, an added field, a hex spelling, a byte of a hash or signature, a
//! character of a note); every one must be refused, either when it is parsed or when it
//! is verified. A handful also go through the binary, which must exit 3.

use crate::{af, stdout, TestRng};
use af::ledger::checkpoint::Checkpoint;
use af::ledger::entry::{verify_entry, TranscriptEntry};
use af::ledger::event::{ChainCommitment, Event};
use af::ledger::proof::{verify_inclusion_proof, InclusionProof};
use af::ledger::{OwnLog, Store};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};
use serde_json::Value;

/// Every leaf of `value` (path, value), skipping subtrees named in `skip`.
fn leaves(value: &Value, path: &mut Vec<String>, skip: &[&str], out: &mut Vec<(Vec<String>, Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                path.push(k.clone());
                leaves(v, path, skip, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                leaves(v, path, skip, out);
                path.pop();
            }
        }
        leaf => out.push((path.clone(), leaf.clone())),
    }
}

/// Every object in `value`, by path (to add unknown fields to).
fn objects(value: &Value, path: &mut Vec<String>, skip: &[&str], out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            out.push(path.clone());
            for (k, v) in map {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                path.push(k.clone());
                objects(v, path, skip, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                objects(v, path, skip, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(value, |v, key| match v {
        Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
        other => &mut other[key.as_str()],
    })
}

/// Mutations of one leaf: each changes the document or is dropped.
fn leaf_mutations(leaf: &Value, rng: &mut TestRng) -> Vec<Value> {
    let mut out = Vec::new();
    match leaf {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                out.push(Value::from(u.wrapping_add(1)));
                if u > 0 {
                    out.push(Value::from(u - 1));
                }
                out.push(Value::from(u64::MAX));
            } else if let Some(i) = n.as_i64() {
                out.push(Value::from(i.wrapping_add(1)));
            }
        }
        Value::String(s) => {
            let upper = s.to_uppercase();
            if upper != *s {
                out.push(Value::from(upper));
            }
            out.push(Value::from(format!("{s}0")));
            if !s.is_empty() {
                let mut chars: Vec<char> = s.chars().collect();
                let i = rng.pick(chars.len());
                chars[i] = if chars[i] == '1' { '2' } else { '1' };
                let changed: String = chars.into_iter().collect();
                if changed != *s {
                    out.push(Value::from(changed));
                }
            }
            out.push(Value::from("x".repeat(300)));
        }
        Value::Bool(b) => out.push(Value::from(!b)),
        Value::Null => out.push(Value::from("x")),
        _ => {}
    }
    out
}

/// Applies leaf, unknown-field and structural mutations to `doc` and returns each
/// mutated document (all different from `doc`).
fn mutate_json(doc: &Value, skip: &[&str], seed: u64) -> Vec<(String, Value)> {
    let mut rng = TestRng::new(seed);
    let mut out = Vec::new();
    let mut all_leaves = Vec::new();
    leaves(doc, &mut Vec::new(), skip, &mut all_leaves);
    for (path, leaf) in &all_leaves {
        for replacement in leaf_mutations(leaf, &mut rng) {
            let mut changed = doc.clone();
            *at(&mut changed, path) = replacement.clone();
            out.push((format!("{} = {}", path.join("."), short(&replacement)), changed));
        }
    }
    let mut all_objects = Vec::new();
    objects(doc, &mut Vec::new(), skip, &mut all_objects);
    for path in all_objects {
        let mut changed = doc.clone();
        at(&mut changed, &path)["unexpected_field"] = Value::from(1);
        out.push((format!("{}.unexpected_field added", path.join(".")), changed));
    }
    out.retain(|(_, changed)| changed != doc);
    out
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 40 {
        format!("{}…", &text[..40])
    } else {
        text
    }
}

/// Structural changes to an inclusion proof: headers dropped, repeated, swapped; the
/// path shortened or lengthened.
fn structural(proof: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let n_headers = proof["headers"].as_array().unwrap().len();
    for i in 0..n_headers {
        // Dropping the last header leaves a genuine proof to an earlier tip: not a forgery.
        if i + 1 < n_headers {
            let mut v = proof.clone();
            v["headers"].as_array_mut().unwrap().remove(i);
            out.push((format!("header {i} dropped"), v));
        }
        let mut v = proof.clone();
        let h = v["headers"][i].clone();
        v["headers"].as_array_mut().unwrap().insert(i, h);
        out.push((format!("header {i} repeated"), v));
    }
    if n_headers > 1 {
        let mut v = proof.clone();
        v["headers"].as_array_mut().unwrap().swap(0, 1);
        out.push(("headers 0 and 1 swapped".into(), v));
    }
    let mut v = proof.clone();
    v["merkle_path"].as_array_mut().unwrap().push(Value::from("00".repeat(32)));
    out.push(("a path step added".into(), v));
    if !proof["merkle_path"].as_array().unwrap().is_empty() {
        let mut v = proof.clone();
        v["merkle_path"].as_array_mut().unwrap().pop();
        out.push(("a path step dropped".into(), v));
    }
    out
}

/// A network of two validators with a `ChainCommitment` of validator 0's tip recorded in
/// its next block, so that entries carry every kind of proof.
fn network() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::create(dir.path()).unwrap();
        write_network(&store, &NetworkSpec::small(2)).unwrap();
        let log = OwnLog::new(store, validator_key(0));
        let tip = log.tip().unwrap().unwrap();
        let commitment =
            ChainCommitment { netuid: 7, chain_block: 1234, committed_height: tip.height, committed_hash: tip.hash };
        log.append(vec![Event::ChainCommitment(commitment)], tip.time_ms + 1).unwrap();
    }
    let data = dir.path().to_str().unwrap().to_string();
    (dir, data)
}

fn entries(data: &str) -> Vec<Value> {
    let output = af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).unwrap().as_array().unwrap().clone()
}

#[test]
fn every_mutation_of_a_block_proof_is_refused() {
    let (dir, data) = network();
    let validator = validator_key(0).validator().to_hex();
    let output = af(&["ledger", "prove", "--data", &data, "--validator", &validator, "--height", "1", "--event", "2"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let doc: Value = serde_json::from_slice(&output.stdout).unwrap();
    let proof: InclusionProof = serde_json::from_value(doc.clone()).unwrap();
    verify_inclusion_proof(&proof).expect("the genuine proof verifies");

    let mut mutations = mutate_json(&doc, &[], 11);
    mutations.extend(structural(&doc));
    // Raw byte flips of the event bytes: each must break the proof.
    let mut rng = TestRng::new(12);
    for _ in 0..64 {
        let mut bytes = proof.event_bytes.clone();
        let i = rng.pick(bytes.len());
        bytes[i] ^= 1 << rng.pick(8);
        let mut v = doc.clone();
        v["event_bytes"] = Value::from(hex::encode(&bytes));
        mutations.push((format!("event byte {i} flipped"), v));
    }
    assert!(mutations.len() >= 200, "only {} mutations", mutations.len());
    for (what, mutated) in &mutations {
        let refused = match serde_json::from_value::<InclusionProof>(mutated.clone()) {
            Err(_) => true,
            Ok(p) => verify_inclusion_proof(&p).is_err(),
        };
        assert!(refused, "block proof mutation accepted: {what}");
    }
    eprintln!("block proof: {} mutations, every one refused", mutations.len());

    // Through the binary: the genuine proof passes, mutations exit 3.
    let file = dir.path().join("proof.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let ok = af(&["ledger", "verify-proof", "--file", file.to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    for (what, mutated) in mutations.iter().step_by(mutations.len() / 12) {
        std::fs::write(&file, mutated.to_string()).unwrap();
        let refused = af(&["ledger", "verify-proof", "--file", file.to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(3), "{what}: {}", String::from_utf8_lossy(&refused.stderr));
    }
}

#[test]
fn every_mutation_of_a_transcript_entry_is_refused() {
    let (dir, data) = network();
    let entries = entries(&data);
    // An entry of validator 0, whose commitment covers it: every kind of proof is present.
    let doc = entries
        .iter()
        .find(|e| !e["proof"]["commitment"].is_null() && !e["proof"]["opponent"].is_null())
        .expect("an entry with opponent and commitment proofs")
        .clone();
    let entry: TranscriptEntry = serde_json::from_value(doc.clone()).unwrap();
    let verified = verify_entry(&entry).expect("the genuine entry verifies");
    assert_eq!(verified.commitment.as_ref().map(|c| c.chain_block), Some(1234));

    // `unproven` is by definition not covered; everything else is.
    let mut mutations = mutate_json(&doc, &["unproven"], 21);
    for part in ["inclusion", "opponent", "commitment"] {
        for (what, v) in structural(&doc["proof"][part]) {
            let mut changed = doc.clone();
            changed["proof"][part] = v;
            mutations.push((format!("proof.{part}: {what}"), changed));
        }
    }
    // An honest opponent proof paired with another outcome, a dropped opponent, and a
    // commitment proof swapped for a transcript's proof.
    let mut v = doc.clone();
    v["opponent"] = Value::Null;
    mutations.push(("opponent removed".into(), v));
    let mut v = doc.clone();
    let header = v["proof"]["opponent"]["headers"][0].clone();
    v["proof"]["opponent"]["headers"].as_array_mut().unwrap().push(header);
    mutations.push(("the opponent's proof padded with a second header".into(), v));
    let mut v = doc.clone();
    v["proof"]["commitment"] = doc["proof"]["opponent"].clone();
    mutations.push(("commitment proof replaced by the opponent's".into(), v));
    assert!(mutations.len() >= 200, "only {} mutations", mutations.len());
    let mut n_parse = 0;
    for (what, mutated) in &mutations {
        let refused = match serde_json::from_value::<TranscriptEntry>(mutated.clone()) {
            Err(_) => {
                n_parse += 1;
                true
            }
            Ok(e) => verify_entry(&e).is_err(),
        };
        assert!(refused, "transcript entry mutation accepted: {what}");
    }
    eprintln!("transcript entry: {} mutations, every one refused ({n_parse} at parsing)", mutations.len());

    let file = dir.path().join("entry.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let ok = af(&["transcripts", "verify", file.to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(stdout(&ok).contains("unproven"), "{}", stdout(&ok));
    for (what, mutated) in mutations.iter().step_by(mutations.len() / 12) {
        std::fs::write(&file, mutated.to_string()).unwrap();
        let refused = af(&["transcripts", "verify", file.to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(3), "{what}: {}", stdout(&refused));
    }
    // An unproven role outside the schema is refused (ledger-spec/09).
    let mut king = doc.clone();
    king["unproven"]["role"] = "king".into();
    std::fs::write(&file, king.to_string()).unwrap();
    assert_eq!(af(&["transcripts", "verify", file.to_str().unwrap()]).status.code(), Some(3), "role king");
    // The JSON probes of ledger-spec/10, each a text edit breaking one syntax rule.
    let probes: Value =
        serde_json::from_str(&std::fs::read_to_string(crate::repo_path("fixtures/ledger/json-probes.json")).unwrap())
            .unwrap();
    let text = doc.to_string();
    for probe in probes["probes"].as_array().unwrap() {
        let edited = json_probe(&text, probe);
        assert_ne!(edited, text, "{probe}");
        std::fs::write(&file, &edited).unwrap();
        let refused = af(&["transcripts", "verify", file.to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(3), "{}: {}", probe["name"], stdout(&refused));
    }
    // What `af transcripts` writes is what `verify` reads, in every format.
    for format in ["--json", "--jsonl"] {
        let written = af(&["transcripts", "--data", &data, "--miner", "5SynthRandom", format]);
        assert!(written.status.success());
        std::fs::write(&file, &written.stdout).unwrap();
        let checked = af(&["transcripts", "verify", file.to_str().unwrap(), "--json"]);
        assert_eq!(checked.status.code(), Some(0), "{format}: {}", stdout(&checked));
        let report: Value = serde_json::from_str(&stdout(&checked)).unwrap();
        assert_eq!(report["count"].as_u64(), Some(entries.len() as u64), "{format}");
        // One changed entry among many fails the file.
        let mut text = String::from_utf8(written.stdout).unwrap();
        let at = text.find("\"latency_ms\":").expect("a latency field") + "\"latency_ms\":".len();
        text.insert(at, '9');
        std::fs::write(&file, text).unwrap();
        assert_eq!(af(&["transcripts", "verify", file.to_str().unwrap()]).status.code(), Some(3), "{format}");
    }
}

#[test]
fn every_mutation_of_a_checkpoint_is_refused() {
    let (dir, _) = network();
    let key = validator_key(0);
    let store = Store::open_read_only(dir.path()).unwrap();
    let tip = store.tip(&key.validator()).unwrap().unwrap();
    let note = Checkpoint::of_tip(key.validator(), &tip).sign(&key);
    Checkpoint::verify(&note).expect("the genuine note verifies");
    let mut mutations: Vec<(String, String)> = Vec::new();
    let bytes = note.as_bytes();
    let mut rng = TestRng::new(31);
    // Every byte position, changed once (text that stops being UTF-8 is refused too).
    for i in 0..bytes.len() {
        let mut changed = bytes.to_vec();
        changed[i] ^= 1 << rng.pick(7);
        mutations.push((format!("byte {i}"), String::from_utf8_lossy(&changed).into_owned()));
    }
    mutations.push(("CRLF line ends".into(), note.replace('\n', "\r\n")));
    mutations.push(("no final newline".into(), note.trim_end_matches('\n').to_string()));
    mutations.push(("size 0".into(), note.replacen(&format!("\n{}\n", tip.height + 1), "\n0\n", 1)));
    mutations.push((
        "size with a leading zero".into(),
        note.replacen(&format!("\n{}\n", tip.height + 1), &format!("\n0{}\n", tip.height + 1), 1),
    ));
    mutations.push(("signature lines removed".into(), note.split("\n\n").next().unwrap().to_string() + "\n\n"));
    mutations.retain(|(_, m)| *m != note);
    assert!(mutations.len() >= 200, "only {} mutations", mutations.len());
    for (what, mutated) in &mutations {
        assert!(Checkpoint::verify(mutated).is_err(), "checkpoint mutation accepted: {what}");
    }
    eprintln!("checkpoint: {} mutations, every one refused", mutations.len());
    let file = dir.path().join("note");
    for (what, mutated) in mutations.iter().step_by(mutations.len() / 8) {
        std::fs::write(&file, mutated).unwrap();
        let refused = af(&["ledger", "verify-checkpoint", "--file", file.to_str().unwrap()]);
        assert_eq!(refused.status.code(), Some(3), "{what}: {}", stdout(&refused));
    }
}

/// Applies one probe of `fixtures/ledger/json-probes.json` to a compact JSON text.
fn json_probe(text: &str, probe: &Value) -> String {
    let insert = probe["text"].as_str().unwrap();
    let value_at = |member: &str| text.find(&format!("\"{member}\":")).unwrap() + member.len() + 3;
    match probe["edit"].as_str().unwrap() {
        "insert_after_open" => format!("{{{insert}{}", &text[1..]),
        "prefix_string" => {
            let at = value_at(probe["member"].as_str().unwrap()) + 1; // past the opening quote
            format!("{}{insert}{}", &text[..at], &text[at..])
        }
        "replace_number" => {
            let at = value_at(probe["member"].as_str().unwrap());
            let end = at + text[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
            format!("{}{insert}{}", &text[..at], &text[end..])
        }
        other => panic!("unknown probe edit {other}"),
    }
}
