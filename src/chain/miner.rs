//! What a miner commits on chain (ledger-spec/13): the model it serves and where, as
//! compact JSON (`{"model":…,"revision":…,"endpoint":…}`, readable by other tools, as
//! Affine's `{"model","revision"}` is), split over at most three `Data::Raw` fields of at
//! most 128 bytes. Pure: parsing never panics and refuses a bad value by name.

use serde::{Deserialize, Serialize};

/// Raw fields per commitment (`MaxFields`) and bytes per `Raw` field.
pub const MAX_FIELDS: usize = 3;
pub const MAX_FIELD_BYTES: usize = 128;
/// The whole JSON: what three `Raw128` fields hold.
pub const MAX_COMMITMENT_BYTES: usize = MAX_FIELDS * MAX_FIELD_BYTES;
pub const MAX_MODEL_BYTES: usize = 128;
pub const MAX_REVISION_BYTES: usize = 64;
pub const MAX_ENDPOINT_BYTES: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinerCommitment {
    /// The model's name (a Hugging Face repository, as Affine has it).
    pub model: String,
    /// The model's revision (a commit hash).
    pub revision: String,
    /// Where validators reach it: an OpenAI-compatible base URL (`http://` or
    /// `https://`), or `chutes:SLUG` for a model served by Chutes.
    pub endpoint: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MinerCommitmentError {
    #[error("{field}: {reason}")]
    Field { field: &'static str, reason: String },
    #[error(
        "the commitment is {len} bytes of JSON, over the {MAX_COMMITMENT_BYTES} that {MAX_FIELDS} Raw fields hold"
    )]
    TooLarge { len: usize },
    #[error("not a miner commitment: {0}")]
    NotOne(String),
}

/// The identity sybil collapse compares: the same model at the same revision is one
/// model, whoever commits it (ledger-spec/13).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ModelIdentity {
    pub model: String,
    pub revision: String,
}

impl MinerCommitment {
    /// Checks every field's bounds and form.
    pub fn new(model: &str, revision: &str, endpoint: &str) -> Result<MinerCommitment, MinerCommitmentError> {
        let commitment = MinerCommitment {
            model: model.to_string(),
            revision: revision.to_string(),
            endpoint: endpoint.to_string(),
        };
        commitment.check()?;
        Ok(commitment)
    }

