//! The audit's HTML report: one self-contained page (no scripts, no fetches) rendered
//! with maud, so every value is escaped by construction. Keys and ids are shown as
//! 16-hex prefixes with the full value in a tooltip, so nothing forces horizontal
//! scrolling; bars are HTML boxes whose value sits in its own cell, so nothing is clipped.

use super::{AuditReport, EnvRow, MatchRow};
use crate::ledger::event::EnvOutcome;
use crate::replay::combine::NetworkState;
use crate::replay::records::{NetworkMatch, NetworkVerdict};
use crate::replay::spill_file::SpillFileError;
use maud::{html, Markup, PreEscaped, DOCTYPE};

/// What is known of each validator beyond its ledger key: its uid and hotkey, from a
/// chain's commitments. Empty without a chain: pages then say so.
pub type Identities = std::collections::BTreeMap<crate::bytes::ValidatorKey, (Option<u16>, String)>;

/// Each validator's identity on a chain: the hotkey whose newest ledger commitment names
/// its ledger key, and that hotkey's uid if it is registered. What the chain says, read
/// at one moment: the pages show it beside the proven keys, never instead of them.
pub fn identities_from_chain(
    records: &[crate::chain::CommitmentRecord],
    neurons: &[crate::chain::Neuron],
) -> Identities {
    let mut newest: std::collections::BTreeMap<crate::bytes::ValidatorKey, (u64, &str)> = Default::default();
    for record in records {
        if let Some(commitment) = record.ledger() {
            let slot = newest.entry(commitment.ledger_key).or_insert((record.block, &record.hotkey));
            if record.block >= slot.0 {
                *slot = (record.block, &record.hotkey);
            }
        }
    }
    newest
        .into_iter()
        .map(|(validator, (_, hotkey))| {
            let uid = neurons.iter().find(|n| n.hotkey == hotkey).map(|n| n.uid);
            (validator, (uid, hotkey.to_string()))
        })
        .collect()
}

/// The identities an audit with `--chain` learned (the hotkey whose commitment names each
/// ledger key, and its uid).
pub fn identities(report: &AuditReport) -> Identities {
    report.weights.rows.iter().filter_map(|r| Some((r.validator, (r.uid, r.hotkey.clone()?)))).collect()
}

/// The ratio's origin when no chain block set it, in words (text report and HTML alike).
pub const RATIO_NEVER_SET_ON_CHAIN: &str =
    "(its starting value: no match on a chain has set it yet, or the logs name no chain, so it never decays)";

/// Why some findings are counted and not listed (text report and HTML alike).
pub const DISCREPANCIES_OMITTED: &str =
    "a replay lists each chain's first 1,000 findings in its log and 1,000 more found across logs; the rest are counted in its false reports or disagreements";

