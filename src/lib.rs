//! `af`: validator node and audit toolkit for a subnet that ranks AI models by
//! head-to-head evaluation. Modules are listed in the order data flows through them:
//! environments make tasks, evaluation decides matches, the ledger records what happened,
//! the network carries it, replay folds every log back into state.

pub mod bytes;
pub mod chain;
pub mod envs;
pub mod evaluation;
pub mod ledger;
pub mod limits;
pub mod miner;
pub mod p2p;
pub mod replay;
pub mod validator;
