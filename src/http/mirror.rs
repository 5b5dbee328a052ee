//! `af mirror`: copies logs over plain HTTP from a running node or a published site
//! (ledger-spec/11-http.md) into a local store, verifying every block before it is
//! stored with the checks gossip applies: the block's bytes and signature, its
//! validator and height, its link to the block before, and that the chain ends at the
//! signed tip the server shows. It resumes from what the store holds, and turns any
//! disagreement between the server's signed bytes and ours into equivocation evidence.
//!
//! Everything read is bounded: JSON documents by size, bundles by their width and the
//! block limit (checked as the bytes stream in, before the `Content-Length` is
//! believed), every request by a connect timeout, a stall timeout and a total timeout.

use super::layout::{self, BundleReader, LogList, MAX_LOGS, MAX_LOG_LIST_BYTES, MAX_TIP_BYTES};
use crate::bytes::ValidatorKey;
use crate::ledger::block::{check_header_rules, check_link, check_signature, SealedBlock, Tip};
use crate::ledger::event::Evidence;
use crate::ledger::proof::SignedHeader;
use crate::ledger::store::{Appended, Store, StoreError};
use crate::limits::FUTURE_TOLERANCE_MS;
use crate::p2p::blocks::BlockStore;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct MirrorOptions {
    /// Only this chain; `None`: every chain in the server's log list.
    pub validator: Option<ValidatorKey>,
    pub connect_timeout: Duration,
    /// No byte for this long ends a request.
    pub stall_timeout: Duration,
    /// The most one request may take, whatever its progress.
    pub request_timeout: Duration,
    /// The most the whole mirror may take (`af mirror --timeout`): a server that drips
    /// bytes just fast enough to pass the stall timeout cannot hold us longer. Blocks
    /// verified and stored before it stay.
    pub total_timeout: Duration,
}

