//! The sync protocol under a seeded network simulator with virtual time: random
//! topologies, message loss up to 30%, delays, duplicates and reordering. All logs must
//! converge; an equivocating validator must be caught by every honest node. A failing
//! run prints its seed (rerun with AF_TEST_SEED=N).

use crate::network_sim::{Node, Sim};
use af::ledger::block::{seal, SealedBlock};
use af::ledger::demo::demo_events;
use af::ledger::LedgerKey;
use af::p2p::blocks::BlockStore;
use af::p2p::protocol::Input;

fn keys(n: usize, salt: u8) -> Vec<LedgerKey> {
    (0..n)
        .map(|i| {
            LedgerKey::from_seed([
                i as u8 + 1,
                salt,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ])
        })
        .collect()
}

fn seeds(default_runs: u64) -> Vec<u64> {
    match std::env::var("AF_TEST_SEED") {
        Ok(seed) => vec![seed.parse().expect("AF_TEST_SEED is a number")],
        Err(_) => (1..=default_runs).collect(),
    }
}

#[test]
fn eight_validators_converge_under_loss_delay_duplication_and_reordering() {
    for seed in seeds(12) {
        let loss = [0.0, 0.1, 0.2, 0.3][(seed % 4) as usize];
        let n = 8;
        let mut sim = Sim::new(seed, n, 3, loss);
        let keys = keys(n, 1);
        // Each validator writes 10 blocks at random moments over the first 5 seconds.
        let mut writes: Vec<(u64, Node)> = Vec::new();
        for node in 0..n {
            for _ in 0..10 {
                writes.push((sim.rng.below(5_000), node));
            }
        }
        writes.sort();
        for (at, node) in writes {
            sim.run_until(at);
            sim.own_block(node, &keys[node], 3, 200);
        }
        let mut converged_at = None;
        for step in 1..=120 {
            sim.run_until(5_000 + step * 500);
            let reference = sim.tips(0);
            if reference.len() == n && (1..n).all(|node| sim.tips(node) == reference) {
                converged_at = Some(sim.now_ms);
                break;
            }
        }
        let converged_at = converged_at.unwrap_or_else(|| {
            let summary: Vec<usize> = (0..n).map(|node| sim.tips(node).len()).collect();
            panic!(
                "seed {seed} (loss {loss}): logs did not converge in 65 virtual seconds; chains per node {summary:?}"
            )
        });
        for node in 0..n {
            for (validator, tip) in sim.tips(node) {
                assert_eq!(tip.height, 9, "seed {seed}: node {node} holds {validator} to height {}", tip.height);
            }
            assert!(sim.evidence[node].is_empty(), "seed {seed}: no one equivocated");
        }
        assert_eq!(sim.rejected_gossip, 0, "seed {seed}: honest gossip is never rejected");
        eprintln!("seed {seed}: loss {loss}: converged at {converged_at} ms virtual");
    }
}

#[test]
fn an_equivocating_validator_is_caught_by_every_honest_node() {
    for seed in seeds(6) {
        let n = 6;
        let mut sim = Sim::new(seed, n, 3, 0.1);
        let honest = keys(n, 2);
        let cheat = LedgerKey::from_seed([99; 32]);
        let validator = cheat.validator();
        // Two blocks 0 of the cheat's chain, each given to half of the nodes.
        let forks: Vec<SealedBlock> = (0..2)
            .map(|fork| seal(cheat.signing_key(), None, fork, demo_events(&validator, 0, 2, 100)).unwrap())
            .collect();
        assert_ne!(forks[0].decoded().hash, forks[1].decoded().hash);
        for node in 0..n {
            sim.stores[node].append(&forks[node % 2]).unwrap();
            sim.input(node, Input::OwnBlock { validator, height: 0 });
            sim.own_block(node, &honest[node], 2, 200);
        }
        sim.run_until(30_000);
        for node in 0..n {
            assert_eq!(sim.evidence[node], vec![(validator, 0)], "seed {seed}: node {node} recorded the evidence once");
            assert_eq!(sim.syncs[node].forked().get(&validator), Some(&0));
            // The honest chains converged all the same.
            let honest_tips = sim.tips(node).into_iter().filter(|(v, _)| *v != validator).count();
            assert_eq!(honest_tips, n, "seed {seed}: node {node}");
        }
    }
}

/// A cheat's two branches from one genesis: `A1`, and `B1, B2`.
pub struct ForkBelowTip {
    pub validator: af::bytes::ValidatorKey,
    pub genesis: SealedBlock,
    pub a1: SealedBlock,
    pub b1: SealedBlock,
    pub b2: SealedBlock,
}

pub fn fork_below_tip(seed: u8) -> ForkBelowTip {
    let cheat = LedgerKey::from_seed([seed; 32]);
    let validator = cheat.validator();
    let genesis = seal(cheat.signing_key(), None, 1, demo_events(&validator, 0, 2, 100)).unwrap();
    let a1 = seal(cheat.signing_key(), Some(&genesis.tip()), 2, demo_events(&validator, 1, 2, 100)).unwrap();
    let b1 = seal(cheat.signing_key(), Some(&genesis.tip()), 3, demo_events(&validator, 1, 3, 100)).unwrap();
    let b2 = seal(cheat.signing_key(), Some(&b1.tip()), 4, demo_events(&validator, 2, 2, 100)).unwrap();
    ForkBelowTip { validator, genesis, a1, b1, b2 }
}

/// A fork below the tip: half the nodes hold the cheat's chain `G, A1`, half `G, B1, B2`.
/// A node holding `A1` that fetches height 2 from an honest peer gets `B2`, which does
/// not link to `A1`. The peer only relays the cheat's other branch: it must not be
/// blamed, and the fork must still be proven (evidence at height 1) everywhere.
#[test]
fn a_fork_below_the_tip_is_proven_without_blaming_the_honest_peers_that_relay_it() {
    for seed in seeds(6) {
        let n = 6;
        let mut sim = Sim::new(seed, n, 3, 0.1);
        let honest = keys(n, 3);
        let ForkBelowTip { validator, genesis, a1, b1, b2 } = fork_below_tip(98);
        for (node, key) in honest.iter().enumerate() {
            let branch: Vec<&SealedBlock> = if node % 2 == 0 { vec![&genesis, &a1] } else { vec![&genesis, &b1, &b2] };
            for block in &branch {
                sim.stores[node].append(block).unwrap();
            }
            sim.input(node, Input::OwnBlock { validator, height: branch.len() as u64 - 1 });
            sim.own_block(node, key, 2, 200);
        }
        sim.run_until(30_000);
        for node in 0..n {
            assert_eq!(sim.evidence[node], vec![(validator, 1)], "seed {seed}: node {node} recorded the evidence once");
            if node % 2 == 0 {
                // Holding A1, it learned of B1 only by asking for it (B2's tips are higher).
                assert!(sim.syncs[node].counters.forks_probed > 0, "seed {seed}: node {node} probed");
            }
            let honest_tips = sim.tips(node).into_iter().filter(|(v, _)| *v != validator).count();
            assert_eq!(honest_tips, n, "seed {seed}: node {node}");
        }
    }
}