pub(crate) const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1.5em;color:#1b1f24}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;width:100%}
td,th{border:1px solid #d0d4d9;padding:4px 6px;text-align:left;font-size:14px;vertical-align:top;overflow-wrap:anywhere}
th{background:#f1f3f5;overflow-wrap:normal}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code{font-size:12px;overflow-wrap:anywhere}
code.key{white-space:nowrap}.nowrap{white-space:nowrap}
.model{font-size:12px;font-family:monospace;overflow-wrap:normal}
.bad{color:#b00020;font-weight:bold}.ok{color:#0a7d32;font-weight:bold}.muted{color:#5b6470}
.track{position:relative;height:14px;background:#eef0f3;border-radius:2px;min-width:40px}
.fill{position:absolute;left:0;top:0;bottom:0;background:#2e7d32;border-radius:2px}
.fill.mid{background:#f9a825}
.fill.zero{width:3px!important;background:#b00020}
.reign{position:absolute;top:0;bottom:0;background:#1565c0;border-radius:2px;min-width:3px}
.meta{display:flex;flex-wrap:wrap;gap:.4em 2em}
@media (max-width:960px){th{overflow-wrap:anywhere}}
";

/// A miner or validator as people know it: its uid (when known) and the first 8
/// characters of its hotkey (an ellipsis only where it was cut), with `hover` (the full
/// values) in the tooltip; never broken across lines.
pub(crate) fn identity(uid: Option<u16>, hotkey: &str, hover: &str) -> Markup {
    let cut = hotkey.chars().count() > 8;
    html! {
        span.nowrap title=(hover) {
            @if let Some(uid) = uid { "uid " (uid) " " }
            code { (hotkey.chars().take(8).collect::<String>()) @if cut { "…" } }
        }
    }
}

/// A validator as uid and short hotkey when known (full key on hover), else its key.
pub(crate) fn validator_cell(validator: &crate::bytes::ValidatorKey, identities: &Identities) -> Markup {
    match identities.get(validator) {
        Some((uid, hotkey)) => identity(*uid, hotkey, &format!("hotkey {hotkey}\nledger key {validator}")),
        None => short(validator),
    }
}

/// A miner as the pages show one: its short hotkey (the whole in the tooltip) over its
/// `model@revision`, which breaks only after a `/` or before the `@`, never mid-word.
fn miner(m: &crate::replay::records::HeldMiner) -> Markup {
    html! { (short(&m.hotkey)) br; (model_text(&m.model)) }
}

/// A `model@revision` as every page shows one: it may break after a `/` or before the
/// `@`, never inside a word ("noisy:0.3@r1" stays whole, issue 75 item 7).
pub(crate) fn model_text(model: &str) -> Markup {
    html! {
        span.model title=(model) {
            @for (i, part) in model.split_inclusive('/').enumerate() {
                @if i > 0 { wbr; }
                @match part.split_once('@') { Some((name, revision)) => { (name) wbr; "@" (revision) }, None => (part) }
            }
        }
    }
}

/// Shows a key or id as its first 16 hex digits, the whole in the tooltip.
pub(crate) fn short(value: &impl std::fmt::Display) -> Markup {
    let text = value.to_string();
    let prefix: String = text.chars().take(16).collect();
    html! { code.key title=(text) { (prefix) "…" } }
}

/// A share in ppm as percent with one decimal: the unit of every page (the report, the
/// subnet pages and their charts, the live page).
pub(crate) fn percent(ppm: impl Into<u64>) -> String {
    format!("{:.1}%", ppm.into() as f64 / 1e4)
}

/// A duration in the largest unit that keeps it readable.
pub(crate) fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=119 => format!("{:.1} s", ms as f64 / 1000.0),
        120..=7199 => format!("{:.1} min", s as f64 / 60.0),
        7200..=172_799 => format!("{:.1} h", s as f64 / 3600.0),
        _ => format!("{:.1} days", s as f64 / 86_400.0),
    }
}

pub(crate) fn date(ms: u64) -> String {
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

pub(crate) fn decision(outcome: Option<EnvOutcome>) -> &'static str {
    match outcome {
        Some(EnvOutcome::ContenderBetter) => "better",
        Some(EnvOutcome::ContenderNotBetter) => "not better",
        Some(EnvOutcome::Inconclusive) => "inconclusive",
        None => "open",
    }
}

/// An env's decision in words, saying why one is inconclusive: cut short because the
/// match was decided first (fewer challenges than the plan's cap), or the cap reached.
fn env_decision_words(env: &EnvRow, rule: &str) -> String {
    let played = u64::from(env.wins) + u64::from(env.losses) + u64::from(env.draws);
    let cap = crate::evaluation::plan::parse_plan(rule).and_then(|(rule, _)| rule.max_challenges());
    match (env.decision, cap) {
        (Some(EnvOutcome::Inconclusive), Some(cap)) if played < cap => {
            "undecided: cut short, the match was decided first".to_string()
        }
        (Some(EnvOutcome::Inconclusive), Some(cap)) => format!("inconclusive: the cap of {cap} challenges was reached"),
        (outcome, _) => decision(outcome).to_string(),
    }
}

fn env_tally(env: &EnvRow, rule: &str) -> Markup {
    html! {
        div data-env=(env.env) {
            b { (env.env) } " " (env.wins) "W/" (env.losses) "L/" (env.draws) "D, " (env_decision_words(env, rule))
        }
    }
}

/// The report page; an error if the state's matches did not read back from the
/// replay's file.
pub fn html(report: &AuditReport) -> Result<String, SpillFileError> {
    let state = &report.state;
    let matches = state.matches.to_vec()?;
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "af audit report" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { "af audit report" }
                div.meta {
                    span #result {
                        "Result: "
                        @if report.clean { span.ok { "clean" } }
                        @else { span.bad { (report.findings.len()) " discrepancies" } }
                    }
                    span #version { "af " (report.af_version) }
                    span #generated { "generated " (date(report.generated_at_ms)) }
                }
                p {
                    "State hash " code #state-hash { (report.state_hash) } "; "
                    (report.n_chains) " chain(s), " (report.n_blocks_folded) " blocks folded ("
                    (format!("{:.1}", report.n_bytes_folded as f64 / 1048576.0)) " MiB) in "
                    (format!("{:.2}", report.seconds)) " s"
                    @if report.n_chains_from_snapshot > 0 { ", " (report.n_chains_from_snapshot) " from a snapshot" }
                    "."
                }
                p #champion {
                    "Champion: "
                    @match &state.champion {
                        Some(c) => { b { (c.hotkey) } " (uid " (c.uid) ")" }
                        None => { "none yet" }
                    }
                    "; ratio to beat " span #ratio { (percent(state.ratio_set_ppm)) }
                    @match state.ratio_set_at_block {
                        0 => { " " (RATIO_NEVER_SET_ON_CHAIN) "; weights " }
                        block => { " (set at chain block " (block) "); weights " }
                    }
                    (crate::chain::weights::weight_shares(state.weights.iter().copied()))
                    "."
                }
                p { "Chain commitments: " (report.chain.note) }
                p { "Match start blocks: " (report.blocks.note) }
                p { "Weights: " (report.weights.note) }
                @if report.weights.checked {
                    table #weights {
                        tr { th { "validator" } th { "uid" } th { "last sent (log)" } th { "on chain" } th { "status" } th { "replay's champion" } }
                        @for row in &report.weights.rows {
                            tr {
                                td { (short(&row.validator)) }
                                td.num { @if let Some(uid) = row.uid { (uid) } @else { "-" } }
                                td {
                                    @if let Some(w) = &row.logged {
                                        @if w.commit.is_some() { "committed " } @else { "set " }
                                        (crate::chain::weights::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())))
                                        " at chain block " (w.chain_block)
                                    } @else { "none" }
                                }
                                td { @if let Some(pairs) = &row.on_chain { (crate::chain::weights::weight_shares(pairs.iter().copied())) } @else { "-" } }
                                td.(if row.status == "mismatch" { "bad" } else { "" }) title=(row.detail) { (row.status) }
                                td { @match row.agrees_with_replay { Some(true) => "all to it", Some(false) => "not now", None => "-" } }
                            }
                        }
                    }
                }

                h2 { "Validators" }
                (validators(state, &identities(report)))

                h2 { "Matches (the network's verdicts)" }
                (network_matches(&matches))

                h2 { "Matches as each validator played them" }
                (match_rows(&report.matches))

                @if !report.skipped.is_empty() {
                    h2 { "Miners not played" }
                    table #skipped {
                        tr { th { "validator" } th { "miner" } th { "uid" } th { "model" } th { "block" } th { "why" } th { "kept by" } th { "its block" } }
                        @for row in &report.skipped {
                            tr {
                                td { (short(&row.validator)) }
                                td { (short(&row.skip.hotkey)) }
                                td.num { (row.skip.uid) }
                                td { (row.skip.model) "@" (row.skip.revision) }
                                td.num { (row.skip.commit_block) }
                                td { @match row.skip.reason {
                                    crate::ledger::event::SkipReason::Duplicate => "duplicate",
                                    crate::ledger::event::SkipReason::SameAsChampion => "champion's model",
                                } }
                                td { (short(&row.skip.kept_by)) }
                                td.num { (row.skip.kept_block) }
                            }
                        }
                    }
                }

                h2 { "Champion over time" }
                (reigns(state, &matches))

                h2 { "Discrepancies" }
                @if report.findings.is_empty() {
                    p.ok { "None." }
                } @else {
                    @if report.state.n_discrepancies_omitted > 0 {
                        p #omitted { "And " (report.state.n_discrepancies_omitted) " more not listed: " (DISCREPANCIES_OMITTED) "." }
                    }
                    table #findings {
                        tr { th { "kind" } th { "validator" } th { "height" } th { "event" } th { "detail" } th { "proof" } }
                        @for f in &report.findings {
                            tr {
                                td.bad { (f.discrepancy.kind.name()) }
                                td { (short(&f.discrepancy.validator)) }
                                td.n { (f.discrepancy.height) }
                                td.n { @match f.discrepancy.event_idx { Some(e) => (e), None => "-" } }
                                td { (f.discrepancy.detail) }
                                td { @if f.proof.is_some() { "inclusion proof in --json" } @else { "-" } }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page.into_string())
}

fn validators(state: &NetworkState, identities: &Identities) -> Markup {
    html! {
        table #validators {
            tr {
                th { "validator" } th { "uid, hotkey" } th { "height" } th { "events" } th { "transcripts" } th { "matches" }
                th { "false reports" } th { "disagreements" } th { "status" } th { "vTrust" } th style="width:22%" { "" }
            }
            @for v in &state.validators {
                @let class = if v.vtrust_ppm == 0 { "fill zero" } else if v.vtrust_ppm < 900_000 { "fill mid" } else { "fill" };
                tr data-validator=(v.validator) data-vtrust-ppm=(v.vtrust_ppm) {
                    td { (short(&v.validator)) }
                    td { @match identities.get(&v.validator) {
                        Some((uid, hotkey)) => (identity(*uid, hotkey, hotkey)),
                        None => span.muted { "not read (no --chain)" },
                    } }
                    td.n { @match v.tip_height { Some(h) => (h), None => "-" } }
                    td.n { (v.n_events) }
                    td.n { (v.n_transcripts) }
                    td.n { (v.n_matches) }
                    td.n { (v.n_false_reports) }
                    td.n { (v.n_disagreements) "/" (v.n_compared) }
                    td { @if v.equivocated { span.bad { "equivocated" } } @else if v.invalid_at.is_some() { span.bad { "invalid block" } } @else { "ok" } }
                    td.n.vtrust { (percent(v.vtrust_ppm)) }
                    td { div.track { div class=(class) style=(format!("width:{:.2}%", f64::from(v.vtrust_ppm.min(1_000_000)) / 1e4)) {} } }
                }
            }
        }
    }
}

fn network_matches(matches: &[NetworkMatch]) -> Markup {
    html! {
        @if matches.is_empty() { p.muted { "No match yet." } }
        @else {
            table #network-matches {
                tr { th { "started" } th { "contender" } th { "champion" } th { "votes" } th { "vTrust for the contender" } th { "vTrust against" } th { "verdict" } }
                @for m in matches {
                    tr {
                        td { (date(m.first_started_ms)) }
                        td { (miner(&m.contender)) }
                        td { (miner(&m.champion)) }
                        td.n { (m.votes.len()) }
                        @let total = (m.for_ppm + m.against_ppm).max(1);
                        td.n { (format!("{:.1}%", m.for_ppm as f64 * 100.0 / total as f64)) }
                        td.n { (format!("{:.1}%", m.against_ppm as f64 * 100.0 / total as f64)) }
                        td { @match m.verdict {
                            Some(NetworkVerdict::ContenderWon) => "contender won",
                            Some(NetworkVerdict::ChampionStays) => "champion stays",
                            None => "undecided",
                        } }
                    }
                }
            }
        }
    }
}

