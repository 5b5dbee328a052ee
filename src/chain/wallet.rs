//! Bittensor wallets as btcli and the `bittensor-wallet` package write them:
//! `WALLETS_DIR/NAME/{coldkeypub.txt, hotkeys/HOTKEY, hotkeys/HOTKEYpub.txt}`, keyfiles
//! as JSON, hotkeys optionally sealed with a password (`$NACL`: libsodium's argon2i13 at
//! its SENSITIVE limits over a fixed salt, then XSalsa20-Poly1305). Addresses are
//! derived from key bytes, never taken from a file's `ss58Address` field; a file whose
//! fields disagree with its own key is refused by name.

use super::hotkey::Hotkey;
use super::ChainError;
use std::path::{Path, PathBuf};
use subxt_signer::sr25519::Keypair;

/// Env var holding the password of an encrypted hotkey.
pub const HOTKEY_PASSWORD_ENV: &str = "AF_HOTKEY_PASSWORD";
/// A keyfile is a few hundred bytes; anything larger is not one.
pub const MAX_KEYFILE_BYTES: u64 = 64 * 1024;
/// btcli's default wallet and hotkey name.
pub const DEFAULT_NAME: &str = "default";

const NACL_PREFIX: &[u8] = b"$NACL";
/// bittensor-wallet's fixed salt for the password KDF (`NACL_SALT`).
const NACL_SALT: &[u8; 16] = b"\x13q\x83\xdf\xf1Z\t\xbc\x9c\x90\xb5Q\x879\xe9\xb1";
/// libsodium's `crypto_pwhash_argon2i_OPSLIMIT_SENSITIVE` and `MEMLIMIT_SENSITIVE`
/// (512 MiB, in KiB for the argon2 crate).
const ARGON2I_T_COST: u32 = 8;
const ARGON2I_M_COST_KIB: u32 = 512 * 1024;
const NONCE_BYTES: usize = 24;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WalletError {
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Keyfile { path: PathBuf, reason: String },
    #[error("{path} is encrypted: set {HOTKEY_PASSWORD_ENV}, or run on a terminal to be asked")]
    PasswordNeeded { path: PathBuf },
    #[error("{path}: wrong password (or a damaged file)")]
    WrongPassword { path: PathBuf },
}

impl From<WalletError> for ChainError {
    fn from(e: WalletError) -> ChainError {
        ChainError::Key(e.to_string())
    }
}

/// Where a wallet's files are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletPaths {
    pub dir: PathBuf,
    pub wallet: String,
    pub hotkey: String,
}

impl WalletPaths {
    /// btcli's defaults: `~/.bittensor/wallets`, wallet and hotkey "default".
    pub fn new(dir: Option<PathBuf>, wallet: Option<&str>, hotkey: Option<&str>) -> WalletPaths {
        WalletPaths {
            dir: dir.unwrap_or_else(default_wallets_dir),
            wallet: wallet.unwrap_or(DEFAULT_NAME).to_string(),
            hotkey: hotkey.unwrap_or(DEFAULT_NAME).to_string(),
        }
    }

    /// Wallet and hotkey are names, as btcli makes them: not paths. `--hotkey ../coldkey`
    /// would otherwise reach the coldkey from the hotkeys directory.
    pub fn check_names(&self) -> Result<(), WalletError> {
        for (what, name) in [("wallet", &self.wallet), ("hotkey", &self.hotkey)] {
            if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) || name.contains('\0') {
                return Err(WalletError::File {
                    path: self.dir.join(name),
                    reason: format!("the {what} name {name:?} must be a plain name (btcli's), not a path"),
                });
            }
        }
        Ok(())
    }

    pub fn hotkey_file(&self) -> PathBuf {
        self.dir.join(&self.wallet).join("hotkeys").join(&self.hotkey)
    }

    pub fn hotkeypub_file(&self) -> PathBuf {
        self.dir.join(&self.wallet).join("hotkeys").join(format!("{}pub.txt", self.hotkey))
    }

    pub fn coldkeypub_file(&self) -> PathBuf {
        self.dir.join(&self.wallet).join("coldkeypub.txt")
    }
}

pub fn default_wallets_dir() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".bittensor/wallets")
}

