//! `af audit`'s report in words, for a person at a terminal: the library renders it so
//! the CLI only prints, and `af mine status`, `af weights show` and `af ledger show`
//! (one line per event) share its lines.

use super::report::{DISCREPANCIES_OMITTED, RATIO_NEVER_SET_ON_CHAIN};
use super::AuditReport;
use crate::ledger::event::Event;
use crate::replay::spill_file::SpillFileError;
use std::fmt::Write as _;

/// One log's record of not playing a miner, in words (`af audit`, `af mine status`).
pub fn skip_line(row: &super::SkipRow) -> String {
    let s = &row.skip;
    let line = format!(
        "{} skips {} (uid {}) {}@{} of block {}: {} {} (block {})",
        short(&row.validator),
        s.hotkey,
        s.uid,
        s.model,
        s.revision,
        s.commit_block,
        match s.reason {
            crate::ledger::event::SkipReason::Duplicate => "a duplicate of",
            crate::ledger::event::SkipReason::SameAsChampion => "the model of champion",
        },
        s.kept_by,
        s.kept_block
    );
    crate::display::one_line(&line).into_owned()
}

fn short(key: &impl std::fmt::Display) -> String {
    let text = key.to_string();
    text.chars().take(16).collect::<String>() + "…"
}

/// A share in percent with one decimal, as the pages print it.
fn ppm(value: u32) -> String {
    format!("{:.1}%", f64::from(value) / 1e4)
}

