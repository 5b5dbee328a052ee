//! Miners as validators see them: OpenAI-compatible chat completions over HTTP.
//! `client` is how a validator asks (IO at the edge), `server` and `policy` are our own
//! reference miners for tests, benchmarks and the devnet, `openai` the wire types,
//! `stats` the client's latency histograms.

pub mod client;
pub mod openai;
pub mod policy;
pub mod server;
pub mod stats;
