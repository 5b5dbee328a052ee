//! `af miner`: run a reference miner (an OpenAI-compatible server on loopback).

use af::bytes::Hash32;
use af::miner::policy::Policy;
use anyhow::Context;
use clap::Subcommand;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum MinerCommand {
    /// Serve the OpenAI API (chat completions, streamed or not, completions, models) with
    /// a built-in policy until SIGINT or SIGTERM.
    Serve {
        /// Address to listen on, IP:PORT (port 0: any free port, printed at start).
        #[arg(long, default_value = "127.0.0.1:8001", value_parser = listen_address)]
        listen: SocketAddr,
        /// perfect, random, noisy:P, garbage, slow:MS, flaky:P, verbose:BYTES or hostile (perfect after a bidi override, a zero-width space, markup and a script)
        // Parsed below rather than by clap, whose error would echo the whole value.
        #[arg(long, default_value = "perfect")]
        policy: String,
        /// Model name reported by /v1/models.
        #[arg(long, default_value = "af-reference")]
        model: String,
        /// Seed of the policy's randomness (the same seed answers the same way).
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn run(command: MinerCommand, json: bool) -> anyhow::Result<ExitCode> {
    let MinerCommand::Serve { listen, policy, model, seed } = command;
    let policy: Policy = policy.parse()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
        let address = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            if json {
                let line = serde_json::json!({
                    "listening": format!("http://{address}"), "policy": policy.to_string(), "model": model, "seed": seed,
                });
                writeln!(out, "{line}")?;
            } else {
                writeln!(out, "listening on http://{address} (policy {policy}, model {model})")?;
            }
            out.flush()?;
        }
        let seed = Hash32(blake3::derive_key("af reference miner seed v1", &seed.to_le_bytes()));
        axum::serve(listener, af::miner::server::router(policy, model, seed))
            .with_graceful_shutdown(async {
                af::validator::service::stop_signal().await;
            })
            .await
            .context("serving")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `--listen`: an IP and a port; a bare port is refused with the form it lacks.
fn listen_address(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| match text.parse::<u16>() {
        Ok(port) => format!(
            "a port alone is not an address: give IP:PORT, e.g. 127.0.0.1:{port} (0.0.0.0:{port} for every interface)"
        ),
        Err(_) => "not an address: give IP:PORT, e.g. 127.0.0.1:8001 (port 0: any free port)".into(),
    })
}
