//! The subnet's pages, folded from the logs a node holds: validators (`subnet.html`),
//! miners (`miners.html`), matches (`matches.html`) and history (`history.html`), as
//! btcli's metagraph and Affine's dashboard show them, but each number derived from the
//! replayed logs. Pure: a [`Replay`] (and what is known of identities) in, HTML out. The
//! node serves them at those paths and `af ledger publish` writes the same files, so
//! their relative links work in both. No scripts: every value is escaped by maud, and
//! the charts are SVG drawn here.

use super::charts::{ratio_chart, vtrust_chart};
use crate::audit::report::{
    date, decision, duration, identity, model_text, percent, short, validator_cell, RATIO_NEVER_SET_ON_CHAIN, STYLE,
};
use crate::bytes::{Hash32, ValidatorKey};
use crate::chain::weights::weight_shares;
// The legacy ratio parameters only reach logs of mixture plans (score plans carry theirs).
use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use crate::ledger::event::MinerRef;
use crate::replay::fold::ChainFold;
use crate::replay::queries::{miner_rows, miners_named, network_ratio_steps, newest_chain_block, played, ratio_points};
use crate::replay::records::{MatchFold, NetworkMatch, NetworkVerdict, SkipFold};
use crate::replay::spill_file::SpillFileError;
use crate::replay::vtrust_history::vtrust_history;
use crate::replay::Replay;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use std::collections::{BTreeMap, BTreeSet};

/// The pages, by file name.
pub const PAGES: [(&str, &str); 4] =
    [("subnet.html", "Subnet"), ("miners.html", "Miners"), ("matches.html", "Matches"), ("history.html", "History")];

pub use crate::audit::report::Identities;

/// What the pages show from a chain, read at one moment beside the logs: who each
/// validator is, and (for the validator serving or publishing the pages) the contenders
/// it will play next. Empty when no chain was read; the pages then say so.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FromChain {
    pub identities: Identities,
    /// The queue, in the order it will be played; `None` when not read.
    pub queue: Option<Vec<Queued>>,
    /// The chain's head block when read: what "blocks since" counts to.
    pub head: Option<u64>,
    /// Each miner's commitment block (hotkey to block), where a chain was read.
    pub committed: BTreeMap<String, u64>,
    /// The queue is a validator's that follows the network (a node's pages), not the
    /// serving validator's own.
    pub queue_by_network: bool,
}

/// A contender waiting to play.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub hotkey: String,
    pub uid: u16,
    /// `MODEL@REVISION`, as the log will record it.
    pub model: String,
    pub commit_block: u64,
}

impl FromChain {
    /// What a chain read gives: identities, and the queue of the validator whose own log
    /// folds to `own` (its champion and what it played), by the code `af validate` plays
    /// it with.
    pub fn read(
        neurons: &[crate::chain::Neuron],
        records: &[crate::chain::CommitmentRecord],
        head: u64,
        own: Option<&crate::validator::state::ValidatorState>,
    ) -> FromChain {
        let queue = own.map(|own| {
            crate::validator::discovery::queue_of(neurons, records, own.champion.as_ref(), &own.played)
                .queue
                .into_iter()
                .map(|c| Queued {
                    model: crate::validator::discovery::recorded_model(&c.commitment),
                    hotkey: c.hotkey,
                    uid: c.uid,
                    commit_block: c.commit_block,
                })
                .collect()
        });
        let committed = records.iter().filter(|r| r.miner().is_ok()).map(|r| (r.hotkey.clone(), r.block)).collect();
        let identities = crate::audit::report::identities_from_chain(records, neurons);
        FromChain { identities, queue, head: Some(head), committed, queue_by_network: false }
    }
}

/// Matches on one page of `matches.html` as a node serves it.
pub const MATCHES_PER_PAGE: usize = 100;

/// How the matches and miners pages are cut: whole (a published, static copy: no request
/// costs more than reading a file), or one page of [`MATCHES_PER_PAGE`] matches or
/// [`MINERS_PER_PAGE`] miners as a node serves it, so what a reader's request costs does
/// not grow with the logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paging {
    Whole,
    /// A 1-based page; `None` for the default: the newest matches, the first miners.
    Page(Option<usize>),
}