fn match_rows(rows: &[MatchRow]) -> Markup {
    html! {
        @if rows.is_empty() { p.muted { "No match yet." } }
        @else {
            table #matches {
                tr { th { "match id" } th { "validator" } th { "contender" } th { "champion" } th { "ratio to beat" } th { "envs (contender's W/L/D, decision)" } th { "verdict" } th { "new ratio" } }
                @for m in rows {
                    tr data-match-id=(m.match_id) {
                        td { (short(&m.match_id)) }
                        td { (short(&m.validator)) }
                        td { (miner(&m.contender)) }
                        td { (miner(&m.champion)) }
                        td.n { (percent(m.ratio_to_beat_ppm)) }
                        td { @for env in &m.envs { (env_tally(env, &m.rule)) } }
                        td { @match m.contender_won { Some(true) => "contender won", Some(false) => "champion stays", None => "open" } }
                        td.n { @match m.new_ratio_to_beat_ppm { Some(r) => (percent(r)), None => "-" } }
                    }
                }
            }
        }
    }
}

/// Each champion's reign as a bar on one time axis, from the first crowning to the last
/// match activity the logs record (not the time of the report: old logs would squeeze
/// every earlier reign to nothing); every reign keeps a visible minimum width, and labels
/// sit in their own cells.
fn reigns(state: &NetworkState, matches: &[NetworkMatch]) -> Markup {
    let history = &state.champion_history;
    let Some(first) = history.first() else {
        return html! { p.muted { "No match yet." } };
    };
    let t0 = first.at_time_ms;
    let last_activity = matches
        .iter()
        .flat_map(|m| m.votes.iter().map(|v| v.decided_time_ms).chain([m.first_started_ms]).max())
        .chain(history.iter().map(|c| c.at_time_ms))
        .max()
        .unwrap_or(t0);
    let end = last_activity.max(t0 + 1);
    let span = (end - t0) as f64;
    html! {
        p.muted { "From " (date(t0)) " to " (date(end)) " (" (duration(end - t0)) ")." }
        table #reigns {
            tr { th { "champion" } th { "crowned" } th { "reign" } th style="width:45%" { "" } }
            @for (i, change) in history.iter().enumerate() {
                @let until = history.get(i + 1).map_or(end, |next| next.at_time_ms);
                @let left = 100.0 * (change.at_time_ms - t0) as f64 / span;
                @let width = 100.0 * until.saturating_sub(change.at_time_ms) as f64 / span;
                tr {
                    td { (change.champion.hotkey) " (uid " (change.champion.uid) ")" }
                    td { (date(change.at_time_ms)) }
                    td.n { (duration(until.saturating_sub(change.at_time_ms))) @if i + 1 == history.len() { " (current, to the last match recorded)" } }
                    td { div.track { div.reign style=(format!("left:{left:.2}%;width:{width:.2}%")) {} } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(duration(1_500), "1.5 s");
        assert_eq!(duration(600_000), "10.0 min");
        assert_eq!(duration(3 * 3_600_000), "3.0 h");
        assert_eq!(duration(3 * 86_400_000), "3.0 days");
    }

    #[test]
    fn a_hotkey_shows_an_ellipsis_only_where_it_was_cut_and_never_breaks() {
        let whole = identity(Some(3), "5MinerA", "hover").into_string();
        assert!(whole.contains("5MinerA</code>") && !whole.contains('…'), "{whole}");
        let cut = identity(None, "5DevnetMiner0noisy_0_3", "hover").into_string();
        assert!(cut.contains("5DevnetM…</code>") && cut.contains("class=\"nowrap\""), "{cut}");
        assert!(STYLE.contains(".nowrap{white-space:nowrap}"), "the report's style keeps it on one line");
    }

    /// Issue 75, item 9: an env the match's decision cut short is not called plainly
    /// "inconclusive"; one that reached the cap says so.
    #[test]
    fn an_inconclusive_env_says_whether_it_was_cut_short_or_reached_the_cap() {
        let env = |wins, decision| EnvRow { env: "mult".into(), wins, losses: 0, draws: 0, decision };
        let plan = crate::protocol::PLAN_V4;
        let cut = env_decision_words(&env(30, Some(EnvOutcome::Inconclusive)), plan);
        assert_eq!(cut, "undecided: cut short, the match was decided first");
        let capped = env_decision_words(&env(4_000, Some(EnvOutcome::Inconclusive)), plan);
        assert_eq!(capped, "inconclusive: the cap of 4000 challenges was reached");
        assert_eq!(env_decision_words(&env(144, Some(EnvOutcome::ContenderBetter)), plan), "better");
        assert_eq!(
            env_decision_words(&env(3, Some(EnvOutcome::Inconclusive)), "mixture alpha=0.05 prior=4,4"),
            "inconclusive"
        );
    }

    #[test]
    fn a_model_breaks_only_after_a_slash_or_before_its_revision() {
        let text = model_text("org/noisy:0.3@r1").into_string();
        assert_eq!(text, "<span class=\"model\" title=\"org/noisy:0.3@r1\">org/<wbr>noisy:0.3<wbr>@r1</span>");
        assert!(STYLE.contains(".model{") && STYLE.contains("overflow-wrap:normal"), "no break inside a word");
    }

    #[test]
    fn values_are_escaped() {
        let markup = short(&"<script>alert(1)</script>0123456789");
        assert!(!markup.into_string().contains("<script>"));
    }
}
