//! Each validator's vTrust as the logs stood at past chain blocks (the history page's
//! chart): what `combine::vtrust_by_combines` defines, a combine over every log cut back
//! at each block, computed in one read of each log and one of the combine's plays. It
//! holds one pair's votes and a few numbers per point, however long the history is; a
//! combine per point would hold every cut log's matches, and read them once per point.

use super::combine::{against_others, NetworkMatches, Play, PlayKey, RatioWalk};
use super::fold::ChainFold;
use super::records::Name;
use super::spill_file::SpillFileError;
use super::vtrust::{self, VtrustPoint};
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use std::collections::BTreeMap;

/// Each validator's vTrust at up to `max_points` (at least 2) chain blocks at which a
/// match started: the first and the last such block, and between them the last such
/// block at or before each of evenly spaced blocks. `matches` is the state combined from
/// `folds`, whose combine's plays are read from the file. Equal to
/// `combine::vtrust_by_combines(folds, legacy, blocks)` over the blocks it picks.
pub fn vtrust_history(
    folds: &[ChainFold],
    matches: &NetworkMatches,
    legacy: &RatioParams,
    max_points: usize,
) -> Result<Vec<VtrustPoint>, SpillFileError> {
    let plays = Plays(matches.snapshot());
    let blocks = pick_blocks(&plays, max_points)?;
    if blocks.is_empty() {
        return Ok(Vec::new());
    }
    let mut folds: Vec<&ChainFold> = folds.iter().collect();
    folds.sort_by_key(|f| f.validator);
    let cuts: Vec<Cut> = folds.iter().map(|f| Cut::of(f, &blocks, legacy)).collect::<Result<_, _>>()?;

    // Per point: who equivocated (as proven in any log cut there), then vTrust from
    // proofs alone.
    let mut equivocated_from: BTreeMap<ValidatorKey, usize> = BTreeMap::new();
    for (fold, cut) in folds.iter().zip(&cuts) {
        for found in fold.equivocations.iter() {
            let found = found?;
            if let Some(k) = cut.first_within(found.recorded_at.0) {
                let from = equivocated_from.entry(found.accused).or_insert(k);
                *from = (*from).min(k);
            }
        }
    }
    let base: Vec<BTreeMap<ValidatorKey, u32>> = (0..blocks.len())
        .map(|k| {
            folds
                .iter()
                .zip(&cuts)
                .map(|(fold, cut)| {
                    let equivocated = equivocated_from.get(&fold.validator).is_some_and(|from| *from <= k);
                    (fold.validator, vtrust::from_proofs(cut.invalid[k] || equivocated, cut.proofs[k]))
                })
                .collect()
        })
        .collect();

    // A pair at a time, in the combine's order: each validator's vote at each point is its
    // last decided play of the pair started at or before the point's block.
    let mut compared: Vec<BTreeMap<ValidatorKey, (u64, u64)>> = vec![BTreeMap::new(); blocks.len()];
    let mut pair: Option<PairVotes> = None;
    plays.each(&mut |(contender, champion, validator, _), play| {
        if pair.as_ref().is_some_and(|p| (&p.key.0, &p.key.1) != (contender, champion)) {
            pair.take().expect("checked above").compare(&base, &mut compared);
        }
        let votes = pair
            .get_or_insert_with(|| PairVotes { key: (contender.clone(), champion.clone()), votes: BTreeMap::new() });
        if let Some((_, contender_won, _, _)) = play.decided {
            let at = votes.votes.entry(*validator).or_insert_with(|| vec![None; blocks.len()]);
            for word in &mut at[first_point(&blocks, play.chain_block)..] {
                *word = Some(contender_won);
            }
        }
    })?;
    if let Some(done) = pair.take() {
        done.compare(&base, &mut compared);
    }

    Ok(blocks
        .iter()
        .enumerate()
        .map(|(k, block)| {
            let vtrust = folds
                .iter()
                .map(|fold| {
                    let (n, bad) = compared[k].get(&fold.validator).copied().unwrap_or((0, 0));
                    (fold.validator, vtrust::after_disagreement(base[k][&fold.validator], n, bad))
                })
                .collect();
            (*block, vtrust)
        })
        .collect())
}