/// The report as `af audit` prints it for a person (`--json` prints the report itself).
/// An error if the state's matches did not read back from the replay's file.
pub fn text(report: &AuditReport) -> Result<String, SpillFileError> {
    let mut out = String::new();
    // Writing to a String cannot fail.
    // Each line is escaped whole: a log's hotkeys, models and findings' details are
    // outside strings, and a newline in one must not start a line (a forged "clean").
    macro_rules! outln {
        ($format:literal $($arg:tt)*) => {{
            const _: () = assert!(!crate::display::has_line_break($format), "outln! prints one line: split it");
            let _ = writeln!(out, "{}", crate::display::one_line(&format!($format $($arg)*)));
        }};
    }
    let state = &report.state;
    outln!(
        "audited {} chain(s): {} blocks, {:.1} MiB folded in {:.2} s ({} from {})",
        report.n_chains,
        report.n_blocks_folded,
        report.n_bytes_folded as f64 / 1048576.0,
        report.seconds,
        report.n_chains_from_snapshot,
        if report.from_checkpoint.is_some() { "a fold checkpoint" } else { "a snapshot" }
    );
    outln!("state hash {}", report.state_hash);
    for waiting in &report.awaiting_upgrade {
        outln!(
            "log {} not judged from height {}: its blocks there are of a later protocol version{} than this build applies (no finding; upgrade af)",
            waiting.validator,
            waiting.height,
            if waiting.version > 0 { format!(" ({})", waiting.version) } else { String::new() }
        );
    }
    if let Some(start) = &report.from_checkpoint {
        outln!(
            "started from fold checkpoints read from {} (quorum {} of the {} validators {}, {} of whose logs are held); {} blocks below them not checked:",
            start.source,
            start.quorum,
            start.n_countersigners,
            start.named_by,
            start.n_logs,
            start.n_blocks_trusted
        );
        if start.n_not_listed > 0 {
            outln!("  claims in {} log(s) of validators not on that list were not counted", start.n_not_listed);
        }
        for chain in &start.chains {
            match &chain.from {
                Some(agreed) => outln!(
                    "  {} from block {} (fold {}), countersigned by {}",
                    short(&chain.validator),
                    agreed.point.height,
                    short(&agreed.point.fold_hash),
                    agreed.countersigners.iter().map(short).collect::<Vec<_>>().join(", ")
                ),
                None => outln!("  {} from genesis", short(&chain.validator)),
            }
            for why in &chain.passed_over {
                match why.starts_with("block ") {
                    true => outln!("    passed over {why}"),
                    false => outln!("    {why}"),
                }
            }
        }
        for (validator, why) in &start.unreadable {
            outln!("  claims of {} not counted: {why}", short(validator));
        }
        outln!("  trusted: {}", start.trusts);
    }
    let claims = &report.checkpoint_claims;
    outln!(
        "fold checkpoints claimed in the logs: {} agree with this replay, {} not comparable, {} false, {} disputed, {} ignored (another fold format, or past the logs a list is kept for)",
        claims.n_agree,
        claims.n_unchecked,
        claims.false_claims.len(),
        claims.disputed.len(),
        claims.n_ignored
    );
    // One line per claim that differs: a dispute names no one false (ledger-spec/02).
    let differing = [
        (
            "DISPUTED",
            &claims.disputed,
            ", started from a checkpoint of that log,",
            ": either the claimer or the checkpoint's countersigners are false (af audit --from-genesis tells which)",
        ),
        ("FOUND", &claims.false_claims, "", ""),
    ];
    for (label, list, started, verdict) in differing {
        for (claimer, at, point, ours) in list {
            outln!(
                "{label}: {} claims at its block {at} that {}'s fold at block {} hashes to {}; this replay{started} has {}{verdict}",
                short(claimer),
                short(&point.validator),
                point.height,
                short(&point.fold_hash),
                short(ours)
            );
        }
    }
    outln!("");
    outln!(
        "{:<18} {:>8} {:>9} {:>8} {:>6} {:>9} {:>8}",
        "validator",
        "height",
        "events",
        "matches",
        "false",
        "disagree",
        "vtrust"
    );
    for v in &state.validators {
        outln!(
            "{:<18} {:>8} {:>9} {:>8} {:>6} {:>9} {:>8}{}",
            short(&v.validator),
            v.tip_height.map_or("-".into(), |h| h.to_string()),
            v.n_events,
            v.n_matches,
            v.n_false_reports,
            format!("{}/{}", v.n_disagreements, v.n_compared),
            ppm(v.vtrust_ppm),
            if v.equivocated {
                "  EQUIVOCATED"
            } else if v.invalid_at.is_some() {
                "  INVALID"
            } else {
                ""
            }
        );
    }
    for r in &report.rotations {
        match &r.why_not {
            None => outln!(
                "key rotation: {} continues {} from its block {} (one validator, named {})",
                short(&r.new_key),
                short(&r.old_key),
                r.old_height,
                short(&r.first_key)
            ),
            Some(why) => outln!(
                "key rotation: {} names {} as its predecessor but is not linked to it: {why}",
                short(&r.new_key),
                short(&r.old_key)
            ),
        }
    }
    outln!("");
    for m in state.matches.iter() {
        let m = m?;
        outln!(
            "match {} vs {}: {} ({} votes, {} for / {} against)",
            m.contender.hotkey,
            m.champion.hotkey,
            match m.verdict {
                Some(crate::replay::records::NetworkVerdict::ContenderWon) => "contender won",
                Some(crate::replay::records::NetworkVerdict::ChampionStays) => "champion stays",
                None => "undecided",
            },
            m.votes.len(),
            ppm(m.for_ppm.min(u64::from(u32::MAX)) as u32),
            ppm(m.against_ppm.min(u64::from(u32::MAX)) as u32)
        );
    }
    outln!(
        "champion {} (uid {}), ratio to beat {} {}, weights {}",
        state.champion.as_ref().map_or("(none)", |c| &*c.hotkey),
        state.champion.as_ref().map_or("-".into(), |c| c.uid.to_string()),
        ppm(state.ratio_set_ppm),
        match state.ratio_set_at_block {
            0 => RATIO_NEVER_SET_ON_CHAIN.to_string(),
            block => format!("(set at chain block {block})"),
        },
        crate::chain::weights::weight_shares(state.weights.iter().copied())
    );
    outln!("chain commitments: {}", report.chain.note);
    outln!("match blocks: {}", report.blocks.note);
    if !report.skipped.is_empty() {
        outln!("miners not played ({} record(s)):", report.skipped.len());
        for row in &report.skipped {
            outln!("  {}", skip_line(row));
        }
    }
    outln!("weights: {}", report.weights.note);
    for row in report.weights.rows.iter().filter(|r| r.status != "not_checked") {
        outln!("  {} {:<16} {}{}", short(&row.validator), row.status, row.detail, replay_note(row.agrees_with_replay));
    }
    outln!("");
    if report.findings.is_empty() {
        outln!("clean: no discrepancy");
    } else {
        outln!("{} discrepanc{}:", report.findings.len(), if report.findings.len() == 1 { "y" } else { "ies" });
        if report.state.n_discrepancies_omitted > 0 {
            outln!("  (and {} more not listed: {})", report.state.n_discrepancies_omitted, DISCREPANCIES_OMITTED);
        }
        for finding in &report.findings {
            let d = &finding.discrepancy;
            outln!(
                "  {:<16} validator {} height {}{}: {}",
                d.kind.name(),
                d.validator,
                d.height,
                d.event_idx.map_or(String::new(), |e| format!(" event {e}")),
                d.detail
            );
        }
    }
    Ok(out)
}

