//! The validator's ed25519 ledger key on disk: created with mode 0600 and never
//! printed, logged or shown by `Debug`; refused on load if others can read it.
//!
//! File format (text, one JSON object): `{"type":"af-ed25519-ledger-key","version":1,
//! "secret_seed":"<64 hex>","public_key":"<64 hex>"}`; the public key is a check.

use crate::bytes::ValidatorKey;
use ed25519_dalek::SigningKey;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const KEY_FILE: &str = "validator.key";
const KEY_TYPE: &str = "af-ed25519-ledger-key";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {0} already exists; refusing to overwrite a key")]
    Exists(PathBuf),
    #[error("cannot {doing} key file {path}: {source}")]
    Io {
        doing: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("key file {path} is readable by group or others (mode {mode:o}); run `chmod 600 {path}`")]
    Permissions { path: PathBuf, mode: u32 },
    #[error("key file {path} is not a valid af ledger key: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("no source of randomness: {0}")]
    Random(String),
}

/// The signing key. `Debug` shows only the public half.
pub struct LedgerKey(SigningKey);

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LedgerKey(public {})", self.validator())
    }
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
    secret_seed: String,
    public_key: String,
}

impl LedgerKey {
    pub fn generate() -> Result<LedgerKey, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::getrandom(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        let key = LedgerKey(SigningKey::from_bytes(&seed));
        seed.fill(0);
        Ok(key)
    }

    /// A key from a known seed: for test vectors and the deterministic demo only.
    pub fn from_seed(seed: [u8; 32]) -> LedgerKey {
        LedgerKey(SigningKey::from_bytes(&seed))
    }

    pub fn signing_key(&self) -> &SigningKey {
        &self.0
    }

    pub fn validator(&self) -> ValidatorKey {
        ValidatorKey(self.0.verifying_key().to_bytes())
    }

    /// Writes the key to a new file with mode 0600; never overwrites. The file appears
    /// whole or not at all (written to a temporary name, fsync'd, then hard-linked into
    /// place, which fails if the name exists), so a crash cannot leave a half key.
    pub fn write_new(&self, path: &Path) -> Result<(), KeyError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |doing: &'static str| move |source| KeyError::Io { doing, path: path.into(), source };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io("create the folder of"))?;
        if path.exists() {
            return Err(KeyError::Exists(path.into()));
        }
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        let mut contents = serde_json::to_string(&KeyFile {
            kind: KEY_TYPE.into(),
            version: 1,
            secret_seed: hex::encode(self.0.to_bytes()),
            public_key: self.validator().to_hex(),
        })
        .expect("a key file serializes");
        contents.push('\n');
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut file| file.write_all(contents.as_bytes()).and_then(|()| file.sync_all()));
        zero_string(&mut contents);
        written.map_err(io("write"))?;
        let linked = std::fs::hard_link(&temp, path);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(KeyError::Exists(path.into())),
            Err(e) => return Err(io("create")(e)),
        }
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io("sync the folder of"))
    }

    pub fn load(path: &Path) -> Result<LedgerKey, KeyError> {
        use std::os::unix::fs::PermissionsExt;
        let metadata =
            std::fs::metadata(path).map_err(|source| KeyError::Io { doing: "read", path: path.into(), source })?;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissions { path: path.into(), mode });
        }
        // A device or a pipe reports no size and may never end: only a regular file is read.
        if !metadata.is_file() {
            return Err(KeyError::Invalid { path: path.into(), reason: "not a regular file".into() });
        }
        if metadata.len() > 4096 {
            return Err(KeyError::Invalid { path: path.into(), reason: "larger than 4 KiB".into() });
        }
        let mut contents = String::new();
        {
            use std::io::Read;
            let io = |source| KeyError::Io { doing: "read", path: path.into(), source };
            // Bounded even if the file grows between the check and the read.
            std::fs::File::open(path).map_err(io)?.take(4097).read_to_string(&mut contents).map_err(io)?;
        }
        if contents.len() > 4096 {
            zero_string(&mut contents);
            return Err(KeyError::Invalid { path: path.into(), reason: "larger than 4 KiB".into() });
        }
        let parsed: Result<KeyFile, _> = serde_json::from_str(&contents);
        // A Bittensor wallet's key file (JSON with an ss58 address, or encrypted) is the
        // likeliest wrong file: name it and the command that reads it.
        let wallet_file = parsed.is_err()
            && (["\"ss58Address\"", "\"accountId\"", "\"secretPhrase\""].iter().any(|m| contents.contains(m))
                || ["$NACL", "$BT", "$ANSIBLE"].iter().any(|m| contents.starts_with(m)));
        zero_string(&mut contents);
        if wallet_file {
            return Err(KeyError::Invalid {
                path: path.into(),
                reason: "it is a Bittensor wallet key file (a hotkey or coldkey); `af wallet show --wallet NAME \
                         --hotkey NAME` shows its address, and `af key generate --out FILE` makes a ledger key"
                    .into(),
            });
        }
        let invalid = |reason: &str| KeyError::Invalid { path: path.into(), reason: reason.into() };
        // serde_json's message could quote the secret; say only where it failed.
        let mut file = parsed
            .map_err(|e| invalid(&format!("not the expected JSON (line {}, column {})", e.line(), e.column())))?;
        if file.kind != KEY_TYPE || file.version != 1 {
            return Err(invalid(&format!(
                "type {:?} version {}, expected {KEY_TYPE:?} version 1",
                file.kind, file.version
            )));
        }
        let mut seed = [0u8; 32];
        let decoded = hex::decode_to_slice(file.secret_seed.trim(), &mut seed);
        zero_string(&mut file.secret_seed);
        decoded.map_err(|_| invalid("secret_seed is not 64 hex digits"))?;
        let key = LedgerKey(SigningKey::from_bytes(&seed));
        seed.fill(0);
        if key.validator().to_hex() != file.public_key.trim().to_ascii_lowercase() {
            return Err(invalid("public_key does not match secret_seed"));
        }
        Ok(key)
    }
}

fn zero_string(s: &mut String) {
    // SAFETY: writing zero bytes keeps the contents valid UTF-8.
    unsafe { s.as_bytes_mut().fill(0) };
    s.clear();
}
