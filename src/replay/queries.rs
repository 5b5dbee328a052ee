//! Queries over a finished replay that the pages, the CLI and the audit read: a log's
//! play of a match, the newest chain block the logs name, the ratio each vote set, and
//! each miner's matches with their results and env tallies. They read through the
//! replay's folds and the state's list (and its index of plays by pair) and format
//! nothing: what to print is the reader's.

use super::records::{MatchFold, Name, NetworkVerdict, SkipFold};
use super::spill_file::SpillFileError;
use super::state_matches::NetworkMatches;
use super::Replay;
use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::event::MinerRef;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// What a reader draws from the replay: the value, or the replay's file failing to read.
type Read<T> = Result<T, SpillFileError>;

/// A record in one env: (env, wins, losses, draws) of the miner it belongs to.
pub type EnvRecord = (String, u32, u32, u32);

/// One of a miner's matches as its row shows it.
pub struct MinerMatch {
    /// The match's row on the matches page.
    pub i: usize,
    pub as_contender: bool,
    /// The network's verdict as this miner's result (`None`: open).
    pub result: Option<bool>,
    /// (contender, champion): where its env tallies are looked up.
    pub pair: (Name, Name),
    /// Its W/L/D per env as each log played it (up to [`LOGS_PER_MATCH`] logs), once
    /// looked up: each validator plays its own challenges, so their tallies differ.
    pub logs: Vec<(ValidatorKey, Vec<EnvRecord>)>,
    /// How many logs played it.
    pub n_logs: usize,
}

/// The most logs whose env tallies a miner's row lists per match (the matches page has
/// every log's).
pub const LOGS_PER_MATCH: usize = 4;

/// A miner's score against the champion it played in its newest match: a win 1, a draw
/// 1/2, a loss 0, over every challenge of every log that played the match, overall and
/// per env (the leaderboard's figures, with their sample counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Score {
    /// Twice the points (wins * 2 + draws), to stay in integers, and the challenges.
    pub points_x2: u64,
    pub n: u64,
    pub per_env: Vec<(String, u64, u64)>,
    /// When that match first started (ms), and how many logs played it.
    pub started_ms: u64,
    pub n_logs: usize,
}

impl Score {
    /// The score in parts per million (`None` over no challenge).
    pub fn ppm(points_x2: u64, n: u64) -> Option<u64> {
        (n > 0).then(|| points_x2 * 500_000 / n)
    }
}

/// One miner's row: what it is now and what it did.
#[derive(Default)]
pub struct MinerRow {
    pub miner: Option<MinerRef>,
    pub champion: bool,
    /// Its matches: how many, won, lost.
    pub n_played: usize,
    pub n_won: usize,
    pub n_lost: usize,
    /// Its newest matches (all of them on a published copy).
    pub played: VecDeque<MinerMatch>,
    /// The commitments of it the logs recorded not playing, each once.
    pub skipped: Vec<SkipFold>,
    /// Its score in its newest match, against the other side.
    pub score: Option<Score>,
    /// Its place in the queue (1-based) and its commitment's chain block.
    pub queued: Option<(usize, u64)>,
}

