//! The log handlers (ledger-spec/11): the log list, tips, checkpoints, entry bundles,
//! single blocks, consistency proofs, transcript entries and pages of the replayed state.

use super::common::*;
use crate::budget::Held;
use crate::bytes::ValidatorKey;
use crate::http::layout::{self, LogList, LogSummary, LOG_LIST_FORMAT, TILE_WIDTH};
use crate::ledger::checkpoint::Checkpoint;
use crate::ledger::consistency;
use crate::ledger::proof::signed_headers;
use crate::ledger::OwnLog;
use crate::replay::Replay;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use serde::Deserialize;
use std::sync::Arc;

pub(super) async fn logs(State(served): State<Arc<Served>>, request: HeaderMap) -> Answer {
    let log = served.log.clone();
    // A summary of under 256 bytes of JSON per chain the store holds.
    let estimate = 256 * (log.store.tips().map_err(internal)?.len() as u64 + 1);
    built_json(&served, &request, estimate, move || log_list(&log)).await
}

/// The log list of a store: every chain and its tip.
fn log_list(log: &OwnLog) -> Result<LogList, ApiError> {
    let tips = log.store.tips().map_err(internal)?;
    let logs = tips
        .into_iter()
        .map(|(validator, tip)| LogSummary { validator, size: tip.height + 1, tip_hash: tip.hash })
        .collect();
    Ok(LogList { format: LOG_LIST_FORMAT.into(), own: Some(log.validator()), logs })
}

pub(super) async fn tip(
    State(served): State<Arc<Served>>,
    Path(validator): Path<String>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    let log = served.log.clone();
    let signed = blocking(move || {
        let tip = log.store.tip(&validator).map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        signed_headers(&log.store, &validator, tip.height, tip.height).map_err(internal).map(|mut h| h.remove(0))
    })
    .await?;
    json_cached(&request, &signed)
}

/// A block whose body this node pruned (ledger-spec/05) is not served: 404, naming
/// where the bodies are, so a reader goes there (a node never fetches for others).
fn pruned_here(store: &crate::ledger::Store, validator: &ValidatorKey, height: u64) -> Result<(), ApiError> {
    let below = store.pruned_below(validator).map_err(internal)?;
    if height < below {
        let archive = store.pruned_from(validator).map_err(internal)?.unwrap_or_else(|| "its archive".into());
        return Err(problem(
            StatusCode::NOT_FOUND,
            &format!(
                "blocks below height {below} of validator {validator} are pruned here: their bodies are in {archive}"
            ),
        ));
    }
    Ok(())
}

fn no_chain(validator: &ValidatorKey) -> ApiError {
    problem(StatusCode::NOT_FOUND, &format!("no chain of validator {validator} here"))
}

pub(super) async fn checkpoint(
    State(served): State<Arc<Served>>,
    Path(validator): Path<String>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    if validator != served.log.validator() {
        return Err(problem(
            StatusCode::NOT_FOUND,
            "a node signs checkpoints of its own chain only; every chain's signed tip is at .../tip",
        ));
    }
    let log = served.log.clone();
    let note = blocking(move || {
        let tip = log.tip().map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        Ok(Checkpoint::of_tip(validator, &tip).sign(log.key()))
    })
    .await?;
    let etag = blake3::hash(note.as_bytes()).to_hex()[..32].to_string();
    Ok(cached(&request, &etag, MUTABLE, "text/plain; charset=utf-8", Body::from(note)))
}

/// `x001/234` or `x001/234.p/17`: the tile index and the bundle's width.
fn parse_bundle(path: &str) -> Result<(u64, u64), ApiError> {
    let bad = |why: String| problem(StatusCode::NOT_FOUND, &why);
    let (index, width) = match path.split_once(".p/") {
        Some((index, width)) => {
            let parsed: u64 = width.parse().map_err(|_| bad(format!("bad partial width {width:?}")))?;
            if parsed == 0 || parsed >= TILE_WIDTH || width != parsed.to_string() {
                return Err(bad(format!(
                    "a partial bundle's width is 1..={} without leading zeros, not {width:?}",
                    TILE_WIDTH - 1
                )));
            }
            (index, parsed)
        }
        None => (path, TILE_WIDTH),
    };
    let n = layout::parse_tile_index(index).map_err(|e| bad(e.to_string()))?;
    Ok((n, width))
}

