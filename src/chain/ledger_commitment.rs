//! What a validator commits on chain about its log (ledger-spec/07): its tip's hash and
//! height, its ledger key, and the newest protocol version its build applies (15's
//! announcements), as three `Data::Raw*` fields of the Commitments pallet.

use super::commitment_cost;
use crate::bytes::{Hash32, ValidatorKey};
use serde::{Deserialize, Serialize};

/// What a validator commits about its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCommitment {
    pub tip_hash: Hash32,
    pub ledger_key: ValidatorKey,
    pub tip_height: u64,
    /// The newest protocol version the committing build applies, and the chain block it
    /// applies from (ledger-spec/07, 15): how builds that do not apply it learn when it
    /// activates. None in the commitments of builds before protocol versions.
    pub protocol: Option<(u32, u64)>,
}

impl LedgerCommitment {
    /// The raw bytes of the three `Data::Raw*` fields, in order.
    pub fn fields(&self) -> Vec<Vec<u8>> {
        let mut third = self.tip_height.to_le_bytes().to_vec();
        if let Some((version, block)) = self.protocol {
            third.extend_from_slice(&version.to_le_bytes());
            third.extend_from_slice(&block.to_le_bytes());
        }
        vec![self.tip_hash.0.to_vec(), self.ledger_key.0.to_vec(), third]
    }

    /// Reads fields back; `None` if they are not an `af` ledger commitment.
    pub fn from_fields(fields: &[Vec<u8>]) -> Option<LedgerCommitment> {
        let [hash, key, third] = fields else { return None };
        if hash.len() != 32 || key.len() != 32 || !(third.len() == 8 || third.len() == 20) {
            return None;
        }
        let protocol = (third.len() == 20).then(|| {
            let version = u32::from_le_bytes(third[8..12].try_into().expect("4 bytes"));
            (version, u64::from_le_bytes(third[12..20].try_into().expect("8 bytes")))
        });
        Some(LedgerCommitment {
            tip_hash: Hash32(hash.as_slice().try_into().ok()?),
            ledger_key: ValidatorKey(key.as_slice().try_into().ok()?),
            tip_height: u64::from_le_bytes(third[..8].try_into().ok()?),
            protocol,
        })
    }

    /// Space the call costs against the per-tempo limit.
    pub fn cost(&self) -> u64 {
        commitment_cost(&self.fields())
    }
}

/// The ledger keys the chain lists as validators': those named by the ledger commitments
/// of hotkeys holding a validator permit (ledger-spec/13). A miner's commitment that
/// looks like one names no validator.
pub fn listed_ledger_keys(
    neurons: &[super::Neuron],
    records: &[super::CommitmentRecord],
) -> std::collections::BTreeSet<ValidatorKey> {
    let validators: std::collections::BTreeSet<&str> =
        neurons.iter().filter(|n| n.validator_permit).map(|n| n.hotkey.as_str()).collect();
    records
        .iter()
        .filter(|r| validators.contains(r.hotkey.as_str()))
        .filter_map(|r| r.ledger().map(|c| c.ledger_key))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{raw_data_tag, MIN_COMMITMENT_COST};

    #[test]
    fn commitment_fields_round_trip_and_cost_the_minimum() {
        let c = LedgerCommitment {
            tip_hash: Hash32([7; 32]),
            ledger_key: ValidatorKey([9; 32]),
            tip_height: 513,
            protocol: None,
        };
        let fields = c.fields();
        assert_eq!(fields.iter().map(Vec::len).collect::<Vec<_>>(), [32, 32, 8]);
        assert_eq!(LedgerCommitment::from_fields(&fields), Some(c));
        assert_eq!(c.cost(), MIN_COMMITMENT_COST, "72 bytes cost the 100-byte minimum");
        assert_eq!(LedgerCommitment::from_fields(&fields[..2]), None);
        // With the protocol announcement (ledger-spec/07, 15): Raw20, still the minimum.
        let announcing = LedgerCommitment { protocol: Some((3, 0x0102_0304_0506)), ..c };
        let fields = announcing.fields();
        assert_eq!(fields[2], [1, 2, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 6, 5, 4, 3, 2, 1, 0, 0]);
        assert_eq!(LedgerCommitment::from_fields(&fields), Some(announcing));
        assert_eq!(announcing.cost(), MIN_COMMITMENT_COST);
        let mut odd = fields.clone();
        odd[2].pop();
        assert_eq!(LedgerCommitment::from_fields(&odd), None, "19 bytes are no af commitment");
        assert_eq!(raw_data_tag(32), 0x21);
        assert_eq!(raw_data_tag(8), 0x09);
    }
}
