//! Folds at checkpoint heights read from where validators keep and publish them
//! (ledger-spec/11, `af/v1/log/<validator>/fold/<height>`): a node over HTTP(S), an
//! archive on an object store, or a folder (a validator's `DIR/folds`, a site's copy).
//! The bytes are trusted for nothing: `replay::fold_checkpoints::decode_fold` takes them only
//! if they hash to the point a quorum agreed on.

use super::archive::{is_object_store, Site};
use crate::ledger::event::FoldPoint;
use crate::replay::fold_checkpoints::{fold_path, MAX_FOLD_BYTES};
use std::time::Duration;

/// A place folds are read from.
pub enum FoldSite {
    Http { base: reqwest::Url, client: reqwest::Client, runtime: tokio::runtime::Runtime },
    Site(Site),
}

/// A fold's whole read may take this long (a fold of a long log is megabytes).
const FOLD_TIMEOUT: Duration = Duration::from_secs(300);

impl FoldSite {
    /// `source`: `http(s)://HOST:PORT/` (a node or a published site), an object store
    /// URL (`archive::OBJECT_SCHEMES`), or a folder, which must exist.
    pub fn open(source: &str) -> Result<FoldSite, String> {
        if is_object_store(source) {
            return Site::open(source).map(FoldSite::Site).map_err(|e| e.to_string());
        }
        if !source.contains("://") {
            if !std::path::Path::new(source).is_dir() {
                return Err(format!("the folder {source} is not there"));
            }
            return Site::open(source).map(FoldSite::Site).map_err(|e| e.to_string());
        }
        let base = super::mirror::base_url(source).map_err(|e| e.to_string())?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(30))
            .timeout(FOLD_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(4))
            .build()
            .map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        Ok(FoldSite::Http { base, client, runtime })
    }

    /// The bytes published for `point`, `None` if there are none; at most
    /// `MAX_FOLD_BYTES`, whatever the server says of their size.
    pub fn read(&self, point: &FoldPoint) -> Result<Option<Vec<u8>>, String> {
        let path = fold_path(&point.validator, point.height);
        match self {
            FoldSite::Site(site) => {
                site.read(&path, MAX_FOLD_BYTES).map(|b| b.map(|b| b.to_vec())).map_err(|e| e.to_string())
            }
            FoldSite::Http { base, client, runtime } => runtime.block_on(async {
                let url = base.join(&path).map_err(|e| e.to_string())?;
                let mut response = client.get(url.clone()).send().await.map_err(|e| format!("{url}: {e}"))?;
                if response.status() == reqwest::StatusCode::NOT_FOUND {
                    return Ok(None);
                }
                if !response.status().is_success() {
                    return Err(format!("{url}: HTTP {}", response.status()));
                }
                let mut bytes = Vec::new();
                while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
                    if (bytes.len() + chunk.len()) as u64 > MAX_FOLD_BYTES {
                        return Err(format!("{url}: over the {MAX_FOLD_BYTES} bytes a fold may have"));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(Some(bytes))
            }),
        }
    }
}