impl Paging {
    /// Where match `i` (0-based) is shown.
    fn href(self, i: usize) -> String {
        match self {
            Paging::Whole => format!("matches.html#m-{i}"),
            Paging::Page(_) => format!("matches.html?page={}#m-{i}", i / MATCHES_PER_PAGE + 1),
        }
    }
}

/// The pages of `n` matches (at least one, empty).
pub fn match_pages(n: usize) -> usize {
    n.div_ceil(MATCHES_PER_PAGE).max(1)
}

/// Why a page was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// A name not in [`PAGES`], or a page of matches or miners past the last.
    #[error("no such page")]
    NotFound,
    /// The replay's file did not read back: a page short of a match is never drawn.
    #[error(transparent)]
    Unread(#[from] SpillFileError),
}

/// Renders page `name` (one of [`PAGES`]).
pub fn render(name: &str, replay: &Replay, chain: &FromChain, paging: Paging) -> Result<String, PageError> {
    let identities = &chain.identities;
    let body = match name {
        "subnet.html" => subnet(replay, identities, chain.head)?,
        "miners.html" => miners(replay, chain, paging)?,
        "matches.html" => matches(replay, identities, paging)?,
        "history.html" => history(replay, identities)?,
        _ => return Err(PageError::NotFound),
    };
    let title = PAGES.iter().find(|(file, _)| *file == name).map_or("", |(_, title)| title);
    Ok(page(title, body, Some(&replay.state_hash)))
}

/// Challenges on one page of `match.html`.
pub const PAIRS_PER_PAGE: usize = 50;
/// Characters of each answer shown on `match.html` (the entries carry them whole).
pub const ANSWER_CHARS: usize = 2_000;

/// `match.html` (a node only): one match of one validator, each challenge's two answers
/// side by side, [`PAIRS_PER_PAGE`] at a time. `page_number` is 1-based, `total` the
/// challenges of the match as the index places them.
pub fn match_page(
    validator: &ValidatorKey,
    match_id: &Hash32,
    played: &MatchFold,
    pairs: &[crate::replay::transcript_entries::ChallengePair],
    page_number: usize,
    total: usize,
) -> String {
    let pages = total.div_ceil(PAIRS_PER_PAGE).max(1);
    let id = match_id.to_hex();
    let answer = |shown: &crate::replay::transcript_entries::ShownAnswer| {
        let more = shown.bytes.saturating_sub(shown.start.len());
        html! { pre.answer { (shown.start) } @if more > 0 { span.muted { "… " (more) " more bytes (the whole answer is in the entry)" } } }
    };
    let body = html! {
        p #match-head {
            (miner_cell(&played.contender)) " " (model_text(&played.contender.model)) " (contender) against "
            (miner_cell(&played.champion)) " " (model_text(&played.champion.model)) " (champion), as validator "
            (short(validator)) " played it: match id " code { (id) } ". "
            b { @match &played.decided {
                Some(d) => (if d.contender_won { "contender won" } else { "champion stays" }),
                None => "open",
            } }
            " · " @for (env, e) in &played.env_folds { (env) " " (e.wins) "/" (e.losses) "/" (e.draws) " (" (decision(e.decision)) ") " }
        }
        p.muted {
            "Rewards and answers as this validator's signed log records them, not proven on this page: each "
            "challenge's link gives both transcripts with their inclusion proofs (ledger-spec/09)."
        }
        p #pair-pages {
            "Challenges " (((page_number - 1) * PAIRS_PER_PAGE + 1).min(total)) " to " (((page_number - 1) * PAIRS_PER_PAGE + pairs.len()).min(total))
            " of " (total) " (page " (page_number) " of " (pages) "). "
            @if page_number > 1 { a href=(format!("match.html?id={id}&page={}", page_number - 1)) { "earlier" } " " }
            @if page_number < pages { a href=(format!("match.html?id={id}&page={}", page_number + 1)) { "later" } }
        }
        table #pairs {
            tr { th { "challenge" } th { "result" } th { "contender's answer" } th { "champion's answer" } }
            @for p in pairs {
                @let outcome = p.champion.as_ref().map(|c| crate::ledger::entry::outcome(p.contender.0, c.0));
                tr data-challenge=(p.challenge_id) {
                    td {
                        (p.env) " #" (p.challenge_index) br;
                        a href=(format!("af/v1/transcripts?challenge={}", p.challenge_id)) { "entries with proofs" }
                        br; span.muted { "block " (p.height) }
                    }
                    td { @match outcome { Some("win") => "contender won", Some("loss") => "champion won", Some(_) => "draw", None => "no champion answer in the block" } }
                    td { "reward " (milli(p.contender.0)) (answer(&p.contender.1)) }
                    td { @match &p.champion { Some((reward, text)) => { "reward " (milli(*reward)) (answer(text)) }, None => span.muted { "-" } } }
                }
            }
        }
    };
    page("Match", body, None)
}