/// A row's agreement with replay's winner-takes-all weights, as a suffix.
pub fn replay_note(agrees: Option<bool>) -> &'static str {
    match agrees {
        Some(true) => " (all to replay's champion)",
        // Not a finding: the champion may have changed since the validator's last send.
        Some(false) => " (not replay's champion now)",
        None => "",
    }
}

/// A unit enum as its JSON name (`contender_better`), never Rust's debug form.
fn snake_case(value: &impl serde::Serialize) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// One line about an event, for people (`af ledger show`).
pub fn event_line(event: &Event) -> String {
    match event {
        Event::TranscriptCut(cut) => format!(
            "{} ({} text(s) recorded in part)",
            event_line(&Event::Transcript(cut.transcript.clone())),
            cut.cuts.len()
        ),
        Event::Transcript(t) => format!(
            "transcript {} v{} challenge {} #{} miner {} reward {}{}",
            t.env.name,
            t.env.version,
            t.challenge_id,
            t.challenge_index,
            t.miner.hotkey,
            crate::envs::reward_text(t.reward_milli),
            t.error.as_ref().map_or(String::new(), |e| format!(" error: {e}"))
        ),
        Event::MatchStarted(m) => {
            format!("match_started {} contender {} champion {}", m.match_id, m.contender.hotkey, m.champion.hotkey)
        }
        Event::EnvDecision(d) => format!(
            "env_decision {} {} {} ({}W {}L {}D)",
            d.match_id,
            d.env.name,
            snake_case(&d.outcome),
            d.wins,
            d.losses,
            d.draws
        ),
        Event::MatchDecided(d) => {
            format!("match_decided {} contender_won={} champion {}", d.match_id, d.contender_won, d.champion_hotkey)
        }
        Event::WeightsSet(w) => format!("weights_set netuid {} at chain block {}", w.netuid, w.chain_block),
        Event::WeightsCommitted(w) => format!(
            "weights_committed netuid {} at chain block {}, weights {}, reveal round {} (block {})",
            w.netuid,
            w.chain_block,
            crate::chain::weights::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())),
            w.reveal_round,
            w.reveal_block
        ),
        Event::ChainCommitment(c) => format!(
            "chain_commitment height {} hash {} at chain block {}",
            c.committed_height, c.committed_hash, c.chain_block
        ),
        Event::Evidence(e) => format!("evidence: validator {} equivocated at height {}", e.validator, e.height),
        Event::KeyRotated(r) => {
            format!(
                "key_rotated: this key signs nothing more; the log continues under {} (chain block {})",
                r.new_key, r.chain_block
            )
        }
        Event::ChampionLeft(l) => format!(
            "champion_left: the champion {} ({}) left without a match at chain block {}: {}",
            l.champion.hotkey,
            l.champion.model,
            l.chain_block,
            snake_case(&l.reason)
        ),
        Event::KeySucceeded(s) => {
            format!("key_succeeded: this log continues {} from its block {} ({})", s.old_key, s.old_height, s.old_hash)
        }
        Event::FoldCheckpoint(c) => format!(
            "fold_checkpoint (fold format {}) of {} log(s){}",
            c.fold_version,
            c.points.len(),
            c.points.iter().take(4).map(|p| format!(", {} at {}", p.validator, p.height)).collect::<String>()
                + if c.points.len() > 4 { ", ..." } else { "" }
        ),
        Event::MinerSkipped(m) => format!(
            "miner_skipped {} (uid {}) {}@{} committed at block {}: {}, kept by {} (block {})",
            m.hotkey,
            m.uid,
            m.model,
            m.revision,
            m.commit_block,
            snake_case(&m.reason),
            m.kept_by,
            m.kept_block
        ),
    }
}

