//! The pages' tests: paging, and what each page says of where its figures come from.

use super::*;
use crate::replay::combine::{NetworkMatches, NetworkState};
use crate::replay::records::NetworkMatch;
use crate::replay::spill_file::{CacheSize, SpillFile};

fn miner(i: usize) -> MinerRef<crate::replay::records::Name> {
    MinerRef { hotkey: format!("5Miner{i}").into(), uid: i as u16, model: format!("m/{i}").into() }
}

fn replay_of(n: usize) -> Replay {
    let matches: Vec<NetworkMatch> = (0..n)
        .map(|i| NetworkMatch {
            contender: miner(i + 1),
            champion: miner(0),
            first_started_ms: 1_000 + i as u64,
            votes: Vec::new(),
            for_ppm: 0,
            against_ppm: 0,
            verdict: None,
        })
        .collect();
    replay_with(matches)
}

fn replay_with(matches: Vec<NetworkMatch>) -> Replay {
    let cold = SpillFile::temporary(CacheSize::AUDIT).unwrap();
    let state = NetworkState {
        validators: Vec::new(),
        matches: NetworkMatches::written(&cold, &matches).unwrap(),
        champion: None,
        champion_history: Vec::new(),
        ratio_set_ppm: 500_000,
        ratio_set_at_block: 0,
        weights: Vec::new(),
        discrepancies: Vec::new(),
        n_discrepancies_omitted: 0,
    };
    Replay {
        folds: Vec::new(),
        state_hash: crate::replay::state_hash(&state).unwrap(),
        state,
        n_blocks_folded: 0,
        n_bytes_folded: 0,
        n_chains_from_snapshot: 0,
        ratio_params: DEFAULT_RATIO_PARAMS,
        recounted: false,
    }
}

/// The contenders a rendered matches page shows.
fn shown(html: &str) -> Vec<usize> {
    html.split("data-contender=\"5Miner").skip(1).map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap()).collect()
}

#[test]
fn a_node_serves_the_matches_a_page_at_a_time_and_a_published_copy_whole() {
    let replay = replay_of(250);
    let page = |paging| render("matches.html", &replay, &FromChain::default(), paging);
    let newest = page(Paging::Page(None)).unwrap();
    assert_eq!(shown(&newest), (201..=250).collect::<Vec<_>>());
    assert!(newest.contains("Matches 201 to 250 of 250"), "{newest}");
    assert!(newest.contains("href=\"matches.html?page=2\">older"));
    assert_eq!(shown(&page(Paging::Page(Some(1))).unwrap()), (1..=100).collect::<Vec<_>>());
    assert_eq!(shown(&page(Paging::Page(Some(2))).unwrap()), (101..=200).collect::<Vec<_>>());
    assert!(matches!(page(Paging::Page(Some(0))), Err(PageError::NotFound)));
    assert!(matches!(page(Paging::Page(Some(4))), Err(PageError::NotFound)));
    let whole = page(Paging::Whole).unwrap();
    assert_eq!(shown(&whole), (1..=250).collect::<Vec<_>>());
    assert!(!whole.contains("af/v1/transcripts?") && newest.contains("af/v1/transcripts?miner=5Miner250"));
    // Both sides of each match link the explorer, on a node and on a published copy.
    for html in [&newest, &whole] {
        assert!(html.contains("href=\"explorer.html#miner=5Miner250\">the contender's"), "{html}");
        assert!(html.contains("href=\"explorer.html#miner=5Miner0\">the champion's"));
    }
    assert_eq!(match_pages(0), 1);
    assert!(page(Paging::Page(None)).is_ok());
    assert_eq!(Paging::Page(None).href(150), "matches.html?page=2#m-150");
    assert_eq!(Paging::Whole.href(150), "matches.html#m-150");
}

#[test]
fn an_empty_log_has_one_page_of_matches() {
    let replay = replay_of(0);
    let html = render("matches.html", &replay, &FromChain::default(), Paging::Page(None)).unwrap();
    assert!(html.contains("No match yet."));
}

