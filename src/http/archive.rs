//! Where `af ledger publish` writes a site and `af mirror` may read one: a local folder,
//! or an object store (S3 and S3-compatible stores, Google Cloud Storage, Azure Blob
//! Storage) through the `object_store` crate, as Tessera and the static CT logs keep
//! their tiles. The layout is ledger-spec/11's either way; only the transport differs.
//! Credentials and endpoints come from the environment as each cloud's own tools read
//! them (`AWS_*`, `GOOGLE_*`, `AZURE_*`; `AWS_ENDPOINT` and `AWS_ALLOW_HTTP=true` for
//! an S3-compatible server of one's own).

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{target:?} is not a folder or an object store URL: {why}")]
    Target { target: String, why: String },
    #[error("{url}: {message}")]
    Io { url: String, message: String },
}

/// A site's root: a folder or an object store URL, with the prefix the layout goes under.
#[derive(Clone, Debug)]
pub struct Site {
    store: Arc<dyn ObjectStore>,
    /// For the writes of `af ledger publish`, which is not async: a runtime of its own,
    /// made at its first blocking call (never inside a runtime: `af mirror` is async).
    runtime: Arc<OwnRuntime>,
    prefix: ObjectPath,
    /// How the site was named, for messages.
    url: String,
}

/// A site's own runtime for its blocking calls, made at the first. Let go without
/// waiting for its tasks (`shutdown_background`): the last copy of a site may be dropped
/// on an async worker (a validator's archiver as it stops), where a runtime's own drop,
/// which blocks, would panic.
#[derive(Debug, Default)]
struct OwnRuntime(std::sync::OnceLock<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// The URL schemes of object stores a site may be on (a target without `://` is a folder).
pub const OBJECT_SCHEMES: [&str; 4] = ["s3://", "gs://", "az://", "file://"];

/// Whether `target` names an object store rather than an HTTP site or a folder.
pub fn is_object_store(target: &str) -> bool {
    OBJECT_SCHEMES.iter().any(|scheme| target.starts_with(scheme))
}

/// `target` as a store records it: a folder made absolute (a relative one would name
/// another place from another working directory), a URL as it is.
pub fn absolute(target: &str) -> Result<String, ArchiveError> {
    if target.contains("://") {
        return Ok(target.to_string());
    }
    std::path::absolute(target)
        .map(|path| path.display().to_string())
        .map_err(|e| ArchiveError::Target { target: target.to_string(), why: e.to_string() })
}

impl Site {
    /// The site at `target`: a folder (made if missing), or `s3://BUCKET/PREFIX`,
    /// `gs://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` or `file:///PATH`, configured from
    /// the environment.
    pub fn open(target: &str) -> Result<Site, ArchiveError> {
        Site::open_with(target, &[])
    }

    /// [`Self::open`] with settings of the object store's HTTP client (`timeout`,
    /// `connect_timeout`, as humantime durations) over the environment's: a reader's
    /// bounds on a slow server.
    pub fn open_with(target: &str, client: &[(&str, String)]) -> Result<Site, ArchiveError> {
        let refuse = |why: String| ArchiveError::Target { target: target.to_string(), why };
        let runtime = Arc::default();
        if !target.contains("://") {
            let dir = std::path::Path::new(target);
            std::fs::create_dir_all(dir).map_err(|e| refuse(format!("making the folder: {e}")))?;
            let local =
                object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| refuse(e.to_string()))?;
            let url = target.trim_end_matches('/').to_string();
            return Ok(Site { store: Arc::new(local), runtime, prefix: ObjectPath::default(), url });
        }
        if !is_object_store(target) {
            return Err(refuse(format!("only folders and {} are written", OBJECT_SCHEMES.join(", "))));
        }
        let url = url::Url::parse(target).map_err(|e| refuse(e.to_string()))?;
        let options = std::env::vars()
            .filter(|(key, _)| ["AWS_", "GOOGLE_", "AZURE_"].iter().any(|prefix| key.starts_with(prefix)))
            .chain(client.iter().map(|(key, value)| (key.to_string(), value.clone())));
        // Nothing is made here: a reader (`af mirror`) leaves no trace, and a put makes
        // the folders it needs.
        let (store, prefix) = object_store::parse_url_opts(&url, options).map_err(|e| refuse(e.to_string()))?;
        Ok(Site { store: Arc::from(store), runtime, prefix, url: target.trim_end_matches('/').to_string() })
    }

    fn path(&self, path: &str) -> ObjectPath {
        path.split('/').filter(|part| !part.is_empty()).fold(self.prefix.clone(), |at, part| at.join(part))
    }

    /// Where `path` is, for messages.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}/{path}", self.url)
    }

    fn fail(&self, path: &str, error: impl std::fmt::Display) -> ArchiveError {
        let message = error.to_string();
        ArchiveError::Io { url: self.url_of(path), message: credentials_hint(&self.url, message) }
    }

    /// The object at `path`, if there is one and it is at most `limit` bytes.
    pub async fn get(&self, path: &str, limit: u64) -> Result<Option<Bytes>, ArchiveError> {
        let got = match self.store.get(&self.path(path)).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.fail(path, e)),
        };
        if got.meta.size > limit {
            return Err(self.fail(path, format!("{} bytes, over the {limit} read", got.meta.size)));
        }
        got.bytes().await.map(Some).map_err(|e| self.fail(path, e))
    }

    /// The object at `path` as a stream of chunks, with its size; `None` if absent.
    pub async fn stream(
        &self,
        path: &str,
    ) -> Result<Option<(u64, futures::stream::BoxStream<'static, Result<Bytes, String>>)>, ArchiveError> {
        match self.store.get(&self.path(path)).await {
            Ok(got) => {
                let size = got.meta.size;
                Ok(Some((size, got.into_stream().map(|chunk| chunk.map_err(|e| e.to_string())).boxed())))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail(path, e)),
        }
    }

    /// Writes `bytes` at `path`, whole or not at all (the store's put is atomic).
    pub async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
        let payload = PutPayload::from(Bytes::copy_from_slice(bytes));
        self.store.put(&self.path(path), payload).await.map(|_| ()).map_err(|e| self.fail(path, e))
    }

    /// Writes `bytes` at `path` unless it already holds exactly them; `true` if written.
    /// Not async: `af ledger publish` writes one object at a time, in the layout's order.
    pub fn write_if_changed(&self, path: &str, bytes: &[u8]) -> Result<bool, ArchiveError> {
        self.block_on(async {
            let held = self.get(path, bytes.len() as u64).await;
            if matches!(&held, Ok(Some(held)) if held[..] == *bytes) {
                return Ok(false);
            }
            self.put(path, bytes).await?;
            Ok(true)
        })
    }

    /// [`Self::put`], not async.
    pub fn write(&self, path: &str, bytes: &[u8]) -> Result<(), ArchiveError> {
        self.block_on(self.put(path, bytes))
    }

    /// [`Self::get`], not async.
    pub fn read(&self, path: &str, limit: u64) -> Result<Option<Bytes>, ArchiveError> {
        self.block_on(self.get(path, limit))
    }

    fn block_on<T>(&self, work: impl std::future::Future<Output = Result<T, ArchiveError>>) -> Result<T, ArchiveError> {
        if self.runtime.0.get().is_none() {
            let made = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let made = made.map_err(|e| self.fail("", format!("starting the async runtime: {e}")))?;
            let _ = self.runtime.0.set(made);
        }
        match self.runtime.0.get() {
            Some(runtime) => runtime.block_on(work),
            None => Err(self.fail("", "no async runtime")),
        }
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// An object store's error, with what to do when it failed for want of credentials: the
/// S3 client with none in the environment asks the cloud's instance metadata address,
/// and its refusal there says nothing of credentials.
fn credentials_hint(url: &str, message: String) -> String {
    let missing = message.contains("169.254.169.254")
        || message.contains("credential")
        || message.contains("Credential")
        || message.contains("NoCredentials");
    if !missing {
        return message;
    }
    let how = match url.split("://").next() {
        Some("s3") => "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_ENDPOINT_URL for an S3-compatible store, AWS_REGION if needed)",
        Some("gs") => "set GOOGLE_SERVICE_ACCOUNT (a service account key file)",
        Some("az") => "set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
        _ => return message,
    };
    format!("no credentials for {url} were found: {how}, or run where the cloud gives them to the machine ({message})")
}

#[cfg(test)]
mod tests {
    use super::credentials_hint;

    #[test]
    fn a_store_refused_for_want_of_credentials_says_how_to_give_them() {
        let metadata = "Error performing PUT http://169.254.169.254/latest/api/token in 1ms: 403".to_string();
        let said = credentials_hint("s3://bucket/prefix", metadata.clone());
        assert!(said.starts_with("no credentials for s3://bucket/prefix were found: set AWS_ACCESS_KEY_ID"), "{said}");
        assert!(said.contains(&metadata), "the store's own words stay");
        assert!(credentials_hint("gs://b", "no Credentials".into()).contains("GOOGLE_SERVICE_ACCOUNT"));
        assert_eq!(credentials_hint("s3://b", "404 Not Found".into()), "404 Not Found", "other errors as they are");
        assert_eq!(credentials_hint("/some/folder", "credential".into()), "credential");
    }
}