fn milli(reward: i32) -> String {
    format!("{:.3}", f64::from(reward) / 1000.0)
}

/// A whole page: `body` under the navigation, with the state hash of the replay it was
/// folded from (`af audit` of the same logs gives the same), if it was.
fn page(title: &str, body: Markup, state: Option<&crate::bytes::Hash32>) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "af: " (title) }
                style { (PreEscaped(STYLE)) (PreEscaped(PAGE_STYLE)) }
            }
            body {
                nav {
                    @for (file, name) in PAGES {
                        @if name == title { b { (name) } } @else { a href=(file) { (name) } }
                    }
                }
                h1 { (title) }
                p.muted {
                    "Folded from the signed logs this copy holds; a value the logs do not prove is marked. "
                    "To check it all, run " code.nowrap { "af mirror --from URL --data DIR" } " and " code.nowrap { "af audit --data DIR" } "."
                    @if let Some(state) = state {
                        " Drawn from the replay whose state hash is " code.state-hash { (state) } "."
                    }
                }
                (body)
            }
        }
    }
    .into_string()
}

const PAGE_STYLE: &str = "
nav{display:flex;gap:1.2em;margin-bottom:.5em}nav a{color:#1565c0}
th{overflow-wrap:normal}.unproven{color:#8a6d00}#miners td{overflow-wrap:break-word}
.nowrap{white-space:nowrap}
pre.answer{white-space:pre-wrap;overflow-wrap:anywhere;max-height:24em;overflow:auto;margin:.3em 0;font-size:12px}
svg{background:#fafbfc;border:1px solid #d0d4d9;max-width:100%;height:auto}
";

fn miner_cell<S: AsRef<str>>(miner: &MinerRef<S>) -> Markup {
    let (hotkey, model) = (miner.hotkey.as_ref(), miner.model.as_ref());
    identity(Some(miner.uid), hotkey, &format!("hotkey {hotkey}\nmodel {model}"))
}

fn subnet(replay: &Replay, identities: &Identities, head: Option<u64>) -> Result<Markup, SpillFileError> {
    let state = &replay.state;
    // The chain's head where one was read; else the newest block a log names, said so.
    let newest = match head {
        Some(head) => head,
        None => newest_chain_block(replay)?,
    };
    let folds: BTreeMap<ValidatorKey, &ChainFold> = replay.folds.iter().map(|f| (f.validator, f)).collect();
    let mut committed: BTreeMap<ValidatorKey, u64> = BTreeMap::new();
    for fold in &replay.folds {
        if let Some(last) = fold.commitments.last()? {
            committed.insert(fold.validator, last.chain_block);
        }
    }
    let since = |block: Option<u64>| match block {
        Some(block) if newest > 0 => format!("{} (block {block})", newest.saturating_sub(block)),
        Some(block) => format!("block {block}"),
        None => "never".into(),
    };
    Ok(html! {
        p #champion {
            "Champion: "
            @match &state.champion {
                Some(c) => { (miner_cell(c)) " serving " (model_text(&c.model)) }
                None => { "none yet" }
            }
            "; the network's ratio to beat, as its last crowning set it, " b { (percent(u64::from(state.ratio_set_ppm))) }
            @match state.ratio_set_at_block { 0 => { " " (RATIO_NEVER_SET_ON_CHAIN) } b => { " (set at chain block " (b) ")" } }
            "; weights by replay: " (weight_shares(state.weights.iter().copied())) "."
        }
        @if identities.is_empty() {
            p.unproven { "Uids and hotkeys are not shown: this page was made without reading a chain's commitments." }
        }
        p.muted { "Blocks since are counted to chain block " (newest) @match head {
            Some(_) => ", the chain's head when this page was made.",
            None => ", the newest any log names: no chain was read, so it may be behind the chain's head.",
        } }
        table #validators {
            tr {
                th { "validator" } th { "ledger key" } th { "tip" } th { "vTrust" } th { "blocks since commitment" }
                th { "blocks since weights" } th { "last weights (its log)" } th { "agrees with replay" }
            }
            @for v in &state.validators {
                @let fold = folds.get(&v.validator);
                tr data-validator=(v.validator) data-vtrust-ppm=(v.vtrust_ppm) {
                    td { @if identities.contains_key(&v.validator) { (validator_cell(&v.validator, identities)) } @else { span.unproven { "not read" } } }
                    td { (short(&v.validator)) }
                    td.n { @match v.tip_height { Some(h) => (h), None => "-" } }
                    td.n { (percent(u64::from(v.vtrust_ppm))) }
                    td.n { (since(committed.get(&v.validator).copied())) }
                    td.n { (since(fold.and_then(|f| f.last_weights.as_ref()).map(|w| w.chain_block))) }
                    td { @match fold.and_then(|f| f.last_weights.as_ref()) {
                        Some(w) => (weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied()))),
                        None => "none",
                    } }
                    td {
                        @if v.equivocated { span.bad { "no: equivocated" } }
                        @else if let Some(h) = v.invalid_at { span.bad { "no: invalid block " (h) } }
                        @else if v.n_disagreements > 0 { span.bad { (v.n_disagreements) " of " (v.n_compared) " verdicts differ" } }
                        @else { "yes (" (v.n_compared) " compared)" }
                    }
                }
            }
        }
    })
}