/// The rows of the miners in `window` (by hotkey): each one's matches in the state's
/// order (the newest `keep` listed, with the env tallies of its first log's play; all
/// counted), and the commitments the logs recorded not playing (each once).
pub fn miner_rows(replay: &Replay, window: &BTreeSet<String>, keep: usize) -> Read<BTreeMap<String, MinerRow>> {
    let mut rows: BTreeMap<String, MinerRow> = BTreeMap::new();
    for (i, m) in replay.state.matches.iter().enumerate() {
        let m = m?;
        let won = m.verdict.map(|v| v == NetworkVerdict::ContenderWon);
        for (miner, as_contender) in [(&m.contender, true), (&m.champion, false)] {
            if !window.contains(&*miner.hotkey) {
                continue;
            }
            let row = rows.entry(miner.hotkey.to_string()).or_default();
            row.miner = Some(miner.to_owned_strings());
            let result = won.map(|won| won == as_contender);
            row.n_played += 1;
            row.n_won += usize::from(result == Some(true));
            row.n_lost += usize::from(result == Some(false));
            if row.played.len() == keep {
                row.played.pop_front();
            }
            let pair = (m.contender.hotkey.clone(), m.champion.hotkey.clone());
            row.played.push_back(MinerMatch { i, as_contender, result, pair, logs: Vec::new(), n_logs: 0 });
        }
    }
    // The leaderboard's score: the newest match, every log that played it.
    for row in rows.values_mut() {
        let Some(newest) = row.played.back() else { continue };
        let (contender, champion) = &newest.pair;
        let plays = replay.state.matches.plays(contender, champion)?;
        let mut per_env: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (validator, id) in &plays {
            let Some(played) = played(replay, validator, id)? else { continue };
            for (env, e) in played.env_folds.iter() {
                let (w, d) = (u64::from(e.wins), u64::from(e.draws));
                let n = w + d + u64::from(e.losses);
                let mine = if newest.as_contender { w } else { n - w - d };
                let slot = per_env.entry(env.to_string()).or_default();
                *slot = (slot.0 + 2 * mine + d, slot.1 + n);
            }
        }
        let started_ms = replay.state.matches.iter_from(newest.i).next().transpose()?.map_or(0, |m| m.first_started_ms);
        row.score = Some(Score {
            points_x2: per_env.values().map(|v| v.0).sum(),
            n: per_env.values().map(|v| v.1).sum(),
            per_env: per_env.into_iter().map(|(env, (p, n))| (env, p, n)).collect(),
            started_ms,
            n_logs: plays.len(),
        });
    }
    // Env tallies only for the matches shown: each is a read of a log's match.
    for shown in rows.values_mut().flat_map(|row| row.played.iter_mut()) {
        let (contender, champion) = &shown.pair;
        let plays = replay.state.matches.plays(contender, champion)?;
        shown.n_logs = plays.len();
        for (validator, id) in plays.iter().take(LOGS_PER_MATCH) {
            let Some(played) = played(replay, validator, id)? else { continue };
            let envs = played.env_folds.iter().map(|(env, e)| {
                let (w, l) = if shown.as_contender { (e.wins, e.losses) } else { (e.losses, e.wins) };
                (env.to_string(), w, l, e.draws)
            });
            shown.logs.push((*validator, envs.collect()));
        }
    }
    for fold in &replay.folds {
        for skip in fold.skipped.iter() {
            let skip = skip?;
            if !window.contains(&skip.hotkey) {
                continue;
            }
            let row = rows.entry(skip.hotkey.clone()).or_default();
            // Each validator records its own skip of a commitment: listed once.
            let same = |s: &SkipFold| {
                (&s.model, &s.revision, s.commit_block, s.reason)
                    == (&skip.model, &skip.revision, skip.commit_block, skip.reason)
            };
            if !row.skipped.iter().any(same) {
                row.skipped.push(skip.clone());
            }
            row.miner.get_or_insert_with(|| MinerRef {
                hotkey: skip.hotkey.clone(),
                uid: skip.uid,
                model: format!("{}@{}", skip.model, skip.revision),
            });
        }
    }
    Ok(rows)
}

/// `validator`'s fold of match `id`.
pub fn played(replay: &Replay, validator: &ValidatorKey, id: &Hash32) -> Read<Option<Arc<MatchFold>>> {
    match replay.folds.iter().find(|f| f.validator == *validator) {
        Some(fold) => fold.matches.get(id),
        None => Ok(None),
    }
}

/// The newest chain block any log names: the pages' "now" for blocks-since figures
/// (a page folded from logs has no chain head of its own).
pub fn newest_chain_block(replay: &Replay) -> Read<u64> {
    let mut newest = 0;
    for f in &replay.folds {
        for c in f.commitments.iter() {
            newest = newest.max(c?.chain_block);
        }
        for m in f.matches.values() {
            newest = newest.max(m?.chain_block);
        }
        newest = newest.max(f.last_weights.as_ref().map_or(0, |w| w.chain_block));
    }
    Ok(newest)
}

/// A validator's points of the ratio chart: (chain block, ratio set) in block order.
pub type RatioPoints = (ValidatorKey, Vec<(u64, u32)>);