/// The first point whose block is at or after `block`: a play started at `block` is in
/// that cut and every later one (`blocks.len()` if in none).
fn first_point(blocks: &[u64], block: u64) -> usize {
    blocks.partition_point(|b| *b < block)
}

/// The combine's plays by pair, as its snapshot holds them (by pair, then validator,
/// then id): the same index the pages read.
struct Plays<'a>(&'a super::spill_snapshot::SpillSnapshot);

impl Plays<'_> {
    /// Hands every play to `each` in key order; an error if one did not read back.
    fn each(&self, each: &mut dyn FnMut(&PlayKey, &Play)) -> Result<(), SpillFileError> {
        for entry in self.0.state_play_entries::<(PlayKey, Play)>() {
            let (key, play) = entry?;
            each(&key, &play);
        }
        Ok(())
    }
}

/// The blocks of the points: two reads of the plays' start blocks (their range, then the
/// last one at or before each evenly spaced block), holding `max_points` blocks.
fn pick_blocks(plays: &Plays<'_>, max_points: usize) -> Result<Vec<u64>, SpillFileError> {
    let (mut first, mut last) = (u64::MAX, 0u64);
    plays.each(&mut |_, play| {
        if play.chain_block > 0 {
            first = first.min(play.chain_block);
            last = last.max(play.chain_block);
        }
    })?;
    if last == 0 {
        return Ok(Vec::new());
    }
    let step = max_points.max(2) as u128 - 1;
    let targets: Vec<u64> = (0..=step).map(|i| first + (u128::from(last - first) * i / step) as u64).collect();
    let mut picked: Vec<u64> = vec![0; targets.len()];
    plays.each(&mut |_, play| {
        let b = play.chain_block;
        if b > 0 {
            // The targets at or after `b`: `b` is the latest start at or before the first
            // of them it exceeds what that target holds.
            for pick in &mut picked[first_point(&targets, b)..] {
                *pick = (*pick).max(b);
            }
        }
    })?;
    picked.dedup();
    Ok(picked)
}

/// One log cut at each point: whether it was invalid by then, and the proofs against it
/// (its own findings and its ratio findings) by then.
struct Cut {
    /// The last height the cut reaches (the highest start or decision among its
    /// matches), per point: `None` while it holds no match.
    heights: Vec<Option<u64>>,
    invalid: Vec<bool>,
    proofs: Vec<u64>,
}

impl Cut {
    fn of(fold: &ChainFold, blocks: &[u64], legacy: &RatioParams) -> Result<Cut, SpillFileError> {
        let n = blocks.len();
        let mut reached: Vec<Option<u64>> = vec![None; n];
        // Walks of the ratio over the cuts' matches, one per run of points that saw the
        // same matches: a log whose start blocks ascend keeps one walk going.
        let mut walks: Vec<(usize, RatioWalk, u64)> = vec![(0, RatioWalk::default(), 0)];
        for read in fold.matches.in_log_order() {
            let (_, m) = read?;
            let k = first_point(blocks, m.chain_block);
            if k == n {
                continue;
            }
            let height = m.decided.as_ref().map_or(m.started_height, |d| d.height);
            reached[k] = reached[k].max(Some(height));
            // Split the walk that covers point k, so that the points before it keep theirs.
            let at = walks.partition_point(|(from, _, _)| *from <= k) - 1;
            if walks[at].0 < k {
                let split = (k, walks[at].1.clone(), walks[at].2);
                walks.insert(at + 1, split);
            }
            for (_, walk, found) in walks.iter_mut().filter(|(from, _, _)| *from >= k) {
                *found += walk.step(fold.validator, &m, legacy, None);
            }
        }
        let mut heights = Vec::with_capacity(n);
        let mut so_far = None;
        for h in reached {
            so_far = so_far.max(h);
            heights.push(so_far);
        }
        let mut cut = Cut { heights, invalid: vec![false; n], proofs: vec![0; n] };
        // Each finding counts from the first point whose cut reaches its height on.
        let mut proofs_from = vec![0u64; n + 1];
        let mut from = |height: u64, count: u64| {
            proofs_from[cut.first_within(height).unwrap_or(n)] += count;
        };
        // The proofs the fold counts (`FindingCounts::proofs`), each from where it was found.
        for d in fold.discrepancies.iter().filter(|d| d.kind.is_proof()) {
            from(d.height, 1);
        }
        if let Some(h) = fold.first_omitted_height {
            from(h, fold.n_discrepancies_omitted);
        }
        let invalid_from = fold.invalid_at.and_then(|h| cut.first_within(h)).unwrap_or(n);
        let mut proofs = 0;
        for k in 0..n {
            proofs += proofs_from[k];
            cut.proofs[k] = proofs + walks[walks.partition_point(|(from, _, _)| *from <= k) - 1].2;
            cut.invalid[k] = k >= invalid_from;
        }
        Ok(cut)
    }