/// The most matches a node's miners page lists per miner: its newest ones (a champion
/// plays every match; the matches page has them all).
pub const MATCHES_PER_MINER: usize = 8;

/// Miners on one page of `miners.html` as a node serves it.
pub const MINERS_PER_PAGE: usize = 100;

/// The explorer's page of a miner (`explorer.html` at the site's root, beside this page).
fn explorer_link(hotkey: &str) -> String {
    format!("explorer.html#miner={}", url::form_urlencoded::byte_serialize(hotkey.as_bytes()).collect::<String>())
}

/// The hotkeys of the queue, if it is known.
fn queued_hotkeys(queue: Option<&[Queued]>) -> impl Iterator<Item = String> + '_ {
    queue.unwrap_or_default().iter().map(|queued| queued.hotkey.clone())
}

/// The pages of the miners page as a node serves it (at least one, empty).
fn miner_pages(named: usize) -> usize {
    named.div_ceil(MINERS_PER_PAGE).max(1)
}

/// How many pages page `name` has as a node serves it: what a reader asking for a page
/// past the last is told.
pub fn pages_of(name: &str, replay: &Replay, chain: &FromChain) -> Result<usize, SpillFileError> {
    Ok(match name {
        "matches.html" => match_pages(replay.state.matches.len()),
        "miners.html" => miner_pages(miners_named(replay, queued_hotkeys(chain.queue.as_deref()))?.len()),
        _ => 1,
    })
}

/// Why a commitment was not played, in words.
fn skip_reason(skip: &SkipFold) -> String {
    let why = match skip.reason {
        crate::ledger::event::SkipReason::Duplicate => "a duplicate of an earlier commitment",
        crate::ledger::event::SkipReason::SameAsChampion => "the champion's own model",
    };
    format!("{}@{} (block {}): {why}", skip.model, skip.revision, skip.commit_block)
}

/// A score over `n` challenges with twice its points `points_x2`, and its count.
fn score_text(points_x2: u64, n: u64) -> String {
    match crate::replay::queries::Score::ppm(points_x2, n) {
        Some(ppm) => format!("{} ({n})", percent(ppm)),
        None => "- (0)".into(),
    }
}