/// The ratio each validator's votes set, at the chain block each names, per validator (in
/// key order) and in block order: every one if there are at most `max` in all (at least
/// 2 a validator), else each validator gets an equal share of `max` and, for each of
/// that many halves of equal spans of chain blocks, keeps the lowest and the highest
/// ratio it set there, so its chart keeps each step's reach. Two passes over the state's
/// list (which may be in the spill file), holding at most `max` points.
pub fn ratio_points(matches: &NetworkMatches, max: usize) -> Read<Vec<RatioPoints>> {
    let each = |f: &mut dyn FnMut(&ValidatorKey, u64, u32)| -> Read<()> {
        for m in matches.iter() {
            for v in m?.votes.iter().filter(|v| v.chain_block > 0) {
                f(&v.validator, v.chain_block, v.new_ratio_to_beat_ppm);
            }
        }
        Ok(())
    };
    let (mut counts, mut first, mut last) = (BTreeMap::<ValidatorKey, usize>::new(), u64::MAX, 0u64);
    each(&mut |validator, block, _| {
        *counts.entry(*validator).or_default() += 1;
        first = first.min(block);
        last = last.max(block);
    })?;
    let share = (max / counts.len().max(1)).max(2);
    let spans = (share / 2) as u64;
    let width = last.saturating_sub(first) / spans.max(1) + 1;
    // Per validator: every point, or per span its lowest and highest, by (ratio, block).
    type Point = (u32, u64);
    enum Kept {
        All(Vec<(u64, u32)>),
        Reach(Vec<Option<(Point, Point)>>),
    }
    let mut kept: BTreeMap<ValidatorKey, Kept> = counts
        .iter()
        .map(|(v, &n)| {
            (*v, if n <= share { Kept::All(Vec::with_capacity(n)) } else { Kept::Reach(vec![None; spans as usize]) })
        })
        .collect();
    each(&mut |validator, block, ppm| match kept.get_mut(validator) {
        Some(Kept::All(points)) => points.push((block, ppm)),
        Some(Kept::Reach(reach)) => {
            let slot = &mut reach[((block - first) / width) as usize];
            let point = (ppm, block);
            *slot = Some(match *slot {
                None => (point, point),
                Some((low, high)) => (low.min(point), high.max(point)),
            });
        }
        // A validator the first pass did not see: the list changed between passes.
        None => {}
    })?;
    Ok(kept
        .into_iter()
        .map(|(validator, kept)| {
            let mut points = match kept {
                Kept::All(points) => points,
                Kept::Reach(reach) => reach
                    .into_iter()
                    .flatten()
                    .flat_map(|(low, high)| {
                        std::iter::once((low.1, low.0)).chain((high != low).then_some((high.1, high.0)))
                    })
                    .collect(),
            };
            points.sort_unstable();
            (validator, points)
        })
        .collect())
}

/// Every miner the logs name, and the `queued` ones, by hotkey: what the miners page lists.
pub fn miners_named(replay: &Replay, queued: impl Iterator<Item = String>) -> Read<BTreeSet<String>> {
    let mut named = BTreeSet::new();
    for m in replay.state.matches.iter() {
        let m = m?;
        for miner in [&m.contender, &m.champion] {
            if !named.contains(&*miner.hotkey) {
                named.insert(miner.hotkey.to_string());
            }
        }
    }
    for fold in &replay.folds {
        for skip in fold.skipped.iter() {
            named.insert(skip?.hotkey);
        }
    }
    named.extend(replay.state.champion.iter().map(|champion| champion.hotkey.to_string()));
    named.extend(queued);
    Ok(named)
}