    /// The first point whose cut reaches `height`.
    fn first_within(&self, height: u64) -> Option<usize> {
        let k = self.heights.partition_point(|h| h.is_none_or(|cut| cut < height));
        (k < self.heights.len()).then_some(k)
    }
}

/// One pair's votes: each validator's word at each point (`None` before its first decided
/// play of the pair).
struct PairVotes {
    key: (Name, Name),
    votes: BTreeMap<ValidatorKey, Vec<Option<bool>>>,
}

impl PairVotes {
    fn compare(self, base: &[BTreeMap<ValidatorKey, u32>], compared: &mut [BTreeMap<ValidatorKey, (u64, u64)>]) {
        for (k, (base, compared)) in base.iter().zip(compared.iter_mut()).enumerate() {
            let votes: Vec<(ValidatorKey, bool)> =
                self.votes.iter().filter_map(|(v, words)| words[k].map(|won| (*v, won))).collect();
            against_others(&votes, &|v| base.get(v).is_some_and(|ppm| *ppm > 0), &mut |v, _, same, opposite| {
                let counts = compared.entry(*v).or_default();
                counts.0 += 1;
                counts.1 += u64::from(opposite > same);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::replay::combine::{combine, vtrust_by_combines};
    use crate::replay::records::tests_support::played;

    /// Logs whose start blocks go back and forth (so a cut holds matches from all over a
    /// log), with a win that sets a false ratio in one log and a validator outvoted on a
    /// quarter of the pairs: each point is still what a combine over the cut gives.
    #[test]
    fn logs_whose_start_blocks_go_back_and_forth_give_a_combine_at_each_point() {
        let folds: Vec<ChainFold> = (0..3u8)
            .map(|v| {
                let mut fold = ChainFold::new(ValidatorKey([v + 1; 32]));
                for i in 0..40u64 {
                    let mut m = played(i);
                    m.chain_block = ((i * 17) % 40 + 1) * 10 + u64::from(v);
                    if let Some(d) = m.decided.as_mut() {
                        d.contender_won = (v == 0 && i == 5) || (v == 2 && i.is_multiple_of(4));
                    }
                    fold.matches.insert(Hash32(*blake3::hash(&[&[v][..], &i.to_le_bytes()].concat()).as_bytes()), m);
                }
                fold
            })
            .collect();
        let cold =
            crate::replay::spill_file::SpillFile::temporary(crate::replay::spill_file::CacheSize::AUDIT).unwrap();
        let state = combine(&folds, &DEFAULT_RATIO_PARAMS, &cold).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for points in [2, 5, 13, 48] {
            let history = vtrust_history(&folds, &state.matches, &DEFAULT_RATIO_PARAMS, points).unwrap();
            assert!(history.len() >= 2 && history.len() <= points, "{history:?}");
            let blocks: Vec<u64> = history.iter().map(|(block, _)| *block).collect();
            assert_eq!((blocks[0], *blocks.last().unwrap()), (10, 402));
            assert_eq!(history, vtrust_by_combines(&folds, &DEFAULT_RATIO_PARAMS, &blocks).unwrap(), "{points} points");
            seen.extend(history.iter().flat_map(|(_, v)| v.iter().map(|(_, ppm)| *ppm)));
        }
        // Full trust, a proof's cost, and disagreement's: the cuts differ.
        assert!(seen.len() >= 3, "{seen:?}");
    }
}