pub(super) async fn bundle(
    State(served): State<Arc<Served>>,
    Path((validator, index)): Path<(String, String)>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    let (n, width) = parse_bundle(&index)?;
    let first = n.checked_mul(TILE_WIDTH).ok_or_else(|| no_chain(&validator))?;
    let last = first + width - 1;
    let log = served.log.clone();
    // The bundle's ETag is its last block's hash, which commits to every block before it.
    let etag = blocking(move || {
        let tip = log.store.tip(&validator).map_err(internal)?.ok_or_else(|| no_chain(&validator))?;
        if last > tip.height {
            return Err(problem(
                StatusCode::NOT_FOUND,
                &format!("the chain has {} blocks; this bundle needs {}", tip.height + 1, last + 1),
            ));
        }
        pruned_here(&log.store, &validator, first)?;
        let headers = log.store.signed_headers(&validator, last, last).map_err(internal)?;
        headers.first().map(|(h, _)| h.hash()).ok_or_else(|| no_chain(&validator))
    })
    .await?;
    let quoted = format!("\"{}\"", etag.to_hex());
    if request.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == quoted.as_bytes()) {
        return Ok(cached(&request, &etag.to_hex(), IMMUTABLE, "application/octet-stream", Body::empty()));
    }
    // One block at a time through a channel of one: a slow reader holds at most two
    // records (one queued, one being written), each reserved from the memory budget.
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let served = served.clone();
    tokio::spawn(async move {
        for height in first..=last {
            let item = match read_held(&served, validator, height, true).await {
                Ok(Some(record)) => Ok(Bytes::from_owner(record)),
                Ok(None) => Err(std::io::Error::other(format!("block {height} is missing"))),
                Err(ApiError(_, why)) => Err(std::io::Error::other(why)),
            };
            let failed = item.is_err();
            if sender.send(item).await.is_err() || failed {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(receiver, |mut r| async move { r.recv().await.map(|item| (item, r)) });
    Ok(cached(&request, &etag.to_hex(), IMMUTABLE, "application/octet-stream", Body::from_stream(stream)))
}
/// One block's bytes (as a bundle record, with its length prefix, if `record`), read with
/// one of the few answer permits and held against the memory budget until written.
/// A reader that cannot get room within the request timeout is told the node is busy.
async fn read_held(
    served: &Arc<Served>,
    validator: ValidatorKey,
    height: u64,
    record: bool,
) -> Result<Option<Held>, ApiError> {
    // Counted before it is read: its length first (one piece held at a time), room for
    // it in the readers' budget, and only then the bytes, read once into their buffer.
    let log = served.log.clone();
    let len = blocking(move || {
        pruned_here(&log.store, &validator, height)?;
        log.store.block_len(&validator, height).map_err(internal)
    });
    let Some(len) = len.await? else {
        return Ok(None);
    };
    let framed_len = if record { len + 4 } else { len };
    let reservation = room_for(served, framed_len).await?;
    let _permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let log = served.log.clone();
    let bytes = blocking(move || {
        let Some(block) = log.store.block_bytes(&validator, height).map_err(internal)? else {
            return Ok(None);
        };
        Ok(Some(if record {
            let mut framed = Vec::with_capacity(block.len() + 4);
            layout::push_record(&mut framed, &block);
            framed
        } else {
            block
        }))
    })
    .await?;
    let Some(bytes) = bytes else { return Ok(None) };
    if bytes.len() != framed_len {
        return Err(internal(format!("block {height} of {validator} changed length while read")));
    }
    Ok(Some(Held::new(bytes, reservation)))
}
pub(super) async fn block(
    State(served): State<Arc<Served>>,
    Path((validator, height)): Path<(String, String)>,
    request: HeaderMap,
) -> Answer {
    let (validator, height) = (parse_validator(&validator)?, parse_height(&height)?);
    let held = read_held(&served, validator, height, false)
        .await?
        .ok_or_else(|| problem(StatusCode::NOT_FOUND, &format!("no block {height} of validator {validator} here")))?;
    let hash = crate::ledger::store::stored_header(&held.bytes).map_err(internal)?.0.hash();
    Ok(cached(&request, &hash.to_hex(), IMMUTABLE, "application/octet-stream", Body::from(Bytes::from_owner(held))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConsistencyQuery {
    old: u64,
    new: Option<u64>,
}

pub(super) async fn consistency_proof(
    State(served): State<Arc<Served>>,
    Path(validator): Path<String>,
    Query(query): Query<ConsistencyQuery>,
    request: HeaderMap,
) -> Answer {
    let validator = parse_validator(&validator)?;
    let log = served.log.clone();
    // Up to MAX_CONSISTENCY_HEADERS signed headers: about 466 bytes of JSON each (30.5 MB
    // for the most) and the decoded headers beside them while it is built: 1 KiB each.
    let size = log.store.tip(&validator).map_err(internal)?.map_or(0, |tip| tip.height + 1);
    let span = query.new.unwrap_or(size).min(size).saturating_sub(query.old).min(consistency::MAX_CONSISTENCY_HEADERS);
    built_json(&served, &request, 1024 * (span + 1), move || {
        consistency::prove(&log.store, &validator, query.old, query.new)
            .map_err(|e| problem(StatusCode::BAD_REQUEST, &e.to_string()))
    })
    .await
}
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Page {
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

pub(super) async fn state(State(served): State<Arc<Served>>, Query(page): Query<Page>, request: HeaderMap) -> Answer {
    let replay = replayed(&served).await?;
    // The first page, which dashboards poll, is serialized once per replay.
    let first_page = page.offset == 0 && page.limit.is_none();
    if first_page {
        let cached = served.state_page.lock().await;
        if let Some((of, body, etag)) = cached.as_ref() {
            // A weak pointer keeps its allocation, so an equal address is the same replay.
            if std::ptr::eq(of.as_ptr(), Arc::as_ptr(&replay)) {
                return Ok(self::cached(&request, etag, MUTABLE, "application/json", Body::from(body.clone())));
            }
        }
    }
    let limit = page.limit.unwrap_or(100).min(MAX_MATCHES_PAGE);
    if !first_page {
        // This reader's own page (up to 1,000 matches, each with every vote).
        // Up to 16 KiB of JSON and decoded state per match (each with every vote).
        let estimate = 16 * 1024 * limit as u64;
        return built_json(&served, &request, estimate, move || state_page(&replay, page.offset, limit)).await;
    }
    let body = Bytes::from(serde_json::to_vec(&state_page(&replay, page.offset, limit)?).map_err(internal)?);
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    *served.state_page.lock().await = Some((Arc::downgrade(&replay), body.clone(), etag.clone()));
    Ok(cached(&request, &etag, MUTABLE, "application/json", Body::from(body)))
}

/// `af/v1/state` with the page of `limit` matches from `offset`.
fn state_page(replay: &Replay, offset: usize, limit: usize) -> Result<serde_json::Value, ApiError> {
    let state = &replay.state;
    let matches: Vec<_> = state.matches.iter_from(offset).take(limit).collect::<Result<_, _>>().map_err(internal)?;
    let tips: Vec<_> = replay.folds.iter().map(|f| (f.validator, f.tip)).collect();
    Ok(serde_json::json!({
            "note": "computed by this node from the logs it holds; mirror them and run `af audit` to check",
            "state_hash": replay.state_hash,
            "tips": tips,
            "champion": state.champion,
            "champion_history": state.champion_history,
            "ratio_set_ppm": state.ratio_set_ppm,
            "ratio_set_at_block": state.ratio_set_at_block,
            "validators": state.validators,
            "weights": state.weights,
            "discrepancies": state.discrepancies.len(),
            "matches_total": state.matches.len(),
            "matches_offset": offset,
            "matches": matches,
    }))
}
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TranscriptQuery {
    miner: Option<String>,
    challenge: Option<String>,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
}

pub(super) async fn transcripts(
    State(served): State<Arc<Served>>,
    Query(query): Query<TranscriptQuery>,
    request: HeaderMap,
) -> Answer {
    if query.miner.is_some() == query.challenge.is_some() {
        return Err(problem(StatusCode::BAD_REQUEST, "give exactly one of ?miner=HOTKEY and ?challenge=ID"));
    }
    if query.miner.as_ref().is_some_and(|m| m.len() > crate::limits::MAX_NAME_BYTES) {
        return Err(problem(StatusCode::BAD_REQUEST, "the hotkey is too long"));
    }
    if query.challenge.as_ref().is_some_and(|c| c.len() > 64) {
        return Err(problem(StatusCode::BAD_REQUEST, "the challenge id is longer than 64 hex digits"));
    }
    let replay = replayed(&served).await?;
    let log = served.log.clone();
    let limit = query.limit.unwrap_or(20).min(MAX_ENTRIES_PAGE);
    // A page reads its blocks one at a time, with one of the answer permits (a crowd
    // of readers builds that many pages at once), and holds each entry against the memory
    // budget before it adds it, until the page is written.
    let permit = served.builds.clone().acquire_owned().await.map_err(internal)?;
    let mut reservation = served.budget.try_reserve(0).ok_or_else(budget_spent)?;
    let (body, reservation) = blocking(move || {
        use crate::replay::transcript_entries::{
            entries_page, resolve_challenge_id, EntriesError, Filter, Found, Reach,
        };
        // 64 hex digits, or a unique prefix of at least 16, as on the command line.
        let found = match (&query.miner, &query.challenge) {
            (Some(miner), _) => Found::Miner(miner),
            (None, Some(text)) => Found::Challenge(
                resolve_challenge_id(&log.store, text).map_err(|why| problem(StatusCode::BAD_REQUEST, &why))?,
            ),
            (None, None) => return Err(problem(StatusCode::BAD_REQUEST, "give ?miner=HOTKEY or ?challenge=ID")),
        };
        let filter = Filter::default();
        let mut room = |bytes: usize| reservation.grow(bytes as u64);
        let page = (query.offset, limit);
        match entries_page(
            &log.store,
            &replay.folds,
            (found, &filter, Reach::Tip),
            page,
            MAX_ENTRIES_PAGE_BYTES,
            &mut room,
        ) {
            Ok(body) => Ok((body, reservation)),
            Err(EntriesError::NoRoom) => Err(budget_spent()),
            Err(error) => Err(internal(error)),
        }
    })
    .await?;
    drop(permit);
    let etag = blake3::hash(&body).to_hex()[..32].to_string();
    let body = Body::from(Bytes::from_owner(Held::new(body, reservation)));
    Ok(cached(&request, &etag, MUTABLE, "application/json", body))
}