#[test]
fn a_nodes_miners_page_lists_a_page_of_miners_each_with_its_newest_matches_and_counts_them_all() {
    let replay = replay_of(300);
    let champion_row = |html: &str| {
        let start = html.find("data-miner=\"5Miner0\"").unwrap();
        let end = html[start..].find("</tr>").unwrap();
        html[start..start + end].to_string()
    };
    let node = render("miners.html", &replay, &FromChain::default(), Paging::Page(None)).unwrap();
    let row = champion_row(&node);
    assert_eq!(row.matches("as champion").count(), MATCHES_PER_MINER, "{row}");
    assert!(row.contains("300 matches: 0 won, 0 lost; the newest 8"), "{row}");
    assert!(row.contains("matches.html?page=3#m-299") && !row.contains("#m-291\""), "{row}");
    // Each miner's row links its transcripts in the explorer, which checks their proofs.
    assert!(row.contains("href=\"explorer.html#miner=5Miner0\""), "{row}");
    // 301 miners, 100 rows a page in hotkey order: every contender's row, with its
    // one match, on exactly one page.
    assert!(node.contains("Miners 1 to 100 of 301, by hotkey (page 1 of 4)"), "{node}");
    let page = |k| render("miners.html", &replay, &FromChain::default(), Paging::Page(Some(k)));
    assert_eq!(node, page(1).unwrap());
    let mut rows = Vec::new();
    for k in 1..=4 {
        let html = page(k).unwrap();
        let on_page: Vec<String> =
            html.split("data-miner=\"").skip(1).map(|rest| rest[..rest.find('"').unwrap()].to_string()).collect();
        assert_eq!(on_page.len(), if k < 4 { 100 } else { 1 }, "page {k}");
        assert_eq!(html.matches("as contender").count(), on_page.iter().filter(|m| *m != "5Miner0").count());
        rows.extend(on_page);
    }
    let mut every: Vec<String> = (0..=300).map(|i| format!("5Miner{i}")).collect();
    every.sort();
    assert_eq!(rows, every);
    assert!(page(4).unwrap().contains("href=\"miners.html?page=3\">previous"));
    assert!(matches!(page(0), Err(PageError::NotFound)));
    assert!(matches!(page(5), Err(PageError::NotFound)));
    assert_eq!(pages_of("miners.html", &replay, &FromChain::default()).unwrap(), 4);
    let whole = render("miners.html", &replay, &FromChain::default(), Paging::Whole).unwrap();
    let row = champion_row(&whole);
    assert_eq!(row.matches("as champion").count(), 300);
    assert!(!row.contains("the newest"));
}

#[test]
fn the_ratio_chart_draws_no_more_points_than_its_bound() {
    let mut replay = replay_of(3_000);
    replay.state.matches = crate::replay::queries::tests::sawtooth(3_000);
    let html = render("history.html", &replay, &FromChain::default(), Paging::Page(None)).unwrap();
    assert!(html.matches("<circle").count() <= RATIO_POINTS);
}

#[test]
fn the_vtrust_chart_draws_a_line_per_validator_with_each_point() {
    let (a, b) = (ValidatorKey([1; 32]), ValidatorKey([2; 32]));
    let history = vec![(100, vec![(a, 1_000_000), (b, 1_000_000)]), (250, vec![(a, 1_000_000), (b, 800_000)])];
    let colors = [(a, 0), (b, 1)].into_iter().collect();
    let identities: Identities = [(a, (Some(3), "5ValidatorA".to_string()))].into_iter().collect();
    let svg = vtrust_chart(&history, &colors, &identities).into_string();
    // The legend names a validator as the other pages do: uid and hotkey where known,
    // the ledger key on hover; a validator the chain did not name, by its ledger key.
    assert!(svg.contains("uid 3") && svg.contains("5ValidatorA") && svg.contains(&format!("ledger key {a}")), "{svg}");
    assert!(svg.contains(&b.to_hex()[..8]), "{svg}");
    assert_eq!(svg.matches("<g data-validator=").count(), 2, "{svg}");
    assert!(svg.contains(&format!("data-validator=\"{}\"", b.to_hex())));
    assert!(svg.contains("data-block=\"250\" data-ppm=\"800000\""), "{svg}");
    assert!(svg.contains("block 100") && svg.contains("block 250"));
    // Equal lines do not hide each other: the second is dashed.
    assert!(svg.contains("stroke-dasharray=\"none\"") && svg.contains("stroke-dasharray=\"10 5\""), "{svg}");
    // The ratio chart shares the frame, from 50% up: its floor sits on the x axis.
    let ratio = ratio_chart(&[(a, vec![(100, 500_000), (250, 720_000)])], &[], &colors, &identities).into_string();
    assert!(ratio.contains("id=\"ratio-chart\"") && ratio.contains("data-block=\"250\" data-ppm=\"720000\""));
    assert!(ratio.contains("cx=\"40.0\" cy=\"200.0\""), "{ratio}");
}

