//! `af`: validator node and audit toolkit for a subnet that ranks AI models by
//! head-to-head evaluation. Modules are listed in the order data flows through them:
//! environments make tasks, evaluation decides matches, miners answer, the validator
//! records what happened in the ledger, the network carries it, replay folds every log
//! back into state, and the chain anchors it.

// Shared bounds and byte types.
pub mod limits;

/// The wall clock, read at the edges.
pub mod clock;

/// One memory budget for what outside parties can make a node hold.
pub mod budget;

pub mod bytes;

// What the node counts for operators (Prometheus), recorded by every later layer.
pub mod metrics;

/// Operator log lines, rate-limited per call site.
pub mod logging;

/// Outside text made safe to show at a terminal, one line or many.
pub mod display;

// Which consensus rules apply from which chain block: plain data, below every layer
// that applies it.
pub mod protocol;

// Tasks and rewards, pure.
pub mod envs;

// Stopping rules, match state, ratio to beat, pure.
pub mod evaluation;

// Miners over HTTP: the client and the reference miners.
pub mod miner;

// The validator loop: matches into our own log.
pub mod validator;

// The signed, hash-chained block log and its store.
pub mod ledger;

// Validators as a network: gossip and sync of every log.
pub mod p2p;

// Every log folded back into state: vTrust, verdicts, weights.
pub mod replay;

// The offline audit: findings with proofs, the commitment audit, the HTML report.
pub mod audit;

// Logs over plain HTTP: the layout, the node's API, publishing and mirroring.
pub mod http;

// Commitments and weights on chain.
pub mod chain;

// The devnet: the whole system on loopback, run and checked end to end.
pub mod devnet;

// Outside documents read within a bound.
pub mod input;

// Synthetic but real validator logs, for the demo, tests and benchmarks.
pub mod synthetic_logs;