    fn check(&self) -> Result<(), MinerCommitmentError> {
        let field = |field: &'static str, reason: String| Err(MinerCommitmentError::Field { field, reason });
        for (name, value, max) in [
            ("model", &self.model, MAX_MODEL_BYTES),
            ("revision", &self.revision, MAX_REVISION_BYTES),
            ("endpoint", &self.endpoint, MAX_ENDPOINT_BYTES),
        ] {
            if value.is_empty() || value.len() > max {
                return field(name, format!("{} bytes; must be 1..={max}", value.len()));
            }
            if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return field(name, "must not contain whitespace or control characters".into());
            }
        }
        // A log records the pair as MODEL@REVISION; an '@' in either would read back as
        // another pair, and the "already played" check would never match (ledger-spec/13).
        for (name, value) in [("model", &self.model), ("revision", &self.revision)] {
            if value.contains('@') {
                return field(name, "must not contain '@' (a log records MODEL@REVISION)".into());
            }
        }
        let endpoint = &self.endpoint;
        if let Some(slug) = endpoint.strip_prefix("chutes:") {
            if slug.is_empty() {
                return field("endpoint", "chutes: needs a model or slug after it".into());
            }
        } else {
            match url::Url::parse(endpoint) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {}
                _ => return field("endpoint", "must be an http(s):// base URL or chutes:SLUG".into()),
            }
        }
        Ok(())
    }

    pub fn identity(&self) -> ModelIdentity {
        ModelIdentity { model: self.model.clone(), revision: self.revision.clone() }
    }

    /// The JSON bytes, keys in the order model, revision, endpoint, no spaces.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("strings serialize")
    }

    /// The JSON split into `Raw` fields of at most 128 bytes, in order.
    pub fn to_fields(&self) -> Result<Vec<Vec<u8>>, MinerCommitmentError> {
        self.check()?;
        let json = self.to_json();
        if json.len() > MAX_COMMITMENT_BYTES {
            return Err(MinerCommitmentError::TooLarge { len: json.len() });
        }
        Ok(json.chunks(MAX_FIELD_BYTES).map(<[u8]>::to_vec).collect())
    }

    /// Reads a commitment's fields back: their concatenation must be one JSON object with
    /// string `model`, `revision` and `endpoint` (other keys are ignored, for tools that
    /// add their own), each passing the same checks as when committed.
    pub fn from_fields(fields: &[Vec<u8>]) -> Result<MinerCommitment, MinerCommitmentError> {
        if fields.is_empty() || fields.len() > MAX_FIELDS {
            return Err(MinerCommitmentError::NotOne(format!("{} fields", fields.len())));
        }
        let json: Vec<u8> = fields.concat();
        if json.len() > MAX_COMMITMENT_BYTES {
            return Err(MinerCommitmentError::TooLarge { len: json.len() });
        }
        if json.first() != Some(&b'{') {
            return Err(MinerCommitmentError::NotOne("not a JSON object".into()));
        }
        let commitment: MinerCommitment =
            serde_json::from_slice(&json).map_err(|e| MinerCommitmentError::NotOne(e.to_string()))?;
        commitment.check()?;
        Ok(commitment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_raw_fields_and_matches_the_spec_vector() {
        let c = MinerCommitment::new("org/model-7b", "0123abcd", "http://127.0.0.1:8001").unwrap();
        let json = c.to_json();
        assert_eq!(json, br#"{"model":"org/model-7b","revision":"0123abcd","endpoint":"http://127.0.0.1:8001"}"#);
        let fields = c.to_fields().unwrap();
        // ledger-spec/13's test vector.
        assert_eq!(
            hex::encode(&fields[0]),
            "7b226d6f64656c223a226f72672f6d6f64656c2d3762222c227265766973696f6e223a223031323361626364222c22656e64706f696e74223a22687474703a2f2f3132372e302e302e313a38303031227d"
        );
        assert_eq!(fields.len(), 1);
        assert_eq!(MinerCommitment::from_fields(&fields).unwrap(), c);
        // A long one spans fields of 128 bytes and reads back the same.
        let long =
            MinerCommitment::new(&"m".repeat(128), &"r".repeat(64), &format!("https://{}.io/v1", "e".repeat(100)))
                .unwrap();
        let fields = long.to_fields().unwrap();
        assert_eq!(fields.iter().map(Vec::len).collect::<Vec<_>>(), [128, 128, long.to_json().len() - 256]);
        assert_eq!(MinerCommitment::from_fields(&fields).unwrap(), long);
    }

    #[test]
    fn other_tools_keys_are_ignored_and_bad_values_refused_by_name() {
        let affine = br#"{"model":"a/b","revision":"r1","chute_id":"x","endpoint":"chutes:a-b"}"#;
        assert_eq!(MinerCommitment::from_fields(&[affine.to_vec()]).unwrap().endpoint, "chutes:a-b");
        let cases: [(&[u8], &str); 9] = [
            (br#"{"model":"a","revision":"r@1","endpoint":"chutes:x"}"#, "revision: must not contain '@'"),
            (br#"{"model":"a@b","revision":"r1","endpoint":"chutes:x"}"#, "model: must not contain '@'"),
            (br#"{"model":"a/b","revision":"r1"}"#, "missing field `endpoint`"),
            (br#"{"model":"","revision":"r1","endpoint":"chutes:x"}"#, "model: 0 bytes"),
            (br#"{"model":"a b","revision":"r1","endpoint":"chutes:x"}"#, "model: must not contain whitespace"),
            (br#"{"model":"a","revision":"r1","endpoint":"ftp://h"}"#, "endpoint: must be an http(s)://"),
            (br#"{"model":"a","revision":"r1","endpoint":"chutes:"}"#, "endpoint: chutes: needs"),
            (b"\x01\x02\x03", "not a JSON object"),
            (br#"{"model":1,"revision":"r1","endpoint":"chutes:x"}"#, "invalid type"),
        ];
        for (bytes, expected) in cases {
            let error = MinerCommitment::from_fields(&[bytes.to_vec()]).unwrap_err().to_string();
            assert!(error.contains(expected), "{error} lacks {expected}");
        }
        // The validator's own ledger commitment (32 + 32 + 8 bytes) is not a miner's.
        assert!(MinerCommitment::from_fields(&[vec![7; 32], vec![8; 32], vec![0; 8]]).is_err());
        assert!(MinerCommitment::from_fields(&[]).is_err());
        let error = MinerCommitment::new("a", &"r".repeat(65), "chutes:x").unwrap_err().to_string();
        assert_eq!(error, "revision: 65 bytes; must be 1..=64");
    }
}
