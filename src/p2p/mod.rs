//! Validators as a network: each publishes its blocks, fetches and verifies every other
//! validator's log, keeps verified copies and catches equivocation with proof.
//! `protocol` is the IO-less state machine, `wire` its bytes, `codec` their streams, `blocks` the storage it
//! writes through; `net` is the libp2p actor that does the IO.

pub mod admission;
pub mod behaviour;
pub mod blocks;
pub mod chain_peers;
pub mod codec;
pub mod net;
pub mod node;
pub mod protocol;
pub mod wire;