/// `None` for a page past the last.
fn miners(replay: &Replay, chain: &FromChain, paging: Paging) -> Result<Markup, PageError> {
    let (state, queue) = (&replay.state, chain.queue.as_deref());
    // The rows shown: every miner on a published copy, one page of hotkeys on a node, so
    // the rows (each with its matches and their env tallies) do not grow with the logs;
    // only the hotkeys are gathered whole, to find the page's window.
    let named = miners_named(replay, queued_hotkeys(queue))?;
    let n_named = named.len();
    // With the matches each row keeps: all on a published copy, the newest on a node.
    let (window, nav, keep): (BTreeSet<String>, _, _) = match paging {
        Paging::Whole => (named, None, usize::MAX),
        Paging::Page(page) => {
            let last = miner_pages(n_named);
            let page = page.unwrap_or(1);
            if page == 0 || page > last {
                return Err(PageError::NotFound);
            }
            let first = (page - 1) * MINERS_PER_PAGE;
            let window = named.into_iter().skip(first).take(MINERS_PER_PAGE).collect();
            (window, Some((page, last, first)), MATCHES_PER_MINER)
        }
    };
    let mut rows = miner_rows(replay, &window, keep)?;
    if let Some(champion) = state.champion.as_ref().filter(|champion| window.contains(&*champion.hotkey)) {
        rows.entry(champion.hotkey.to_string()).or_default().champion = true;
    }
    for (place, queued) in queue.unwrap_or_default().iter().enumerate() {
        if !window.contains(&queued.hotkey) {
            continue;
        }
        let row = rows.entry(queued.hotkey.clone()).or_default();
        row.queued = Some((place + 1, queued.commit_block));
        row.miner.get_or_insert_with(|| MinerRef {
            hotkey: queued.hotkey.clone(),
            uid: queued.uid,
            model: queued.model.clone(),
        });
    }
    let n_queued = queue.map_or(0, <[Queued]>::len);
    Ok(html! {
        @if let Some((page, last, first)) = nav {
            p #miner-pages {
                "Miners " ((first + 1).min(n_named)) " to " (first + rows.len()) " of " (n_named) ", by hotkey (page " (page) " of " (last) "). "
                @if page > 1 { a href=(format!("miners.html?page={}", page - 1)) { "previous" } " " }
                @if page < last { a href=(format!("miners.html?page={}", page + 1)) { "next" } }
            }
        }
        @match queue {
            Some(_) => p.muted {
                "Every miner the logs name, and the " (n_queued) " contender(s) "
                (if chain.queue_by_network { "a validator following the network (its champion, every model any log played) would play next" } else { "this validator will play next" })
                ", in order (oldest commitment first), as the chain's commitments said when this page was made."
            },
            None => p.muted { "Every miner the logs name. Queued contenders are known only from the chain: see " code.nowrap { "af mine status --chain SPEC --hotkey HOTKEY" } "." },
        }
        table #miners {
            tr {
                th { "miner" } th { "model" } th { "state" } th { "score against the other side in its newest match (challenges)" }
                th { "matches (the network's verdict as this miner's result; its W/L/D per env in each validator's log)" }
            }
            @for (hotkey, row) in &rows {
                tr data-miner=(hotkey) {
                    td {
                        @match &row.miner { Some(m) => (miner_cell(m)), None => code { (hotkey) } }
                        br; a.muted href=(explorer_link(hotkey)) { "transcripts, verified in your browser" }
                    }
                    td { @if let Some(m) = &row.miner { (model_text(&m.model)) } }
                    td {
                        @if row.champion { b { "champion" } }
                        @else if let Some((place, block)) = row.queued { "queued #" (place) " of " (n_queued) " (committed at block " (block) ")" }
                        @else if row.n_played > 0 { "played" }
                        @else { "skipped" }
                        @if let Some(block) = chain.committed.get(hotkey) { br; span.muted { "committed at block " (block) } }
                    }
                    td.score {
                        @if let Some(score) = &row.score {
                            b { (score_text(score.points_x2, score.n)) } br;
                            @for (env, points, n) in &score.per_env { span.nowrap { (env) " " (score_text(*points, *n)) } " " }
                            br; span.muted { "last played " (date(score.started_ms)) ", " (score.n_logs) " log(s)" }
                        } @else { span.muted { "not played" } }
                    }
                    td {
                        @if row.n_played > row.played.len() {
                            div.muted {
                                (row.n_played) " matches: " (row.n_won) " won, " (row.n_lost) " lost; the newest "
                                (row.played.len()) " (all on the matches page):"
                            }
                        }
                        @for shown in &row.played {
                            div.played {
                                a href=(paging.href(shown.i)) { "match " (shown.i + 1) }
                                " as " (if shown.as_contender { "contender" } else { "champion" }) ": "
                                (match shown.result { Some(true) => "won", Some(false) => "lost", None => "open" }) " (the network's verdict)"
                                @for (validator, envs) in &shown.logs {
                                    div.muted data-log=(validator) {
                                        "in " (short(validator)) "'s log: "
                                        @for (k, (env, w, l, d)) in envs.iter().enumerate() { @if k > 0 { " · " } (env) " " (w) "/" (l) "/" (d) }
                                    }
                                }
                                @if shown.n_logs > shown.logs.len() { div.muted { "and " (shown.n_logs - shown.logs.len()) " more logs (the matches page has each)" } }
                            }
                        }
                        @for skip in &row.skipped { div.muted { "not played: " (skip_reason(skip)) } }
                    }
                }
            }
        }
    })
}