#[test]
fn blocks_since_count_to_the_chain_head_where_one_was_read() {
    let replay = replay_of(3);
    let read = FromChain { head: Some(104), ..FromChain::default() };
    let html = render("subnet.html", &replay, &read, Paging::Whole).unwrap();
    assert!(html.contains("counted to chain block 104, the chain's head"), "{html}");
    let html = render("subnet.html", &replay, &FromChain::default(), Paging::Whole).unwrap();
    assert!(html.contains("the newest any log names: no chain was read"), "{html}");
}

/// The history's ratio chart: each validator's votes as its own dots (two validators
/// setting 61.8% and 65.6% in one match are not one line rising), and the network's
/// ratio to beat as the combine's rule sets it: the lower median of the winning votes.
#[test]
fn the_ratio_chart_draws_each_validators_votes_apart_and_the_networks_ratio() {
    use crate::replay::combine::{ChampionChange, ValidatorSummary};
    use crate::replay::records::{NetworkVerdict, Vote};
    let (a, b) = (ValidatorKey([1; 32]), ValidatorKey([2; 32]));
    let vote = |v: ValidatorKey, ppm: u32, block: u64| Vote {
        validator: std::sync::Arc::new(v),
        contender_won: true,
        new_ratio_to_beat_ppm: ppm,
        decided_time_ms: 5_000,
        chain_block: block,
    };
    let crowning = NetworkMatch {
        contender: miner(1),
        champion: miner(0),
        first_started_ms: 1_000,
        votes: vec![vote(a, 618_000, 800), vote(b, 656_000, 818)],
        for_ppm: 2_000_000,
        against_ppm: 0,
        verdict: Some(NetworkVerdict::ContenderWon),
    };
    let mut replay = replay_with(vec![crowning]);
    let summary = |validator| ValidatorSummary {
        validator,
        tip_height: Some(1),
        tip_hash: Some(crate::bytes::Hash32([1; 32])),
        n_events: 1,
        n_transcripts: 0,
        n_matches: 1,
        invalid_at: None,
        equivocated: false,
        n_false_reports: 0,
        proofs_by_kind: Vec::new(),
        n_compared: 1,
        n_disagreements: 0,
        vtrust_ppm: 1_000_000,
    };
    replay.state.validators = vec![summary(a), summary(b)];
    replay.state.champion_history = vec![
        ChampionChange { champion: miner(0), by_match: None, at_time_ms: 1_000 },
        ChampionChange { champion: miner(1), by_match: Some(("5Miner1".into(), "5Miner0".into())), at_time_ms: 5_000 },
    ];
    assert_eq!(crate::replay::queries::network_ratio_steps(&replay).unwrap(), vec![(800, 618_000)], "the lower median");
    let html = render("history.html", &replay, &FromChain::default(), Paging::Whole).unwrap();
    let chart = &html[html.find("id=\"ratio-chart\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    for v in [a, b] {
        assert!(chart.contains(&format!("<g data-validator=\"{}\"", v.to_hex())), "{chart}");
    }
    assert!(chart.contains("id=\"network-ratio\""), "{chart}");
    assert!(html.contains("the network's ratio to beat, as each crowning set it"), "a legend");
    assert!(chart.contains("text-anchor=\"end\">block 818"), "the last block's label ends at the axis: {chart}");
}

#[test]
fn each_log_that_played_a_match_has_its_transcripts_command_on_a_line_of_its_own() {
    use crate::synthetic_logs::{write_network, NetworkSpec};
    let dir = tempfile::tempdir().unwrap();
    let store = crate::ledger::Store::create(dir.path()).unwrap();
    write_network(&store, &NetworkSpec::small(2)).unwrap();
    let replay =
        crate::replay::replay(&store, &crate::envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {})
            .unwrap();
    let html = render("matches.html", &replay, &FromChain::default(), Paging::Whole).unwrap();
    let commands = html.matches("<br><code>af transcripts --data DIR --miner 5SynthPerfect --match ").count();
    assert_eq!(commands, 2, "two logs played the first match, a line each: {html}");
}