/// `af weights show` in words: what replay says the weights should be, what each log
/// last set or committed, and what the chain holds where it was read.
pub fn weights_lines(
    state: &crate::replay::combine::NetworkState,
    replay_weights: &[(u16, u16)],
    audit: &super::WeightsAudit,
    view: Option<&super::chain_view::ChainView>,
) -> Vec<String> {
    use crate::chain::weights::weight_shares;
    use crate::display::one_line;
    let shares = |uids: &[u16], weights: &[u16]| weight_shares(uids.iter().copied().zip(weights.iter().copied()));
    let champion = state.champion.as_ref().map_or("(none)", |c| &*c.hotkey);
    let mut out =
        vec![format!("replay: champion {champion} → weights {}", weight_shares(replay_weights.iter().copied()))];
    for row in &audit.rows {
        let logged = row.logged.as_ref().map_or("no weights logged".into(), |w| match &w.commit {
            Some(c) => format!(
                "committed {} at chain block {} (round {}, reveal block {})",
                shares(&w.uids, &w.weights),
                w.chain_block,
                c.reveal_round,
                c.reveal_block
            ),
            None => format!("set {} at chain block {}", shares(&w.uids, &w.weights), w.chain_block),
        });
        out.push(format!("log {}: {logged}{}", row.validator, replay_note(row.agrees_with_replay)));
        if row.status != "not_checked" {
            out.push(format!("  {}: {}", row.status, row.detail));
        }
    }
    let Some(v) = view else {
        out.push("on chain: not read (pass --chain to compare)".into());
        return out;
    };
    out.push(format!("on chain at block {}: {}", v.block, audit.note));
    for (uid, pairs) in &v.weights {
        let setter = v.neurons.iter().find(|n| n.uid == *uid).map_or("?", |n| n.hotkey.as_str());
        out.push(format!("  uid {uid} ({}) has {}", one_line(setter), weight_shares(pairs.iter().copied())));
    }
    for p in &v.timelocked.pending {
        out.push(format!(
            "  pending: {} committed at block {}, opens with round {}",
            p.hotkey, p.commit_block, p.reveal_round
        ));
    }
    for r in &v.timelocked.revealed {
        out.push(match r.error.as_str() {
            "" => format!(
                "  revealed: {} at block {}: {}",
                one_line(&r.hotkey),
                r.reveal_block,
                shares(&r.uids, &r.weights)
            ),
            why => format!("  dropped: {} at block {}: {why}", r.hotkey, r.reveal_block),
        });
    }
    out
}

/// `af ledger show` of one block: its header, then a line per event.
pub fn block_lines(block: &crate::ledger::block::DecodedBlock) -> Vec<String> {
    let header = &block.block.header;
    let mut out = vec![
        format!("block {} of validator {}", header.height, header.validator),
        format!("hash        {}", block.hash),
        format!("prev_hash   {}", header.prev_hash),
        format!("time_ms     {}", header.time_ms),
        format!("events_root {}", header.events_root),
        format!("n_events    {}  ({} bytes)", header.n_events, block.n_bytes),
        format!("signature   {}", block.block.signature),
    ];
    out.extend(block.block.events.iter().enumerate().map(|(i, event)| format!("  [{i}] {}", event_line(event))));
    out
}

/// The registered neurons as a table (`af chain neurons`), a header line first.
pub fn neuron_lines(neurons: &[crate::chain::Neuron]) -> Vec<String> {
    let row = |uid: &dyn std::fmt::Display, hotkey: &str, block: &dyn std::fmt::Display, permit: &str| {
        format!("{uid:>5}  {hotkey:<50} {block:>12} {permit:>9}")
    };
    let mut lines = vec![row(&"uid", "hotkey", &"registered", "validator")];
    for n in neurons {
        let permit = if n.validator_permit { "yes" } else { "" };
        lines.push(row(&n.uid, &crate::display::one_line(&n.hotkey), &n.registration_block, permit));
    }
    lines
}

/// One commitment on chain in words (`af chain commitments`): a validator's ledger tip,
/// a miner's model, or why it is neither.
pub fn commitment_line(r: &crate::chain::CommitmentRecord) -> String {
    use crate::display::one_line;
    let (hotkey, block) = (one_line(&r.hotkey), r.block);
    match (r.ledger(), &r.unreadable) {
        (_, Some(why)) => format!("{hotkey}  block {block}: unreadable: {}", one_line(why)),
        (Some(c), None) => {
            format!("{hotkey}  block {block}: ledger {} tip height {} hash {}", c.ledger_key, c.tip_height, c.tip_hash)
        }
        (None, None) => match r.miner() {
            Ok(m) => format!(
                "{hotkey}  block {block}: miner {}@{} at {}",
                one_line(&m.model),
                one_line(&m.revision),
                one_line(&m.endpoint)
            ),
            Err(why) => format!(
                "{hotkey}  block {block}: {} field(s), neither a ledger nor a miner commitment: {}",
                r.fields.len(),
                one_line(&why)
            ),
        },
    }
}

/// One commitment on chain for scripts (`af chain commitments --json`): its fields in
/// hex, and what they read as.
pub fn commitment_json(r: &crate::chain::CommitmentRecord) -> serde_json::Value {
    let miner = r.ledger().is_none().then(|| r.miner());
    serde_json::json!({
        "hotkey": r.hotkey, "block": r.block, "fields": r.fields.iter().map(hex::encode).collect::<Vec<_>>(),
        "unreadable": r.unreadable, "ledger": r.ledger(),
        "miner": miner.as_ref().and_then(|m| m.as_ref().ok()),
        "miner_error": miner.as_ref().and_then(|m| m.as_ref().err()),
    })
}