/// Reads a keyfile: a regular file of at most `MAX_KEYFILE_BYTES`.
pub fn read_keyfile(path: &Path) -> Result<Vec<u8>, WalletError> {
    use std::io::Read;
    let file_error = |reason: String| WalletError::File { path: path.to_path_buf(), reason };
    let meta = std::fs::metadata(path).map_err(|e| file_error(e.to_string()))?;
    if !meta.is_file() {
        return Err(file_error("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_KEYFILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| file_error(e.to_string()))?;
    if bytes.len() as u64 > MAX_KEYFILE_BYTES {
        return Err(file_error(format!("larger than {MAX_KEYFILE_BYTES} bytes: not a keyfile")));
    }
    Ok(bytes)
}

/// Whether keyfile bytes are sealed with a password (`$NACL`, or the older ansible-vault
/// and fernet formats, which `af` does not open).
pub fn is_encrypted(bytes: &[u8]) -> bool {
    bytes.starts_with(NACL_PREFIX) || bytes.starts_with(b"$ANSIBLE_VAULT") || bytes.starts_with(b"gAAAAA")
}

/// Opens a `$NACL` keyfile with its password. Deliberately slow (argon2i, 512 MiB).
pub fn open_nacl(path: &Path, bytes: &[u8], password: &[u8]) -> Result<Vec<u8>, WalletError> {
    use crypto_secretbox::aead::{Aead, KeyInit};
    let keyfile = |reason: &str| WalletError::Keyfile { path: path.to_path_buf(), reason: reason.into() };
    let Some(sealed) = bytes.strip_prefix(NACL_PREFIX) else {
        return Err(keyfile(if is_encrypted(bytes) {
            "encrypted in an older format (ansible-vault or fernet): re-encrypt it with a current btcli"
        } else {
            "not a $NACL keyfile"
        }));
    };
    if sealed.len() < NONCE_BYTES + 16 {
        return Err(keyfile("too short for a nonce and a tag"));
    }
    let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
    let key = derive_key(password).map_err(|e| keyfile(&e))?;
    crypto_secretbox::XSalsa20Poly1305::new(&key.into())
        .decrypt(nonce.into(), ciphertext)
        .map_err(|_| WalletError::WrongPassword { path: path.to_path_buf() })
}

fn derive_key(password: &[u8]) -> Result<[u8; 32], String> {
    let params = argon2::Params::new(ARGON2I_M_COST_KIB, ARGON2I_T_COST, 1, Some(32)).map_err(|e| e.to_string())?;
    let mut key = [0u8; 32];
    argon2::Argon2::new(argon2::Algorithm::Argon2i, argon2::Version::V0x13, params)
        .hash_password_into(password, NACL_SALT, &mut key)
        .map_err(|e| e.to_string())?;
    Ok(key)
}

/// A keyfile's JSON fields that `af` reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyfileJson {
    secret_seed: Option<String>,
    secret_phrase: Option<String>,
    private_key: Option<String>,
    public_key: Option<String>,
    account_id: Option<String>,
    ss58_address: Option<String>,
}

fn parse_json(path: &Path, bytes: &[u8]) -> Result<KeyfileJson, WalletError> {
    serde_json::from_slice(bytes)
        .map_err(|e| WalletError::Keyfile { path: path.to_path_buf(), reason: format!("not a keyfile's JSON ({e})") })
}

fn hex32(path: &Path, field: &str, text: &str) -> Result<[u8; 32], WalletError> {
    hex::decode(text.trim_start_matches("0x")).ok().and_then(|b| <[u8; 32]>::try_from(b).ok()).ok_or_else(|| {
        WalletError::Keyfile { path: path.to_path_buf(), reason: format!("{field} is not 32 bytes of hex") }
    })
}

/// The public key a keyfile claims (`publicKey`, `accountId`, `ss58Address`), checked to
/// be one and the same key wherever more than one is present.
fn claimed_public(path: &Path, json: &KeyfileJson) -> Result<Option<[u8; 32]>, WalletError> {
    let mut claims: Vec<(&str, [u8; 32])> = Vec::new();
    if let Some(text) = &json.public_key {
        claims.push(("publicKey", hex32(path, "publicKey", text)?));
    }
    if let Some(text) = &json.account_id {
        claims.push(("accountId", hex32(path, "accountId", text)?));
    }
    if let Some(text) = &json.ss58_address {
        let account = super::subtensor::parse_ss58(text).map_err(|_| WalletError::Keyfile {
            path: path.to_path_buf(),
            reason: "ss58Address is not an ss58 address".into(),
        })?;
        claims.push(("ss58Address", account));
    }
    if let Some((name, _)) = claims.iter().find(|(_, key)| *key != claims[0].1) {
        return Err(WalletError::Keyfile {
            path: path.to_path_buf(),
            reason: format!("{name} and {} name different keys", claims[0].0),
        });
    }
    Ok(claims.first().map(|c| c.1))
}

/// A hotkey from its (decrypted) keyfile JSON: `secretSeed`, else `secretPhrase`, else
/// `privateKey` (a hotkey made from a derivation URI keeps only that); its public key
/// must be the one the file claims. A `privateKey` alone must come with a claim: it is
/// the only way to tell which of two layouts the file uses, and a key nobody named is
/// not used.
pub fn keypair_from_json(path: &Path, bytes: &[u8]) -> Result<Hotkey, WalletError> {
    let json = parse_json(path, bytes)?;
    let keyfile = |reason: String| WalletError::Keyfile { path: path.to_path_buf(), reason };
    let claimed = claimed_public(path, &json)?;
    let hotkey: Hotkey = match (&json.secret_seed, &json.secret_phrase, &json.private_key) {
        (Some(seed), _, _) => {
            Keypair::from_secret_key(hex32(path, "secretSeed", seed)?).map_err(|e| keyfile(e.to_string()))?.into()
        }
        (None, Some(phrase), _) => {
            let phrase =
                subxt_signer::bip39::Mnemonic::parse(phrase).map_err(|e| keyfile(format!("secretPhrase: {e}")))?;
            Keypair::from_phrase(&phrase, None).map_err(|e| keyfile(e.to_string()))?.into()
        }
        (None, None, Some(private)) => {
            let private: zeroize::Zeroizing<Vec<u8>> =
                zeroize::Zeroizing::new(hex::decode(private.trim_start_matches("0x")).unwrap_or_default());
            let private: &[u8; 64] =
                private.as_slice().try_into().map_err(|_| keyfile("privateKey is not 64 bytes of hex".into()))?;
            let Some(public) = claimed else {
                return Err(keyfile(
                    "privateKey with no publicKey, accountId or ss58Address: nothing says whose key it is".into(),
                ));
            };
            return Hotkey::from_private_key(private, &public)
                .ok_or_else(|| keyfile("its privateKey is not the key its public fields name".into()));
        }
        (None, None, None) => {
            return Err(keyfile("no secretSeed, secretPhrase or privateKey: not a hotkey's secret keyfile".into()))
        }
    };
    if let Some(claimed) = claimed {
        if claimed != hotkey.public_key() {
            return Err(keyfile("its public key is not the key its secret derives".into()));
        }
    }
    Ok(hotkey)
}

/// A public keyfile (`coldkeypub.txt`, `HOTKEYpub.txt`): its key, its fields agreeing.
pub fn public_from_json(path: &Path, bytes: &[u8]) -> Result<[u8; 32], WalletError> {
    let json = parse_json(path, bytes)?;
    claimed_public(path, &json)?.ok_or_else(|| WalletError::Keyfile {
        path: path.to_path_buf(),
        reason: "no publicKey, accountId or ss58Address".into(),
    })
}

/// The name of the hotkey of `paths`' wallet whose public key is `ss58` (after a hotkey
/// swap, the new hotkey's file), from its `NAMEpub.txt` or, without one, its keyfile's
/// public fields; at most 4,096 files are looked at.
pub fn hotkey_named(paths: &WalletPaths, ss58: &str) -> Option<String> {
    let dir = paths.dir.join(&paths.wallet).join("hotkeys");
    for entry in std::fs::read_dir(&dir).ok()?.flatten().take(4_096) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with("pub.txt") || name.starts_with('.') {
            continue;
        }
        let public = [dir.join(format!("{name}pub.txt")), entry.path()]
            .iter()
            .find_map(|path| read_keyfile(path).ok().and_then(|bytes| public_from_json(path, &bytes).ok()));
        if public.is_some_and(|key| super::subtensor::ss58(&key) == ss58) {
            return Some(name);
        }
    }
    None
}

/// Where an encrypted hotkey's password comes from.
pub enum Password<'a> {
    /// `AF_HOTKEY_PASSWORD`, else a prompt when stdin is a terminal.
    EnvOrPrompt,
    Given(&'a [u8]),
    /// Do not open encrypted hotkeys.
    None,
}

/// Loads a wallet's hotkey, opening it with a password if it is encrypted.
/// A file holding the wallet's coldkey (its public key in `coldkeypub.txt`) is refused:
/// a hotkey signs often, on a machine facing the internet; a coldkey must not.
pub fn load_hotkey(paths: &WalletPaths, password: Password<'_>) -> Result<Hotkey, WalletError> {
    paths.check_names()?;
    let hotkey = load_hotkey_file(paths, password)?;
    let cold = paths.coldkeypub_file();
    if let Ok(bytes) = read_keyfile(&cold) {
        if public_from_json(&cold, &bytes).is_ok_and(|public| public == hotkey.public_key()) {
            return Err(WalletError::Keyfile {
                path: paths.hotkey_file(),
                reason: "this is the wallet's coldkey (its public key is in coldkeypub.txt): a validator or miner signs with a hotkey; make one with `btcli wallet new-hotkey`".into(),
            });
        }
    }
    Ok(hotkey)
}

fn load_hotkey_file(paths: &WalletPaths, password: Password<'_>) -> Result<Hotkey, WalletError> {
    let path = paths.hotkey_file();
    let bytes = read_keyfile(&path)?;
    if !is_encrypted(&bytes) {
        return keypair_from_json(&path, &bytes);
    }
    let password: zeroize::Zeroizing<Vec<u8>> = match password {
        Password::Given(p) => zeroize::Zeroizing::new(p.to_vec()),
        Password::None => return Err(WalletError::PasswordNeeded { path }),
        Password::EnvOrPrompt => match std::env::var(HOTKEY_PASSWORD_ENV) {
            Ok(p) => zeroize::Zeroizing::new(p.into_bytes()),
            Err(_) if std::io::IsTerminal::is_terminal(&std::io::stdin()) => {
                let prompt = format!("Password for {}: ", path.display());
                let p = rpassword::prompt_password(prompt)
                    .map_err(|e| WalletError::File { path: path.clone(), reason: e.to_string() })?;
                zeroize::Zeroizing::new(p.into_bytes())
            }
            Err(_) => return Err(WalletError::PasswordNeeded { path }),
        },
    };
    let plain = zeroize::Zeroizing::new(open_nacl(&path, &bytes, &password)?);
    keypair_from_json(&path, &plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made with bittensor-wallet 4.1.1 (PyPI): `fixtures/wallet/README.md` says how.
    fn fixture(parts: &[&str]) -> PathBuf {
        parts.iter().fold(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/wallet"), |p, s| p.join(s))
    }

    fn expected() -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(fixture(&["expected.json"])).unwrap()).unwrap()
    }

    fn ss58(key: [u8; 32]) -> String {
        super::super::subtensor::ss58(&key)
    }

    #[test]
    fn plain_and_encrypted_hotkeys_from_bittensor_wallet_load_to_its_addresses() {
        let expected = expected();
        let dir = fixture(&[]);
        let plain = WalletPaths::new(Some(dir.clone()), Some("alice"), Some("plain"));
        assert_eq!(ss58(load_hotkey(&plain, Password::None).unwrap().public_key()), expected["plain"]);
        let sealed = WalletPaths::new(Some(dir.clone()), Some("alice"), Some("sealed"));
        assert_eq!(
            load_hotkey(&sealed, Password::None).unwrap_err(),
            WalletError::PasswordNeeded { path: sealed.hotkey_file() }
        );
        let password = expected["password"].as_str().unwrap().as_bytes();
        assert_eq!(ss58(load_hotkey(&sealed, Password::Given(password)).unwrap().public_key()), expected["sealed"]);
        assert_eq!(
            load_hotkey(&sealed, Password::Given(b"not it")).unwrap_err(),
            WalletError::WrongPassword { path: sealed.hotkey_file() }
        );
        let cold =
            public_from_json(&plain.coldkeypub_file(), &read_keyfile(&plain.coldkeypub_file()).unwrap()).unwrap();
        assert_eq!(ss58(cold), expected["coldkey"]);
        // A flipped byte of the sealed file does not open, with the right password.
        let mut flipped = read_keyfile(&sealed.hotkey_file()).unwrap();
        flipped[40] ^= 1;
        assert!(matches!(open_nacl(Path::new("x"), &flipped, password), Err(WalletError::WrongPassword { .. })));
    }

    #[test]
    fn keyfiles_whose_fields_disagree_or_that_are_not_keyfiles_are_refused_by_name() {
        let path = Path::new("hk");
        let seed = "0x35721bc1e94c7963bd56f5fd065106660b47240a6ceff8a12abd749eaa90f159";
        let good = keypair_from_json(path, format!(r#"{{"secretSeed":"{seed}"}}"#).as_bytes()).unwrap();
        let other = "0x".to_string() + &"11".repeat(32);
        let lying = format!(r#"{{"secretSeed":"{seed}","publicKey":"{other}"}}"#);
        let err = keypair_from_json(path, lying.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("not the key its secret derives"), "{err}");
        let split = format!(r#"{{"publicKey":"{other}","ss58Address":"{}"}}"#, ss58(good.public_key()));
        let err = public_from_json(path, split.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("ss58Address and publicKey name different keys"), "{err}");
        let short = format!(r#"{{"secretSeed":"{seed}","publicKey":"0x00"}}"#);
        assert!(keypair_from_json(path, short.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("publicKey is not 32 bytes"));
        assert!(keypair_from_json(path, b"\x00\x01").unwrap_err().to_string().contains("not a keyfile's JSON"));
        let public_only = format!(r#"{{"ss58Address":"{}"}}"#, ss58(good.public_key()));
        let err = keypair_from_json(path, public_only.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("no secretSeed, secretPhrase or privateKey"), "{err}");
        // A hotkey made from a URI (bittensor-wallet's create_hotkey_from_uri("//Alice")):
        // privateKey and the public fields only.
        let alice_private = "0x33a6f3093f158a7109f679410bef1a0c54168145e0cecb4df006c1c2fffb1f09925a225d97aa00682d6a59b95b18780c10d7032336e88f3442b42361f4a66011";
        let alice_public = "0xd43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d";
        let uri_keyfile = format!(
            r#"{{"accountId":"{alice_public}","publicKey":"{alice_public}","cryptoType":1,"privateKey":"{alice_private}","ss58Address":"5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"}}"#
        );
        let alice = keypair_from_json(path, uri_keyfile.as_bytes()).unwrap();
        assert_eq!(ss58(alice.public_key()), "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY");
        let unnamed = format!(r#"{{"privateKey":"{alice_private}"}}"#);
        let err = keypair_from_json(path, unnamed.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("nothing says whose key it is"), "{err}");
        let someone_else = format!(r#"{{"privateKey":"{alice_private}","publicKey":"{other}"}}"#);
        let err = keypair_from_json(path, someone_else.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("not the key its public fields name"), "{err}");
        let cut = format!(r#"{{"privateKey":"{}","publicKey":"{alice_public}"}}"#, &alice_private[..66]);
        let err = keypair_from_json(path, cut.as_bytes()).unwrap_err().to_string();
        assert!(err.contains("privateKey is not 64 bytes"), "{err}");
        let err = open_nacl(path, b"$ANSIBLE_VAULT;1.1", b"p").unwrap_err().to_string();
        assert!(err.contains("older format"), "{err}");
        // Not a regular file, and too large.
        let dir = tempfile::tempdir().unwrap();
        assert!(read_keyfile(dir.path()).unwrap_err().to_string().contains("not a regular file"));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b' '; MAX_KEYFILE_BYTES as usize + 1]).unwrap();
        assert!(read_keyfile(&big).unwrap_err().to_string().contains("not a keyfile"));
    }

    #[test]
    fn btcli_defaults_name_the_wallet_and_hotkey_default() {
        let paths = WalletPaths::new(Some("/w".into()), None, Some("hk"));
        assert_eq!(paths.hotkey_file(), Path::new("/w/default/hotkeys/hk"));
        assert_eq!(
            WalletPaths::new(Some("/w".into()), Some("a"), None).hotkeypub_file(),
            Path::new("/w/a/hotkeys/defaultpub.txt")
        );
    }

    #[test]
    fn a_coldkey_or_a_path_is_refused_as_a_hotkey_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let wallet = dir.path().join("w");
        std::fs::create_dir_all(wallet.join("hotkeys")).unwrap();
        let alice = fixture(&["alice", "hotkeys"]);
        std::fs::copy(alice.join("plain"), wallet.join("hotkeys/plain")).unwrap();
        std::fs::copy(fixture(&["alice", "coldkeypub.txt"]), wallet.join("coldkeypub.txt")).unwrap();
        let paths = |hotkey: &str| WalletPaths::new(Some(dir.path().to_path_buf()), Some("w"), Some(hotkey));
        assert!(load_hotkey(&paths("plain"), Password::None).is_ok(), "a real hotkey loads");
        for name in ["../coldkey", "..", "a/b", ""] {
            let error = load_hotkey(&paths(name), Password::None).unwrap_err().to_string();
            assert!(error.contains("must be a plain name"), "{name:?}: {error}");
        }
        // The coldkey itself, wherever it is put: its public key is the wallet's coldkey's.
        std::fs::copy(alice.join("plainpub.txt"), wallet.join("coldkeypub.txt")).unwrap();
        let error = load_hotkey(&paths("plain"), Password::None).unwrap_err().to_string();
        assert!(error.contains("this is the wallet's coldkey"), "{error}");
    }
}