fn matches(replay: &Replay, identities: &Identities, paging: Paging) -> Result<Markup, PageError> {
    let state = &replay.state;
    let n = state.matches.len();
    let (first, shown, nav) = match paging {
        Paging::Whole => (0, n, None),
        Paging::Page(page) => {
            let last = match_pages(n);
            let page = page.unwrap_or(last);
            if page == 0 || page > last {
                return Err(PageError::NotFound);
            }
            let first = (page - 1) * MATCHES_PER_PAGE;
            (first, MATCHES_PER_PAGE.min(n - first), Some((page, last)))
        }
    };
    let mut shown_matches = Vec::with_capacity(shown.min(MATCHES_PER_PAGE));
    for (n, m) in (first..).zip(state.matches.iter_from(first).take(shown)) {
        shown_matches.push(network_match(replay, identities, paging, n, &m?)?);
    }
    Ok(html! {
        @if state.matches.is_empty() { p.muted { "No match yet." } }
        @if let Some((page, last)) = nav {
            p #match-pages {
                "Matches " (first + 1) " to " (first + shown) " of " (n) ", oldest first (page " (page) " of " (last) "). "
                @if page > 1 { a href=(format!("matches.html?page={}", page - 1)) { "older" } " " }
                @if page < last { a href=(format!("matches.html?page={}", page + 1)) { "newer" } " " }
                @if page < last { a href="matches.html" { "newest" } }
            }
        }
        p.muted {
            "Each validator plays its own challenges, so its tallies and the ratio it sets (the geometric mean of "
            "the contender's win rates over its envs) differ. The network's ratio to beat is the lower median of "
            "the ratios set by the validators that voted for the winner with vTrust above zero (ledger-spec/06)."
        }
        table #matches {
            tr {
                th { "match" } th { "contender" } th { "champion" } th { "validator" } th { "its verdict" }
                th { "contender's W/L/D per env (decision)" } th { "challenges" } th { "ratio it set" }
            }
            @for rows in &shown_matches { (rows) }
        }
    })
}

/// The rows of the state's match `m`, number `n`: one per log that played it, with its
/// tallies, and a row of links to its transcripts.
fn network_match(
    replay: &Replay,
    identities: &Identities,
    paging: Paging,
    n: usize,
    m: &NetworkMatch,
) -> Result<Markup, SpillFileError> {
    let total = m.for_ppm + m.against_ppm;
    let plays = replay.state.matches.plays(&m.contender.hotkey, &m.champion.hotkey)?;
    let mut played_by = Vec::with_capacity(plays.len());
    for (validator, match_id) in &plays {
        if let Some(fold) = played(replay, validator, match_id)? {
            played_by.push((validator, match_id, fold));
        }
    }
    let rows = played_by.len().max(1);
    Ok(html! {
        @for (i, (validator, match_id, played)) in played_by.iter().enumerate() {
            tr id=[(i == 0).then(|| format!("m-{n}"))] data-match=(n) data-validator=(validator) {
                @if i == 0 {
                    td rowspan=(rows) {
                        b { "match " (n + 1) } br;
                        (date(m.first_started_ms)) br;
                        b { @match m.verdict {
                            Some(NetworkVerdict::ContenderWon) => "contender won",
                            Some(NetworkVerdict::ChampionStays) => "champion stays",
                            None => "undecided",
                        } }
                        @if total > 0 {
                            br; span.muted { (percent(m.for_ppm * 1_000_000 / total)) " of the voting vTrust for the contender" }
                        }
                    }
                    td rowspan=(rows) { (miner_cell(&m.contender)) br; (model_text(&m.contender.model)) }
                    td rowspan=(rows) { (miner_cell(&m.champion)) br; (model_text(&m.champion.model)) }
                }
                td {
                    (validator_cell(validator, identities)) br; span.muted { "match id " (short(match_id)) }
                    @if let Paging::Page(_) = paging { br; a href=(format!("match.html?id={}", match_id.to_hex())) { "answers side by side" } }
                }
                td { @match &played.decided { Some(d) => (if d.contender_won { "contender won" } else { "champion stays" }), None => "open" } }
                td { @for (env, e) in &played.env_folds { div { (env) " " (e.wins) "/" (e.losses) "/" (e.draws) " (" (decision(e.decision)) ")" } } }
                td.n { (played.env_folds.values().map(|e| u64::from(e.wins + e.losses + e.draws)).sum::<u64>()) }
                td.n { @match &played.decided { Some(d) => (percent(u64::from(d.new_ratio_to_beat_ppm))), None => "-" } }
            }
        }
        tr.muted data-contender=(m.contender.hotkey) { td colspan="8" {
            "Transcripts, both answers of each challenge with every proof checked in your browser: "
            a href=(explorer_link(&m.contender.hotkey)) { "the contender's" } ", "
            a href=(explorer_link(&m.champion.hotkey)) { "the champion's" } "; offline: "
            code.nowrap { "af mirror --from URL --data DIR" } " (URL: this site's address, the folder holding af/v1/), then "
            @if !plays.is_empty() { "one command per log that played it:" }
            @for (_, match_id) in &plays {
                br; code { "af transcripts --data DIR --miner " (m.contender.hotkey) " --match " (match_id.to_hex()[..16]) }
            }
            @if !plays.is_empty() { br; }
            @if let Paging::Page(_) = paging {
                "(from this node: "
                a href=(format!("af/v1/transcripts?miner={}", url::form_urlencoded::byte_serialize(m.contender.hotkey.as_bytes()).collect::<String>())) { "the contender's entries as JSON" } ")."
            }
        } }
    })
}

