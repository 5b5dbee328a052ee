//! The validator: plays matches between miners over HTTP and records every transcript
//! and decision in our own block log. IO lives here; the decisions are made by the pure
//! `evaluation` module and every reward by the environments' own scorer.

pub mod anchor;
pub mod archiver;
pub mod checkpoints;
pub mod config;
pub mod config_checks;
pub mod discovery;
pub mod episode;
pub mod hotkey_swap;
pub mod key_rotation;
pub mod launch;
pub mod matchrun;
pub mod queue_reader;
pub mod ratio_show;
pub mod run;
pub mod service;
pub mod signed_elsewhere;
pub mod state;
pub mod upgrade;
pub mod writer;
