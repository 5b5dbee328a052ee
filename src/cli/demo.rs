//! `af demo`: the first-run tour on embedded defaults. Writes the log of a small
//! synthetic network (validators playing real matches between reference-policy miners,
//! with real challenge ids, scoring and stopping rules), verifies it, signs a
//! checkpoint, proves one transcript's inclusion, re-scores it from its challenge id, and
//! replays the whole log as `af audit` does: the log it leaves audits clean.

use crate::outln;
use af::envs::{self, Message};
use af::ledger::checkpoint::Checkpoint;
use af::ledger::{proof, verify, Store};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};
use anyhow::{anyhow, ensure};
use std::path::Path;
use std::process::ExitCode;

pub fn run(data: &Path, validators: u16, fresh: bool, json: bool) -> anyhow::Result<ExitCode> {
    // The tour's lines are for people; --json prints one summary document instead.
    macro_rules! say {
        ($($arg:tt)*) => {
            if !json {
                outln!($($arg)*);
            }
        };
    }
    if fresh && data.exists() {
        std::fs::remove_dir_all(data)?;
    }
    if data.join(af::ledger::store::STORE_FILE).exists() {
        anyhow::bail!(
            "{} already holds a ledger (a demo ran there before); nothing was changed. `af audit --data {0}` re-checks it, --fresh replaces it",
            data.display()
        );
    }
    let spec = NetworkSpec::small(usize::from(validators));
    say!(
        "1. writing the logs of {validators} validator(s): miners {} play {} matches on {} (the keys are the demo's fixed, public ones)",
        spec.miners.iter().map(|m| format!("{} ({})", m.hotkey, m.policy)).collect::<Vec<_>>().join(", "),
        spec.matches.len(),
        spec.envs.join(", ")
    );
    let started = std::time::Instant::now();
    {
        let store = Store::create(data)?;
        write_network(&store, &spec)?;
    }
    let key = validator_key(0);
    key.write_new(&super::data_dir::key_path(data))?;
    say!(
        "   done in {:.2} s; validator 0's key is {}",
        started.elapsed().as_secs_f64(),
        super::data_dir::key_path(data).display()
    );

    let store = Store::open_read_only(data)?;
    let report = verify::verify_store(&store, &|_, _| {})?;
    ensure!(report.ok, "verification failed: {:?}", report.chains.iter().find_map(|c| c.fault.clone()));
    say!(
        "2. verified {} blocks, {} events: page checksums, canonical bytes, Merkle roots, signatures, links, indexes",
        report.n_blocks,
        report.n_events
    );

    let tip = store.tip(&key.validator())?.ok_or_else(|| anyhow!("empty chain"))?;
    let note = Checkpoint::of_tip(key.validator(), &tip).sign(&key);
    Checkpoint::verify(&note)?;
    say!("3. signed checkpoint of validator 0's tip (C2SP signed note), verified:");
    say!("");
    for line in note.lines() {
        say!("     {line}");
    }

    let location = *store
        .find_miner(&spec.miners[1].hotkey)?
        .iter()
        .find(|l| l.validator == key.validator())
        .ok_or_else(|| anyhow!("no transcript of {}", spec.miners[1].hotkey))?;
    let inclusion = proof::prove(&store, &key.validator(), location.height, location.event_idx)?;
    let reached = proof::verify_inclusion_proof(&inclusion)?;
    ensure!(reached == tip, "the proof must reach the checkpointed tip");
    say!("");
    say!(
        "4. proved event {} of block {}: Merkle path of {} hashes, {} headers to the tip",
        location.event_idx,
        location.height,
        inclusion.merkle_path.len(),
        inclusion.headers.len()
    );

    let transcript = inclusion.event.transcript().ok_or_else(|| anyhow!("the found event is not a transcript"))?;
    let registry = envs::registry();
    let env = registry.named(&transcript.env.name)?;
    let messages: Vec<Message> = transcript.messages.iter().map(|m| Message::new(&m.role, m.content.clone())).collect();
    let scored = envs::score_transcript(env, &transcript.challenge_id, &messages)?;
    ensure!(scored.reward_milli == transcript.reward_milli, "recorded reward differs from the re-scored one");
    say!(
        "5. re-scored that {} transcript from challenge {} alone: reward {} = recorded {}",
        transcript.env.name,
        transcript.challenge_id,
        envs::reward_text(scored.reward_milli),
        envs::reward_text(transcript.reward_milli)
    );

    let replayed =
        af::replay::replay(&store, &registry, None, &af::evaluation::ratio::DEFAULT_RATIO_PARAMS, &mut |_, _, _| {})?;
    let discrepancies = replayed.state.discrepancies.len();
    ensure!(discrepancies == 0, "the replay found {discrepancies} discrepancies in the demo log");
    say!(
        "6. replayed every log as `af audit` does: {} matches, champion {}, 0 discrepancies, state hash {}",
        replayed.folds.iter().map(|f| f.matches.len()).sum::<usize>(),
        replayed.state.champion.as_ref().map_or("(none)", |c| &*c.hotkey),
        replayed.state_hash
    );
    say!("");
    say!("all checks passed; `af audit --data {0}` re-checks it, `af ledger show --data {0}` lists it", data.display());
    if json {
        super::print_json(&serde_json::json!({
            "ok": true,
            "data": data,
            "validators": validators,
            "blocks": report.n_blocks,
            "events": report.n_events,
            "checkpoint": note,
            "proved": { "validator": key.validator(), "height": location.height, "event_idx": location.event_idx,
                        "merkle_path": inclusion.merkle_path.len(), "headers": inclusion.headers.len() },
            "rescored": { "env": transcript.env.name, "challenge_id": transcript.challenge_id,
                          "reward_milli": scored.reward_milli, "recorded_reward_milli": transcript.reward_milli },
            "replay": { "matches": replayed.folds.iter().map(|f| f.matches.len()).sum::<usize>(),
                        "champion": replayed.state.champion.as_ref().map(|c| c.hotkey.clone()),
                        "discrepancies": discrepancies, "state_hash": replayed.state_hash },
        }))?;
    }
    Ok(ExitCode::SUCCESS)
}