/// The network's ratio to beat as each crowning set it (before decay), at the chain block
/// it was set, in block order: the combine's own rule ([`super::combine::crowning`]) over
/// the matches that crowned a champion, with every validator's vTrust. One point per
/// champion; crownings at no chain block are left out.
pub fn network_ratio_steps(replay: &Replay) -> Read<Vec<(u64, u32)>> {
    let state = &replay.state;
    let vtrust: BTreeMap<ValidatorKey, u32> = state.validators.iter().map(|v| (v.validator, v.vtrust_ppm)).collect();
    let crowned: BTreeSet<(&str, &str)> =
        state.champion_history.iter().filter_map(|c| c.by_match.as_ref()).map(|(c, ch)| (&**c, &**ch)).collect();
    let mut steps: Vec<(u64, u32)> = Vec::new();
    for m in state.matches.iter() {
        let m = m?;
        if crowned.contains(&(&*m.contender.hotkey, &*m.champion.hotkey)) {
            let set = super::combine::crowning(&m, |v| vtrust.get(v).copied().unwrap_or(0));
            steps.extend(set.set_ppm.filter(|_| set.at_block > 0).map(|ppm| (set.at_block, ppm)));
        }
    }
    steps.sort_unstable();
    Ok(steps)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::replay::records::{NetworkMatch, Vote};
    use crate::replay::spill_file::{CacheSize, SpillFile};

    /// `n` matches whose votes set a sawtooth of ratios, one a match at blocks 1,000 up
    /// by 2, with a spike at block 7,000, and a vote without a chain in each.
    pub(crate) fn sawtooth(n: u64) -> NetworkMatches {
        let validator = Arc::new(ValidatorKey([1; 32]));
        let vote = |block: u64, ppm: u32| Vote {
            validator: validator.clone(),
            contender_won: true,
            new_ratio_to_beat_ppm: ppm,
            decided_time_ms: 0,
            chain_block: block,
        };
        let miner = |i: u64| MinerRef { hotkey: format!("5Miner{i}").into(), uid: i as u16, model: "m".into() };
        let matches: Vec<NetworkMatch> = (0..n)
            .map(|i| {
                let ppm = if i == 3_000 { 999_999 } else { 500_000 + (i % 97) as u32 * 1_000 };
                NetworkMatch {
                    contender: miner(i + 1),
                    champion: miner(0),
                    first_started_ms: 1_000 + i,
                    votes: vec![vote(1_000 + i * 2, ppm), vote(0, 1)],
                    for_ppm: 0,
                    against_ppm: 0,
                    verdict: None,
                }
            })
            .collect();
        let cold = SpillFile::temporary(CacheSize::AUDIT).unwrap();
        NetworkMatches::written(&cold, &matches).unwrap()
    }

    #[test]
    fn the_ratio_points_keep_each_spans_reach_and_no_more_than_their_bound() {
        let matches = sawtooth(5_000);
        let one = |points: Vec<(ValidatorKey, Vec<(u64, u32)>)>| {
            assert_eq!(points.len(), 1, "one validator voted at chain blocks");
            points.into_iter().next().unwrap().1
        };
        let all = one(ratio_points(&matches, 20_000).unwrap());
        assert_eq!(all.len(), 5_000, "every vote at a chain block, none without");
        assert!(all.windows(2).all(|w| w[0] <= w[1]));
        let few = one(ratio_points(&matches, 100).unwrap());
        assert!(few.len() <= 100 && few.len() > 50, "{}", few.len());
        assert!(few.windows(2).all(|w| w[0] <= w[1]));
        assert!(few.iter().all(|p| all.binary_search(p).is_ok()), "only points that were set");
        assert!(few.contains(&(7_000, 999_999)), "the spike is its span's highest");
        assert_eq!(few.first().map(|p| p.0), Some(1_000));
        // 50 spans of 200 blocks: the last span's points are in the last 200 blocks.
        assert!(few.last().unwrap().0 + 200 > all.last().unwrap().0);
    }
}

/// A miner's match as one log played it (`af mine status`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LogMatch {
    pub validator: ValidatorKey,
    pub match_id: Hash32,
    /// "contender" or "champion".
    pub role: &'static str,
    /// The model (`MODEL@REVISION`) it played with, and its opponent.
    pub model: Name,
    pub opponent: Name,
    /// Where the match started in its log (height, event index): log order.
    pub started_at: (u64, u32),
    /// "contender won", "champion stayed", or none while open.
    pub verdict: Option<&'static str>,
    pub reason: Option<String>,
}

impl LogMatch {
    /// The newest match of `validator`'s log in which the miner played `model` as the
    /// contender: what that validator's queue means by "already played with this model".
    pub fn last_as_contender<'a>(rows: &'a [LogMatch], validator: &ValidatorKey, model: &str) -> Option<&'a LogMatch> {
        rows.iter()
            .filter(|row| row.validator == *validator && row.role == "contender" && *row.model == *model)
            .max_by_key(|row| row.started_at)
    }
}

/// Every match `hotkey` played in every log, log by log, each in its log's id order.
pub fn matches_in_logs(replay: &Replay, hotkey: &str) -> Read<Vec<LogMatch>> {
    let mut rows = Vec::new();
    for fold in &replay.folds {
        for read in fold.matches.iter() {
            let (id, m) = read?;
            let (role, own, opponent) = if *m.contender.hotkey == *hotkey {
                ("contender", &m.contender, &m.champion)
            } else if *m.champion.hotkey == *hotkey {
                ("champion", &m.champion, &m.contender)
            } else {
                continue;
            };
            rows.push(LogMatch {
                validator: fold.validator,
                match_id: id,
                role,
                model: own.model.clone(),
                opponent: opponent.hotkey.clone(),
                started_at: (m.started_height, m.started_event_idx),
                verdict: m.decided.as_ref().map(|d| if d.contender_won { "contender won" } else { "champion stayed" }),
                reason: m.verdict_reason(),
            });
        }
    }
    Ok(rows)
}
