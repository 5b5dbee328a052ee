//! An sr25519 hotkey, whichever way its keyfile holds the secret: a 32-byte seed or a
//! seed phrase (expanded as Substrate does, through `subxt-signer`), or the 64-byte
//! expanded secret key alone (`privateKey`), which is all a hotkey made from a derivation
//! URI (`btcli --uri //name`, bittensor-wallet's `create_hotkey_from_uri`) keeps. It
//! signs extrinsics for subxt; the secret is never printed or logged.

use subxt::config::SubstrateConfig;
use subxt::utils::{AccountId32, MultiSignature};

/// ss58 (generic substrate prefix 42, as Bittensor uses) of a 32-byte account.
pub fn ss58(account: &[u8; 32]) -> String {
    AccountId32(*account).to_string()
}

/// The signing context of every Substrate sr25519 signature.
const SUBSTRATE_SIGNING_CONTEXT: &[u8] = b"substrate";

#[derive(Clone)]
pub enum Hotkey {
    /// From a seed, phrase or secret URI.
    Seeded(subxt_signer::sr25519::Keypair),
    /// From the expanded secret key (key scalar and nonce) of a keyfile's `privateKey`.
    Expanded(schnorrkel::Keypair),
}

impl std::fmt::Debug for Hotkey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hotkey({})", ss58(&self.public_key()))
    }
}

impl From<subxt_signer::sr25519::Keypair> for Hotkey {
    fn from(keypair: subxt_signer::sr25519::Keypair) -> Hotkey {
        Hotkey::Seeded(keypair)
    }
}

impl Hotkey {
    /// The key a 64-byte `privateKey` holds, read the way that gives `expected_public`:
    /// bittensor-wallet writes schnorrkel's own layout (`SecretKey::to_bytes`), while
    /// polkadot-js and py-substrate-interface write the ed25519-style layout (scalar
    /// times the cofactor). `None` when neither layout gives that public key.
    pub fn from_private_key(private_key: &[u8; 64], expected_public: &[u8; 32]) -> Option<Hotkey> {
        let layouts =
            [schnorrkel::SecretKey::from_bytes(private_key), schnorrkel::SecretKey::from_ed25519_bytes(private_key)];
        layouts.into_iter().flatten().find(|secret| secret.to_public().to_bytes() == *expected_public).map(|secret| {
            let public = secret.to_public();
            Hotkey::Expanded(schnorrkel::Keypair { secret, public })
        })
    }

    pub fn public_key(&self) -> [u8; 32] {
        match self {
            Hotkey::Seeded(keypair) => keypair.public_key().0,
            Hotkey::Expanded(keypair) => keypair.public.to_bytes(),
        }
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        match self {
            Hotkey::Seeded(keypair) => keypair.sign(message).0,
            Hotkey::Expanded(keypair) => {
                keypair.sign(schnorrkel::signing_context(SUBSTRATE_SIGNING_CONTEXT).bytes(message)).to_bytes()
            }
        }
    }
}

impl subxt::tx::Signer<SubstrateConfig> for Hotkey {
    fn account_id(&self) -> AccountId32 {
        AccountId32(self.public_key())
    }

    fn sign(&self, signer_payload: &[u8]) -> MultiSignature {
        MultiSignature::Sr25519(Hotkey::sign(self, signer_payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `//Alice`'s keyfile as bittensor-wallet 4.1.1 writes it for
    /// `create_hotkey_from_uri("//Alice")`: `privateKey` and the public fields, no seed.
    const ALICE_PRIVATE: &str = "33a6f3093f158a7109f679410bef1a0c54168145e0cecb4df006c1c2fffb1f09925a225d97aa00682d6a59b95b18780c10d7032336e88f3442b42361f4a66011";
    const ALICE_PUBLIC: &str = "d43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d";

    fn bytes<const N: usize>(text: &str) -> [u8; N] {
        hex::decode(text).unwrap().try_into().unwrap()
    }

    #[test]
    fn a_uri_hotkeys_private_key_is_the_uris_key_and_signs_for_it() {
        let public = bytes::<32>(ALICE_PUBLIC);
        let hotkey = Hotkey::from_private_key(&bytes::<64>(ALICE_PRIVATE), &public).expect("Alice's key");
        let from_uri = subxt_signer::sr25519::Keypair::from_uri(&"//Alice".parse().unwrap()).unwrap();
        assert_eq!(hotkey.public_key(), from_uri.public_key().0);
        assert_eq!(ss58(&hotkey.public_key()), "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY");
        let signature = subxt_signer::sr25519::Signature(hotkey.sign(b"payload"));
        assert!(subxt_signer::sr25519::verify(&signature, b"payload", &from_uri.public_key()));
        assert!(!subxt_signer::sr25519::verify(&signature, b"other", &from_uri.public_key()));
        // The same secret in the ed25519-style layout (polkadot-js) reads as the same key.
        let keypair = schnorrkel::SecretKey::from_bytes(&bytes::<64>(ALICE_PRIVATE)).unwrap();
        let ed25519_layout: [u8; 64] = keypair.to_ed25519_bytes();
        assert_eq!(Hotkey::from_private_key(&ed25519_layout, &public).unwrap().public_key(), public);
        // A private key that is not the claimed public key's is no key at all.
        assert!(Hotkey::from_private_key(&bytes::<64>(ALICE_PRIVATE), &[7; 32]).is_none());
        let mut flipped = bytes::<64>(ALICE_PRIVATE);
        flipped[5] ^= 1;
        assert!(Hotkey::from_private_key(&flipped, &public).is_none());
    }
}
