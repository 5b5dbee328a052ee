//! `af demo`: the first-run tour on embedded defaults. Writes a log of real
//! multiplication transcripts, verifies it, signs a checkpoint, proves one transcript's
//! inclusion and re-scores it from its challenge id, printing each step.

use crate::outln;
use af::envs::{self, Message};
use af::ledger::checkpoint::Checkpoint;
use af::ledger::{proof, verify, Event, LedgerKey, Store};
use anyhow::{anyhow, bail, ensure};
use std::path::Path;
use std::process::ExitCode;

pub fn run(data: &Path, blocks: u64, events_per_block: u32, fresh: bool) -> anyhow::Result<ExitCode> {
    ensure!(blocks > 0 && events_per_block > 0, "--blocks and --events-per-block must be positive");
    if fresh && data.exists() {
        std::fs::remove_dir_all(data)?;
    }
    outln!("1. writing {blocks} blocks of {events_per_block} transcripts to {}", data.display());
    let summary = super::ledger::write_demo(data, blocks, events_per_block, 1024, false)?;
    outln!(
        "   {:.1} MiB in {:.2} s: {:.0} durable events/s (each block fsync'd)",
        summary.bytes as f64 / 1048576.0,
        summary.seconds,
        summary.events_per_second
    );

    let store = Store::open_read_only(data)?;
    let report = verify::verify_store(&store, &mut |_, _, _| {})?;
    ensure!(report.ok, "verification failed: {:?}", report.chains.iter().find_map(|c| c.fault.clone()));
    outln!(
        "2. verified {} blocks, {} events: hashes, Merkle roots, signatures, links",
        report.n_blocks,
        report.n_events
    );

    let key = LedgerKey::load(&super::ledger::key_path(data))?;
    let tip = store.tip(&key.validator())?.ok_or_else(|| anyhow!("empty chain"))?;
    let note = Checkpoint::of_tip(key.validator(), &tip).sign(&key);
    Checkpoint::verify(&note)?;
    outln!("3. signed checkpoint of the tip (C2SP signed note), verified:\n");
    for line in note.lines() {
        outln!("     {line}");
    }

    let height = tip.height / 2;
    let inclusion = proof::prove(&store, &key.validator(), height, 0)?;
    let reached = proof::verify_inclusion_proof(&inclusion)?;
    ensure!(reached == tip, "the proof must reach the checkpointed tip");
    outln!(
        "\n4. proved event 0 of block {height}: Merkle path of {} hashes, {} headers to the tip",
        inclusion.merkle_path.len(),
        inclusion.headers.len()
    );

    let Event::Transcript(transcript) = &inclusion.event else { bail!("demo events are transcripts") };
    let registry = envs::registry();
    let env = registry.get(&transcript.env.name).ok_or_else(|| anyhow!("unknown env {}", transcript.env.name))?;
    let messages: Vec<Message> = transcript.messages.iter().map(|m| Message::new(&m.role, m.content.clone())).collect();
    let scored = envs::score_transcript(env, &transcript.challenge_id, &messages)?;
    ensure!(scored.reward_milli == transcript.reward_milli, "recorded reward differs from the re-scored one");
    outln!(
        "5. re-scored that transcript from challenge {} alone: reward {} = recorded {}",
        transcript.challenge_id,
        scored.reward_milli,
        transcript.reward_milli
    );
    outln!("\nall checks passed; inspect with `af ledger show --data {}`", data.display());
    Ok(ExitCode::SUCCESS)
}