fn history(replay: &Replay, identities: &Identities) -> Result<Markup, SpillFileError> {
    let state = &replay.state;
    let points = ratio_points(&state.matches, RATIO_POINTS)?;
    let steps = network_ratio_steps(replay)?;
    let vtrust = vtrust_history(&replay.folds, &state.matches, &DEFAULT_RATIO_PARAMS, VTRUST_POINTS)?;
    // One color per validator on both charts, in the state's order.
    let colors: BTreeMap<ValidatorKey, usize> =
        state.validators.iter().enumerate().map(|(i, v)| (v.validator, i)).collect();
    Ok(html! {
        h2 { "Champions" }
        @if state.champion_history.is_empty() { p.muted { "No champion yet." } }
        table #champions {
            tr { th { "champion" } th { "model" } th { "crowned" } th { "reign" } }
            @for (i, change) in state.champion_history.iter().enumerate() {
                @let until = state.champion_history.get(i + 1).map(|next| next.at_time_ms);
                tr {
                    td { (miner_cell(&change.champion)) }
                    td { (model_text(&change.champion.model)) }
                    td { (date(change.at_time_ms)) }
                    td { @match until { Some(u) => (duration(u.saturating_sub(change.at_time_ms))), None => "current" } }
                }
            }
        }
        h2 { "Ratio to beat over chain blocks" }
        @if points.is_empty() { p.muted { "No match decided at a chain block yet." } }
        @else { (ratio_chart(&points, &steps, &colors, identities)) }
        h2 { "vTrust over chain blocks" }
        @if vtrust.is_empty() { p.muted { "No match started at a chain block yet." } }
        @else {
            p.muted { "Each point is what a replay of every log cut back to the matches started at or before that block gives." }
            (vtrust_chart(&vtrust, &colors, identities))
        }
        h2 { "vTrust now" }
        table #vtrust {
            tr { th { "validator" } th { "ledger key" } th { "vTrust" } }
            @for v in &state.validators {
                tr {
                    td { @if identities.contains_key(&v.validator) { (validator_cell(&v.validator, identities)) } @else { span.unproven { "not read from a chain" } } }
                    td { (short(&v.validator)) }
                    td.n { (percent(u64::from(v.vtrust_ppm))) }
                }
            }
        }
    })
}

/// Points of the vTrust chart (each one a replay of the logs' prefixes).
const VTRUST_POINTS: usize = 48;

/// The most points the ratio chart draws: two per pixel column of its plot, whatever the
/// history holds.
const RATIO_POINTS: usize = 1_280;

#[cfg(test)]
#[path = "pages_tests.rs"]
mod tests;
