//! Logs over plain HTTP (ledger-spec/11-http.md): the static layout every reader agrees
//! on, the node's read-only API that serves it live, `af ledger publish` that writes it
//! as files, and `af mirror` that reads it back, verifying every block.

pub mod archive;
pub mod bodies;
mod charts;
pub mod folds;
pub mod layout;
pub mod mirror;
pub mod page_cache;
pub mod pages;
pub mod prune;
pub mod publish;
pub mod read_store;
pub mod server;

/// The file in a data directory that names a running node's HTTP address, so read
/// commands find the node when its store is locked.
pub const ADDRESS_FILE: &str = "http.addr";

/// The explorer's page and script (built from `scripts/explorer/` by its `npm run build`;
/// `.ci/run` checks the committed script is that build), embedded so that `af ledger
/// publish` writes them and `af node --http` serves them without npm.
pub const EXPLORER_HTML: &str = include_str!("explorer.html");
pub const EXPLORER_JS: &str = include_str!("explorer.js");