impl Default for MirrorOptions {
    fn default() -> Self {
        MirrorOptions {
            validator: None,
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(600),
            total_timeout: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0:?} is not an http(s) base URL: {1}")]
    Url(String, &'static str),
    #[error("{url}: {message}")]
    Fetch { url: String, message: String },
    #[error("{url}: the server's answer is refused: {message}")]
    Refused { url: String, message: String },
}

impl MirrorError {
    /// A check that ran and found the server's bytes wrong (as opposed to not reaching it).
    pub fn is_refusal(&self) -> bool {
        matches!(self, MirrorError::Refused { .. })
    }
}

/// What happened to one chain.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ChainOutcome {
    /// We hold the server's tip already (or more of the same chain).
    UpToDate,
    Updated {
        blocks_new: u64,
    },
    /// The server could not be read; what was verified before the failure is kept.
    Failed {
        error: String,
        blocks_new: u64,
    },
    /// The server's bytes failed a check; nothing that failed was stored.
    Refused {
        error: String,
        blocks_new: u64,
    },
    /// The server holds a validly signed block that differs from ours at one height.
    Equivocation {
        evidence: Box<Evidence>,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct ChainReport {
    pub validator: ValidatorKey,
    /// Blocks we held before, and hold now.
    pub size_before: u64,
    pub size_after: u64,
    /// The size of the server's signed tip, once read.
    pub server_size: Option<u64>,
    #[serde(flatten)]
    pub outcome: ChainOutcome,
}

#[derive(Clone, Debug, Serialize)]
pub struct MirrorReport {
    pub source: String,
    pub chains: Vec<ChainReport>,
}

impl MirrorReport {
    /// Where `af mirror` writes the evidence of an equivocation found in `data`.
    pub fn evidence_path(data: &std::path::Path, evidence: &Evidence) -> std::path::PathBuf {
        data.join("evidence").join(format!("{}-{}.json", evidence.validator, evidence.height))
    }

    /// The report in words: a line per chain, then the totals; evidence paths under `data`.
    pub fn lines(&self, data: &std::path::Path) -> Vec<String> {
        let mut out: Vec<String> = self
            .chains
            .iter()
            .map(|chain| {
                let server = chain.server_size.map_or("?".into(), |s| s.to_string());
                let what = match &chain.outcome {
                    ChainOutcome::UpToDate => "up to date".to_string(),
                    ChainOutcome::Updated { blocks_new } => format!("{blocks_new} new blocks verified and stored"),
                    ChainOutcome::Failed { error, blocks_new } => {
                        format!("FAILED after {blocks_new} new blocks: {error}")
                    }
                    ChainOutcome::Refused { error, blocks_new } => {
                        format!("REFUSED after {blocks_new} new blocks (nothing unverified stored): {error}")
                    }
                    ChainOutcome::Equivocation { evidence } => format!(
                        "EQUIVOCATION at height {}: evidence written to {}",
                        evidence.height,
                        Self::evidence_path(data, evidence).display()
                    ),
                };
                let (before, after) = (chain.size_before, chain.size_after);
                format!("{}  {before} -> {after} blocks (server {server}): {what}", chain.validator)
            })
            .collect();
        out.push(format!("{} chain(s) from {}; {} new blocks", self.chains.len(), self.source, self.blocks_new()));
        out
    }

    /// Writes each equivocation's evidence under `data` ([`Self::evidence_path`]).
    pub fn write_evidence(&self, data: &std::path::Path) -> std::io::Result<()> {
        for chain in &self.chains {
            if let ChainOutcome::Equivocation { evidence } = &chain.outcome {
                let path = Self::evidence_path(data, evidence);
                std::fs::create_dir_all(data.join("evidence"))?;
                std::fs::write(&path, serde_json::to_vec_pretty(evidence)?)?;
            }
        }
        Ok(())
    }

    pub fn blocks_new(&self) -> u64 {
        self.chains
            .iter()
            .map(|c| match &c.outcome {
                ChainOutcome::Updated { blocks_new }
                | ChainOutcome::Failed { blocks_new, .. }
                | ChainOutcome::Refused { blocks_new, .. } => *blocks_new,
                _ => 0,
            })
            .sum()
    }

    /// Whether some server answer failed a check (refused bytes or equivocation).
    pub fn found_fault(&self) -> bool {
        self.chains
            .iter()
            .any(|c| matches!(c.outcome, ChainOutcome::Refused { .. } | ChainOutcome::Equivocation { .. }))
    }

    pub fn failed(&self) -> bool {
        self.chains.iter().any(|c| matches!(c.outcome, ChainOutcome::Failed { .. }))
    }
}

/// Progress: (validator, blocks held now, the server's size).
pub type Progress<'a> = &'a mut (dyn FnMut(&ValidatorKey, u64, u64) + Send);

struct Source {
    transport: Transport,
    options: MirrorOptions,
    deadline: tokio::time::Instant,
}

/// How a site's objects are fetched: over HTTP(S) from its base URL, or from an object
/// store (`archive::Site`) where it was published.
enum Transport {
    Http { base: reqwest::Url, client: reqwest::Client },
    Archive(super::archive::Site),
}

/// One object's bytes as they arrive, with the size its server declared.
enum Body {
    Http(reqwest::Response),
    Archive { size: u64, chunks: futures::stream::BoxStream<'static, Result<bytes::Bytes, String>> },
}

impl Body {
    fn declared(&self) -> Option<u64> {
        match self {
            Body::Http(response) => response.content_length(),
            Body::Archive { size, .. } => Some(*size),
        }
    }

    /// The next chunk, by `deadline` at the latest, and within `stall` of asking: an
    /// object store's body has the stall deadline an HTTP body has from its client
    /// (ledger-spec/11), so one stalled object costs its log `stall`, not the mirror's
    /// whole time.
    async fn chunk(&mut self, deadline: tokio::time::Instant, stall: Duration) -> Result<Option<bytes::Bytes>, String> {
        let next = async {
            match self {
                Body::Http(response) => response.chunk().await.map_err(|e| crate::display::with_causes(&e)),
                Body::Archive { chunks, .. } => {
                    match tokio::time::timeout(stall, futures::StreamExt::next(chunks)).await {
                        Ok(next) => next.transpose(),
                        Err(_) => Err(format!("no byte for {} s: the object stalled", stall.as_secs())),
                    }
                }
            }
        };
        tokio::time::timeout_at(deadline, next)
            .await
            .unwrap_or_else(|_| Err("gave up: the mirror's time limit passed".into()))
    }
}

/// Parses the base URL: the folder that holds `af/v1/`. A missing trailing `/` is added
/// so paths join below it, and a URL that already ends in `af/v1` (copied from a
/// browser's address bar) means the folder above it.
pub fn base_url(text: &str) -> Result<reqwest::Url, MirrorError> {
    let refuse = |why| MirrorError::Url(text.into(), why);
    if !text.contains("://") {
        return Err(refuse("it has no scheme; write it as http://HOST:PORT/ (or https://)"));
    }
    let trimmed = text.trim_end_matches('/');
    let trimmed = trimmed.strip_suffix(&format!("/{}", super::layout::ROOT)).unwrap_or(trimmed);
    let with_slash = if trimmed.ends_with('/') { trimmed.to_string() } else { format!("{trimmed}/") };
    let url = reqwest::Url::parse(&with_slash).map_err(|_| refuse("it does not parse as a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refuse("only http:// and https:// are read"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refuse("a base URL has no ?query or #fragment"));
    }
    Ok(url)
}

/// Mirrors the logs at `base` into `store`: an HTTP(S) base URL, or an object store URL
/// a site was published to (`archive::OBJECT_SCHEMES`), read with the same checks.
pub async fn mirror(
    store: Arc<Store>,
    base: &str,
    options: MirrorOptions,
    progress: Progress<'_>,
) -> Result<MirrorReport, MirrorError> {
    let (transport, shown) = match super::archive::is_object_store(base) {
        true => {
            // The store's client answers by the same bounds as the HTTP one (its body's
            // chunks are bounded by the overall deadline as well).
            let client = [
                ("connect_timeout", format!("{}ms", options.connect_timeout.as_millis())),
                ("timeout", format!("{}ms", options.request_timeout.as_millis())),
            ];
            let site = super::archive::Site::open_with(base, &client)
                .map_err(|e| MirrorError::Fetch { url: base.to_string(), message: e.to_string() })?;
            let shown = site.to_string();
            (Transport::Archive(site), shown)
        }
        false => {
            let base = base_url(base)?;
            let client = reqwest::Client::builder()
                .connect_timeout(options.connect_timeout)
                .read_timeout(options.stall_timeout)
                .timeout(options.request_timeout)
                .redirect(reqwest::redirect::Policy::limited(4))
                .build()
                .map_err(|e| MirrorError::Fetch { url: base.to_string(), message: e.to_string() })?;
            let shown = base.to_string();
            (Transport::Http { base, client }, shown)
        }
    };
    let deadline = tokio::time::Instant::now() + options.total_timeout;
    let source = Source { transport, options, deadline };
    let validators = match source.options.validator {
        Some(validator) => vec![validator],
        // A validator the list names twice is mirrored once (ledger-spec/11).
        None => {
            let mut seen = std::collections::BTreeSet::new();
            source.log_list().await?.logs.into_iter().map(|l| l.validator).filter(|v| seen.insert(*v)).collect()
        }
    };
    let mut chains = Vec::new();
    for validator in validators {
        chains.push(mirror_chain(&source, &store, validator, progress).await?);
    }
    Ok(MirrorReport { source: shown, chains })
}

impl Source {
    /// The object at `path` and where it is: an error unless it is there.
    async fn get(&self, path: &str) -> Result<(String, Body), MirrorError> {
        let left = self.deadline.saturating_duration_since(tokio::time::Instant::now());
        let timeout = left.min(self.options.request_timeout);
        let gave_up =
            || format!("gave up: the mirror's time limit of {} s passed", self.options.total_timeout.as_secs());
        match &self.transport {
            Transport::Http { base, client } => {
                let url = base
                    .join(path)
                    .map_err(|_| MirrorError::Url(format!("{base}{path}"), "a path does not join it"))?;
                let fetch = |message: String| MirrorError::Fetch { url: url.to_string(), message };
                // Each request ends by the overall deadline too (reqwest's timeout covers the body).
                if left.is_zero() {
                    return Err(fetch(gave_up()));
                }
                let response = client.get(url.clone()).timeout(timeout).send().await.map_err(|e| {
                    let causes = crate::display::with_causes(&e);
                    fetch(match e.is_connect() {
                        true => format!(
                            "nothing answers at {base} ({causes}): is the node running with --http, and is this its address?"
                        ),
                        false => causes,
                    })
                })?;
                if !response.status().is_success() {
                    // The first thing read is the list of logs: a 404 there is no af site.
                    let hint = match (path == layout::log_list_path(), response.status().as_u16()) {
                        (true, 404) => format!(
                            ": {base} is not an af site; give the URL of the folder that holds af/v1/ (a node's --http address, or where `af ledger publish` wrote the site)"
                        ),
                        _ => String::new(),
                    };
                    return Err(fetch(format!("HTTP {}{hint}", response.status())));
                }
                Ok((url.to_string(), Body::Http(response)))
            }
            Transport::Archive(site) => {
                let url = site.url_of(path);
                let fetch = |message: String| MirrorError::Fetch { url: url.clone(), message };
                if left.is_zero() {
                    return Err(fetch(gave_up()));
                }
                // Its answer's head within the stall deadline too: a store that answers
                // nothing is cut as one that stops half way.
                let stall = self.options.stall_timeout;
                let got = match tokio::time::timeout(timeout.min(stall), site.stream(path)).await {
                    Ok(got) => got,
                    Err(_) if stall < timeout => {
                        return Err(fetch(format!("no answer for {} s: the object stalled", stall.as_secs())))
                    }
                    Err(_) => return Err(fetch(gave_up())),
                };
                match got.map_err(|e| fetch(e.to_string()))? {
                    Some((size, chunks)) => Ok((url.clone(), Body::Archive { size, chunks })),
                    None => Err(fetch("no such object".into())),
                }
            }
        }
    }

    /// A whole small document, refused past `limit` bytes (declared or actual).
    async fn small(&self, path: &str, limit: u64) -> Result<(String, Vec<u8>), MirrorError> {
        let (url, mut body) = self.get(path).await?;
        let refused = |message: String| MirrorError::Refused { url: url.clone(), message };
        if let Some(declared) = body.declared().filter(|n| *n > limit) {
            return Err(refused(format!("it declares {declared} bytes, over the limit of {limit}")));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = body
            .chunk(self.deadline, self.options.stall_timeout)
            .await
            .map_err(|message| MirrorError::Fetch { url: url.clone(), message })?
        {
            if bytes.len() as u64 + chunk.len() as u64 > limit {
                return Err(refused(format!("the body passes the limit of {limit} bytes")));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((url, bytes))
    }

    async fn log_list(&self) -> Result<LogList, MirrorError> {
        let (url, body) = self.small(&layout::log_list_path(), MAX_LOG_LIST_BYTES).await?;
        let refused = |message: String| MirrorError::Refused { url: url.clone(), message };
        let list: LogList = serde_json::from_slice(&body).map_err(|e| refused(format!("not a log list: {e}")))?;
        if list.format != layout::LOG_LIST_FORMAT {
            return Err(refused(format!("log list format {:?}, expected {:?}", list.format, layout::LOG_LIST_FORMAT)));
        }
        if list.logs.len() > MAX_LOGS {
            return Err(refused(format!("it names {} logs, over the limit of {MAX_LOGS}", list.logs.len())));
        }
        Ok(list)
    }

    /// The chain's signed tip, checked: header rules, the validator, the signature.
    async fn tip(&self, validator: &ValidatorKey) -> Result<SignedHeader, MirrorError> {
        let (url, body) = self.small(&layout::tip_path(validator), MAX_TIP_BYTES).await?;
        let refused = |message: String| MirrorError::Refused { url: url.clone(), message };
        let signed: SignedHeader =
            serde_json::from_slice(&body).map_err(|e| refused(format!("not a signed header: {e}")))?;
        if signed.header.validator != *validator {
            return Err(refused(format!("the tip is signed for validator {}", signed.header.validator)));
        }
        check_header_rules(&signed.header).map_err(|e| refused(e.to_string()))?;
        check_signature(&signed.header, &signed.header.hash(), &signed.signature)
            .map_err(|e| refused(e.to_string()))?;
        Ok(signed)
    }
}

async fn mirror_chain(
    source: &Source,
    store: &Arc<Store>,
    validator: ValidatorKey,
    progress: Progress<'_>,
) -> Result<ChainReport, MirrorError> {
    let local = store.tip(&validator)?;
    let size_before = local.map_or(0, |t| t.height + 1);
    let mut report = ChainReport {
        validator,
        size_before,
        size_after: size_before,
        server_size: None,
        outcome: ChainOutcome::UpToDate,
    };
    let remote = match source.tip(&validator).await {
        Ok(remote) => remote,
        Err(error) => {
            report.outcome = outcome_of(error, 0);
            return Ok(report);
        }
    };
    let remote_size = remote.header.height + 1;
    report.server_size = Some(remote_size);
    // A tip at or below ours must be a block we hold, byte for byte.
    if remote_size <= size_before {
        if let Some(evidence) = differs(store, &remote)? {
            report.outcome = ChainOutcome::Equivocation { evidence };
        }
        return Ok(report);
    }
    let mut prev: Option<Tip> = local;
    let mut blocks_new = 0u64;
    for (n, width) in layout::bundles_for(size_before, remote_size) {
        let path = layout::bundle_path(&validator, n, width);
        let fetched = fetch_bundle(source, store, &validator, &path, n, width, &mut prev, &mut blocks_new).await;
        report.size_after = prev.map_or(0, |t| t.height + 1);
        progress(&validator, report.size_after, remote_size);
        match fetched {
            Ok(None) => {}
            Ok(Some(evidence)) => {
                report.outcome = ChainOutcome::Equivocation { evidence };
                return Ok(report);
            }
            Err(error) => {
                report.outcome = outcome_of(error, blocks_new);
                return Ok(report);
            }
        }
    }
    // The blocks must end at the signed tip we were shown; a different, validly signed
    // block at that height is a second signed header there.
    let last = prev.expect("at least one block was stored");
    if last.hash != remote.header.hash() {
        let (header, signature) = store
            .signed_header(&validator, last.height)?
            .ok_or(StoreError::Corrupt("a stored tip has no block".into()))?;
        report.outcome = ChainOutcome::Equivocation {
            evidence: Box::new(Evidence {
                validator,
                height: last.height,
                header_a: header,
                signature_a: signature,
                header_b: remote.header,
                signature_b: remote.signature,
            }),
        };
        return Ok(report);
    }
    report.outcome = ChainOutcome::Updated { blocks_new };
    Ok(report)
}

fn outcome_of(error: MirrorError, blocks_new: u64) -> ChainOutcome {
    match error {
        MirrorError::Refused { .. } => ChainOutcome::Refused { error: error.to_string(), blocks_new },
        other => ChainOutcome::Failed { error: other.to_string(), blocks_new },
    }
}

/// Evidence if the signed header `remote` differs from our block at its height.
fn differs(store: &Store, remote: &SignedHeader) -> Result<Option<Box<Evidence>>, MirrorError> {
    let header = &remote.header;
    let Some((stored, signature)) = store.signed_header(&header.validator, header.height)? else {
        return Ok(None);
    };
    if stored.hash() == header.hash() {
        return Ok(None);
    }
    Ok(Some(Box::new(Evidence {
        validator: header.validator,
        height: header.height,
        header_a: stored,
        signature_a: signature,
        header_b: header.clone(),
        signature_b: remote.signature,
    })))
}

/// Fetches one bundle, checks each block as it arrives and stores the new ones. Blocks
/// at heights we already hold must be ours byte for byte (else: evidence).
#[allow(clippy::too_many_arguments)]
async fn fetch_bundle(
    source: &Source,
    store: &Arc<Store>,
    validator: &ValidatorKey,
    path: &str,
    n: u64,
    width: u64,
    prev: &mut Option<Tip>,
    blocks_new: &mut u64,
) -> Result<Option<Box<Evidence>>, MirrorError> {
    let (url, mut response) = source.get(path).await?;
    let refused = |message: String| MirrorError::Refused { url: url.clone(), message };
    let mut reader = BundleReader::new(width).map_err(|e| refused(e.to_string()))?;
    if let Some(declared) = response.declared().filter(|n| *n > reader.max_bytes()) {
        return Err(refused(format!("it declares {declared} bytes, more than {width} blocks can hold")));
    }
    let mut height = n * layout::TILE_WIDTH;
    let mut pending: Vec<SealedBlock> = Vec::new();
    loop {
        let chunk = response
            .chunk(source.deadline, source.options.stall_timeout)
            .await
            .map_err(|message| MirrorError::Fetch { url: url.clone(), message });
        let (blocks, ended) = match chunk {
            Ok(Some(chunk)) => (reader.push(&chunk), false),
            Ok(None) => (reader.finish().map(|()| Vec::new()), true),
            Err(error) => {
                store_pending(store, &mut pending, blocks_new).await?;
                return Err(error);
            }
        };
        let blocks = match blocks {
            Ok(blocks) => blocks,
            Err(error) => {
                store_pending(store, &mut pending, blocks_new).await?;
                return Err(refused(error.to_string()));
            }
        };
        for bytes in blocks {
            let checked = SealedBlock::from_bytes(bytes).map_err(|e| format!("block {height}: {e}"));
            let sealed = match checked {
                Ok(sealed) => sealed,
                Err(message) => {
                    store_pending(store, &mut pending, blocks_new).await?;
                    return Err(refused(message));
                }
            };
            let header = &sealed.decoded().block.header;
            if header.validator != *validator || header.height != height {
                store_pending(store, &mut pending, blocks_new).await?;
                return Err(refused(format!(
                    "record for height {height} holds block {} of validator {}",
                    header.height, header.validator
                )));
            }
            match *prev {
                Some(tip) if height <= tip.height => {
                    // Already held: it must be the same block.
                    let signed = SignedHeader { header: header.clone(), signature: sealed.decoded().block.signature };
                    if let Some(evidence) = differs(store, &signed)? {
                        store_pending(store, &mut pending, blocks_new).await?;
                        return Ok(Some(evidence));
                    }
                }
                _ => {
                    if let Err(e) = check_link(validator, prev.as_ref(), header) {
                        store_pending(store, &mut pending, blocks_new).await?;
                        return Err(refused(format!("block {height}: {e}")));
                    }
                    let now_ms = crate::clock::unix_ms();
                    if header.time_ms > now_ms.saturating_add(FUTURE_TOLERANCE_MS) {
                        store_pending(store, &mut pending, blocks_new).await?;
                        return Err(refused(format!(
                            "block {height} is dated {} ms after this machine's clock, more than the {} ms a \
                             block may be ahead (ledger-spec/03): not taken yet; the blocks before it are kept",
                            header.time_ms - now_ms,
                            FUTURE_TOLERANCE_MS
                        )));
                    }
                    *prev = Some(sealed.tip());
                    pending.push(sealed);
                }
            }
            height += 1;
        }
        if pending.len() >= 64 {
            store_pending(store, &mut pending, blocks_new).await?;
        }
        if ended {
            break;
        }
    }
    store_pending(store, &mut pending, blocks_new).await?;
    Ok(None)
}

/// Appends the verified blocks in one transaction (the store re-checks each link).
async fn store_pending(
    store: &Arc<Store>,
    pending: &mut Vec<SealedBlock>,
    blocks_new: &mut u64,
) -> Result<(), MirrorError> {
    if pending.is_empty() {
        return Ok(());
    }
    let batch = std::mem::take(pending);
    let store = store.clone();
    let (appended, refused) = tokio::task::spawn_blocking(move || store.append_batch(&batch))
        .await
        .map_err(|e| StoreError::Corrupt(format!("the append task failed: {e}")))??;
    *blocks_new += appended.iter().filter(|a| matches!(a, Appended::New(_))).count() as u64;
    match refused {
        None => Ok(()),
        Some((_, error)) => Err(MirrorError::Store(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::base_url;

    #[test]
    fn a_base_url_is_the_folder_above_af_v1_with_a_scheme() {
        for (text, base) in [
            ("http://127.0.0.1:7080", "http://127.0.0.1:7080/"),
            ("http://127.0.0.1:7080/af/v1/", "http://127.0.0.1:7080/"),
            ("https://logs.example/sn/af/v1", "https://logs.example/sn/"),
            ("https://logs.example/leaf/", "https://logs.example/leaf/"),
        ] {
            assert_eq!(base_url(text).unwrap().as_str(), base, "{text}");
        }
        for (text, why) in [
            ("127.0.0.1:7080", "write it as http://"),
            ("localhost:7080/af/v1/", "write it as http://"),
            ("ftp://x/", "only http://"),
            ("http://x/?a=1", "no ?query"),
        ] {
            let error = base_url(text).unwrap_err().to_string();
            assert!(error.contains(why) && error.contains(text), "{text}: {error}");
        }
    }
}
