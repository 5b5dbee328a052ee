//! `af/v1/log/{validator}/fold/{height}` (ledger-spec/11): a fold this node's replay kept
//! at a checkpoint height (`replay::fold_checkpoints`), streamed from its file a chunk at a
//! time, each chunk held against the readers' memory budget until written, so a fold of
//! a long log costs a reader a chunk of memory, not the fold, and many readers wait
//! rather than crowd out the rest.

use super::common::*;
use crate::replay::fold_checkpoints::{fold_file, FOLDS_DIR, FOLD_VERSION};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use std::io::Read;
use std::sync::Arc;

const CHUNK: usize = 1 << 20;

pub(super) async fn fold(
    State(served): State<Arc<Served>>,
    Path((validator, height)): Path<(String, String)>,
    request: HeaderMap,
) -> Answer {
    let (validator, height) = (parse_validator(&validator)?, parse_height(&height)?);
    let data = served.log.store.path().parent().map(|dir| dir.join(FOLDS_DIR));
    let path = data.map(|dir| fold_file(&dir, &validator, height));
    let opened = blocking(move || match path.map(std::fs::File::open) {
        Some(Ok(file)) => {
            let len = file.metadata().map_err(internal)?.len();
            Ok(Some((file, len)))
        }
        Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => Err(internal(e)),
        _ => Ok(None),
    })
    .await?;
    let Some((file, len)) = opened else {
        return Err(problem(
            StatusCode::NOT_FOUND,
            &format!(
                "no fold of validator {validator} at block {height} here: a node keeps its replay's two newest checkpoints of each log"
            ),
        ));
    };
    // Each chunk is held against the readers' budget until it is written, as blocks are.
    let chunks = futures::stream::unfold(Some((file, served)), |state| async move {
        let (mut file, served) = state?;
        let reservation = match room_for(&served, CHUNK).await {
            Ok(reservation) => reservation,
            Err(_) => return Some((Err(std::io::Error::other("the readers' memory budget is spent")), None)),
        };
        let read = tokio::task::spawn_blocking(move || {
            let mut chunk = vec![0; CHUNK];
            let n = file.read(&mut chunk)?;
            chunk.truncate(n);
            Ok::<_, std::io::Error>((chunk, file))
        })
        .await;
        match read {
            Ok(Ok((chunk, _))) if chunk.is_empty() => None,
            Ok(Ok((chunk, file))) => {
                Some((Ok(Bytes::from_owner(crate::budget::Held::new(chunk, reservation))), Some((file, served))))
            }
            Ok(Err(e)) => Some((Err(e), None)),
            Err(e) => Some((Err(std::io::Error::other(e)), None)),
        }
    });
    // The same path holds other bytes under another fold format: the tag names both.
    let etag = format!("{FOLD_VERSION}-{height}-{len}");
    Ok(cached(&request, &etag, MUTABLE, "application/octet-stream", Body::from_stream(chunks)))
}
