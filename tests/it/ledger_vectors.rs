//! Golden vectors: the bytes ledger-spec/ describes, regenerated and compared with
//! fixtures/ledger/vectors.json; plus hand-built bytes checked against the encoder so
//! the spec's layout (not just "whatever the code does") is what is tested.

use af::bytes::SignatureBytes;
use af::bytes::{Hash32, ValidatorKey};
use af::envs::derive_challenge_id;
use af::ledger::block::{self, BlockHeader, HEADER_BYTES};
use af::ledger::checkpoint::{self, Checkpoint};
use af::ledger::event::{
    ChainCommitment, ChatMessage, EnvDecision, EnvOutcome, EnvRef, EnvWinRate, Event, Evidence, FoldCheckpoint,
    FoldPoint, MatchDecided, MatchStarted, MinerRef, MinerSkipped, SkipReason, TextCut, Transcript, TranscriptCut,
    WeightsCommitted, WeightsSet,
};
use af::ledger::{codec, merkle, LedgerKey};
use serde_json::json;

pub const VECTOR_SEED: [u8; 32] = [7u8; 32];
pub const VECTOR_TIME_MS: u64 = 1_795_000_000_000;

pub fn vector_events() -> Vec<Event> {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let match_id = Hash32([0x11; 32]);
    let challenge_id = derive_challenge_id("mult", 1, &key.validator(), &match_id, 0);
    vec![
        Event::ChainCommitment(ChainCommitment {
            netuid: 120,
            chain_block: 4_000_000,
            committed_height: 0,
            committed_hash: Hash32([0xaa; 32]),
        }),
        Event::Transcript(Transcript {
            match_id,
            env: EnvRef { name: "mult".into(), version: 1 },
            challenge_id,
            challenge_index: 0,
            invocation_id: Hash32([0x22; 32]),
            miner: MinerRef { hotkey: "5Hotkey".into(), uid: 3, model: "m".into() },
            messages: vec![
                ChatMessage { role: "user".into(), content: "2x3?".into() },
                ChatMessage { role: "assistant".into(), content: "6".into() },
            ],
            answer: "6".into(),
            reward_milli: 1000,
            latency_ms: 250,
            error: None,
        }),
        Event::ChainCommitment(ChainCommitment {
            netuid: 120,
            chain_block: 4_000_360,
            committed_height: 1,
            committed_hash: Hash32([0xbb; 32]),
        }),
        Event::MatchStarted(MatchStarted {
            match_id,
            contender: MinerRef { hotkey: "5New".into(), uid: 7, model: "c".into() },
            champion: MinerRef { hotkey: "5Old".into(), uid: 2, model: "k".into() },
            envs: vec![EnvRef { name: "sat".into(), version: 1 }, EnvRef { name: "coin".into(), version: 1 }],
            rule: "mixture alpha=0.05 prior=4,4".into(),
            ratio_to_beat_ppm: 510_000,
            chain_block: 4_000_123,
            chain_block_hash: Hash32([0x5c; 32]),
        }),
        Event::EnvDecision(EnvDecision {
            match_id,
            env: EnvRef { name: "sat".into(), version: 1 },
            outcome: EnvOutcome::ContenderBetter,
            wins: 40,
            losses: 12,
            draws: 3,
            n_challenges: 55,
            rule: "mixture".into(),
        }),
        Event::MatchDecided(MatchDecided {
            match_id,
            contender_won: true,
            champion_hotkey: "5New".into(),
            win_rates: vec![EnvWinRate { env: EnvRef { name: "sat".into(), version: 1 }, win_rate_ppm: 769_230 }],
            new_ratio_to_beat_ppm: 769_230,
        }),
        Event::WeightsSet(WeightsSet {
            netuid: 120,
            uids: vec![7],
            weights: vec![65_535],
            version_key: 1,
            chain_block: 4_000_400,
        }),
        Event::WeightsCommitted(WeightsCommitted {
            netuid: 120,
            uids: vec![7, 9],
            weights: vec![0, 65_535],
            version_key: 1,
            chain_block: 4_000_700,
            reveal_round: 21_000_123,
            reveal_block: 4_001_080,
            ciphertext_hash: Hash32([0x99; 32]),
        }),
        Event::MinerSkipped(MinerSkipped {
            netuid: 120,
            hotkey: "5Sybil".into(),
            uid: 9,
            model: "org/m".into(),
            revision: "abc".into(),
            commit_block: 4_000_050,
            reason: SkipReason::Duplicate,
            kept_by: "5First".into(),
            kept_block: 4_000_010,
            chain_block: 4_000_100,
        }),
        Event::Evidence(Box::new(Evidence {
            validator: ValidatorKey([0x33; 32]),
            height: 9,
            header_a: evidence_header(1),
            signature_a: SignatureBytes([0x44; 64]),
            header_b: evidence_header(2),
            signature_b: SignatureBytes([0x55; 64]),
        })),
        Event::TranscriptCut(cut_vector()),
        Event::FoldCheckpoint(fold_checkpoint_vector()),
        Event::KeyRotated(af::ledger::event::KeyRotated { new_key: ValidatorKey([0x61; 32]), chain_block: 10_000_100 }),
        Event::KeySucceeded(af::ledger::event::KeySucceeded {
            old_key: ValidatorKey([0x62; 32]),
            old_height: 4_095,
            old_hash: Hash32([0x63; 32]),
            chain_block: 10_000_100,
        }),
        Event::ChampionLeft(af::ledger::event::ChampionLeft {
            champion: MinerRef { hotkey: "5Champion".into(), uid: 4, model: "org/m@abc".into() },
            reason: af::ledger::event::LeaveReason::Recommitted,
            chain_block: 10_000_200,
        }),
    ]
}

/// Two logs' points, in ascending order of validator key.
fn fold_checkpoint_vector() -> FoldCheckpoint {
    let point = |v: u8, height| FoldPoint {
        validator: ValidatorKey([v; 32]),
        height,
        block_hash: Hash32([v + 1; 32]),
        fold_hash: Hash32([v + 2; 32]),
    };
    FoldCheckpoint { fold_version: 13, points: vec![point(0x31, 359), point(0x41, 719)] }
}

/// A miner's answer of 300,000 bytes of "€" (3 bytes each), cut to its longest prefix
/// within 256 KiB: 87,381 characters, 262,143 bytes, one byte short of the cap because
/// the next character would not fit. The answer repeats the message's cut.
fn cut_vector() -> TranscriptCut {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let match_id = Hash32([0x11; 32]);
    let full = "€".repeat(100_000);
    let recorded = "€".repeat(87_381);
    let full_blake3 = Hash32(*blake3::hash(full.as_bytes()).as_bytes());
    TranscriptCut {
        transcript: Transcript {
            match_id,
            env: EnvRef { name: "mult".into(), version: 1 },
            challenge_id: derive_challenge_id("mult", 1, &key.validator(), &match_id, 0),
            challenge_index: 0,
            invocation_id: Hash32([0x23; 32]),
            miner: MinerRef { hotkey: "5Verbose".into(), uid: 4, model: "r".into() },
            messages: vec![
                ChatMessage { role: "user".into(), content: "2x3?".into() },
                ChatMessage { role: "assistant".into(), content: recorded.clone() },
            ],
            answer: recorded,
            reward_milli: -1000,
            latency_ms: 900,
            error: None,
        },
        cuts: vec![
            TextCut { message_idx: Some(1), full_bytes: full.len() as u64, full_blake3 },
            TextCut { message_idx: None, full_bytes: full.len() as u64, full_blake3 },
        ],
    }
}

/// Event bytes that decode but break a rule of ledger-spec/02, each with the rule: a
/// reader MUST refuse every one.
fn refused_events() -> Vec<(&'static str, Vec<u8>)> {
    let encode = |cut: TranscriptCut| codec::encode(&Event::TranscriptCut(cut), "event", 1 << 20).unwrap();
    let small = |content: &str, cuts: Vec<TextCut>| {
        let mut cut = cut_vector();
        cut.transcript.messages[1].content = content.into();
        cut.transcript.answer = content.into();
        cut.cuts = cuts;
        cut
    };
    let at = |message_idx: Option<u32>| TextCut { message_idx, full_bytes: 300_000, full_blake3: Hash32([0x88; 32]) };
    // A cut list whose length prefix says 2^32 items, followed by none: refused on the
    // prefix, before any item is read.
    let mut huge_count = encode(small("6", vec![at(Some(1))]));
    let items = 1 + 4 + 8 + 32;
    let prefix_at = huge_count.len() - items - 8;
    huge_count.truncate(prefix_at);
    huge_count.extend((1u64 << 32).to_le_bytes());
    let mut over_cap = cut_vector();
    over_cap.transcript.messages[1].content.push_str("xx");
    over_cap.transcript.answer.push_str("xx");
    vec![
        ("a TranscriptCut with no cuts", encode(small("6", vec![]))),
        ("a cut list over 257 items, refused on its length prefix", huge_count),
        ("a cut of a text that is not the miner's (role user)", encode(small("6", vec![at(Some(0))]))),
        (
            "a cut text shorter than its cap by 4 bytes or more: not the longest prefix",
            encode(small("Let me", vec![at(Some(1)), at(None)])),
        ),
        ("a cut text over its cap of 256 KiB", encode(over_cap)),
        ("an answer cut that does not repeat the last miner text's cut", encode(small("6", vec![at(None)]))),
        ("cuts out of order", encode(small("6", vec![at(None), at(Some(1))]))),
        ("fold checkpoint points out of validator order", {
            let mut c = fold_checkpoint_vector();
            c.points.reverse();
            codec::encode(&Event::<String>::FoldCheckpoint(c), "event", 1 << 20).unwrap()
        }),
        ("a fold checkpoint naming one log twice", {
            let mut c = fold_checkpoint_vector();
            c.points[1].validator = c.points[0].validator;
            codec::encode(&Event::<String>::FoldCheckpoint(c), "event", 1 << 20).unwrap()
        }),
    ]
}

fn evidence_header(time_ms: u64) -> BlockHeader {
    BlockHeader {
        format_version: 1,
        validator: ValidatorKey([0x33; 32]),
        height: 9,
        prev_hash: Hash32([0x66; 32]),
        time_ms,
        events_root: Hash32([0x77; 32]),
        n_events: 0,
    }
}

fn vectors() -> serde_json::Value {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let events = vector_events();
    let event_vectors: Vec<_> = events
        .iter()
        .map(|e| {
            let bytes = codec::encode(e, "event", 1 << 20).unwrap();
            json!({ "json": e, "bytes": hex::encode(&bytes), "leaf_hash": merkle::leaf_hash(&bytes) })
        })
        .collect();
    let genesis = block::seal(key.signing_key(), None, VECTOR_TIME_MS, events.clone()).unwrap();
    let next = block::seal(key.signing_key(), Some(&genesis.tip()), VECTOR_TIME_MS + 12_000, vec![]).unwrap();
    let block_vector = |sealed: &block::SealedBlock| {
        let header = &sealed.decoded().block.header;
        json!({
            "header": header,
            "header_bytes": hex::encode(header.encode()),
            "block_hash": sealed.decoded().hash,
            "signing_message": hex::encode(block::signing_message(&sealed.decoded().hash)),
            "signature": sealed.decoded().block.signature,
            "block_bytes": hex::encode(sealed.bytes()),
        })
    };
    let leaves = &genesis.decoded().leaf_hashes;
    let checkpoint = Checkpoint::of_tip(key.validator(), &next.tip());
    json!({
        "about": "Test vectors for ledger-spec/. Regenerate with UPDATE_EXPECT=1 cargo test; any change here is a format change.",
        "key": { "secret_seed": hex::encode(VECTOR_SEED), "public_key": key.validator() },
        "challenge_id": {
            "env": "mult", "env_version": 1, "validator": key.validator(), "match_id": Hash32([0x11; 32]), "index": 0,
            "challenge_id": derive_challenge_id("mult", 1, &key.validator(), &Hash32([0x11; 32]), 0),
        },
        "match_id": {
            "validator": key.validator(), "contender": "5New", "champion": "5Old", "n_decided": 3,
            "chain_block": 4_000_123, "chain_block_hash": Hash32([0x5c; 32]),
            "match_id": af::envs::derive_match_id(&key.validator(), "5New", "5Old", 3, 4_000_123, &Hash32([0x5c; 32])),
        },
        "events": event_vectors,
        "events_refused": refused_events().into_iter().map(|(why, bytes)| json!({ "why": why, "bytes": hex::encode(bytes) })).collect::<Vec<_>>(),
        "merkle": {
            "leaf_hashes": leaves,
            "root": merkle::root(leaves),
            "empty_root": merkle::empty_root(),
            "proof_of_event_2": merkle::inclusion_path(leaves, 2),
        },
        "blocks": [block_vector(&genesis), block_vector(&next)],
        "decisions": decision_vectors(),
        "ratio": ratio_vectors(),
        "checkpoint": {
            "key_name": checkpoint::key_name(&key.validator()),
            "key_id": hex::encode(checkpoint::key_id(&checkpoint::key_name(&key.validator()), &key.validator())),
            "note": checkpoint.sign(&key),
        },
    })
}

/// Score-plan decisions at the network's plan (ledger-spec/02, "The score plan"), and at
/// the older spelling of its futility stop (margin 65000, the mean condition at the bar
/// plus the margin): what the rule and the futility stop say on each (wins, losses,
/// draws) against each ratio, and the score each env records. Counts are chosen around
/// the worked values, none within 1e-6 of a threshold; at 1440/560/0 against 700000 the
/// two spellings differ (a mean above the bar, below the bar plus the margin).
/// With the network's plan (its dominance crown) come counts around the crown's edges:
/// an unbeaten run crowned far below the bar (from 144 wins), one win short, two losses
/// (336 wins needed), a loss too many, a copy
/// given up on at 121 draws and not at 120 (the futility stop alone holds from 63).
fn decision_vectors() -> Vec<serde_json::Value> {
    use af::evaluation::exact::score_rule_alone;
    use af::evaluation::futility::{BarFutility, Futility, DEFAULT_FUTILITY};
    use af::evaluation::stopping::DEFAULT_RULE;
    let older = Futility::Bar(BarFutility { margin_ppm: 65_000, alpha_ppm: 50_000, mean_margin_ppm: None, rise: None });
    let mut all = plan_decisions(&DEFAULT_RULE, DEFAULT_FUTILITY, &DOMINANCE_COUNTS);
    all.extend(plan_decisions(&score_rule_alone(&DEFAULT_RULE), DEFAULT_FUTILITY, &[]));
    all.extend(plan_decisions(&score_rule_alone(&DEFAULT_RULE), older, &[]));
    let (v4_rule, v4_futility) = af::evaluation::plan::parse_plan(af::protocol::PLAN_V4).expect("a plan");
    all.extend(plan_decisions(&v4_rule, v4_futility.expect("a futility stop"), &V4_COUNTS));
    all
}

/// (wins, losses, draws, ratio) at version 4's edges (ledger-spec/02, `dominance-reach`
/// and `rise_ppm`): an unbeaten run crowned from 114 wins, a copy out of reach at 72, one
/// loss out of reach unless the wins won and 4% of the challenges left reach 325, the
/// reach at 3,000 challenges, and the rising mean condition at 2,000 and at 200.
const V4_COUNTS: [(u32, u32, u32, u32); 14] = [
    (114, 0, 2000, 900_000),
    (113, 0, 2000, 900_000),
    (0, 0, 72, 510_000),
    (0, 0, 71, 510_000),
    (19, 1, 380, 900_000),
    (205, 1, 794, 900_000),
    (204, 1, 795, 900_000),
    (89, 0, 2911, 950_000),
    (88, 0, 2912, 950_000),
    (1030, 970, 0, 510_000),
    (1040, 960, 0, 510_000),
    (1039, 961, 0, 510_000),
    (103, 97, 0, 510_000),
    (325, 1, 2000, 900_000),
];

/// (wins, losses, draws, ratio) where the dominance crown decides (ledger-spec/02).
const DOMINANCE_COUNTS: [(u32, u32, u32, u32); 9] = [
    (150, 0, 2850, 900_000),
    (143, 0, 2000, 900_000),
    (144, 0, 2000, 900_000),
    (335, 2, 1663, 950_000),
    (336, 2, 1662, 950_000),
    (18, 1, 400, 900_000),
    (19, 1, 400, 900_000),
    (0, 0, 121, 510_000),
    (0, 0, 120, 510_000),
];

fn plan_decisions(
    rule: &af::evaluation::stopping::StoppingRule,
    futility: af::evaluation::futility::Futility,
    more: &[(u32, u32, u32, u32)],
) -> Vec<serde_json::Value> {
    use af::evaluation::plan::describe_plan;
    use af::evaluation::stopping::Verdict;
    let plan = describe_plan(rule, Some(&futility));
    let counts: [(u32, u32, u32, u32); 13] = [
        (30, 10, 0, 500_000),
        (29, 11, 0, 500_000),
        (66, 33, 1, 510_000),
        (66, 34, 0, 510_000),
        (85, 14, 1, 700_000),
        (236, 164, 0, 510_000),
        (0, 0, 59, 510_000),
        (0, 0, 58, 510_000),
        (208, 208, 0, 510_000),
        (207, 207, 0, 510_000),
        (90, 90, 80, 510_000),
        (10, 40, 50, 900_000),
        (1440, 560, 0, 700_000),
    ];
    counts
        .iter()
        .chain(more)
        .map(|&(wins, losses, draws, p)| {
            let p0 = f64::from(p) / 1e6;
            let verdict = match rule.verdict_on(wins, losses, draws, p0) {
                Verdict::Better => "better",
                Verdict::NotBetter => "not_better",
                Verdict::Continue => "continue",
            };
            json!({
                "plan": plan, "ratio_to_beat_ppm": p, "wins": wins, "losses": losses, "draws": draws,
                "rule_says": verdict, "futile": futility.is_futile(wins, losses, draws, p0),
                "dismissable": rule.dismissable(wins, losses, draws, 0.0),
                "score_ppm": rule.env_rate_ppm(wins, losses, draws),
            })
        })
        .collect()
}

/// The ratio to beat of score plans in integers (ledger-spec/02): geometric means of
/// per-env rates and decays of a set ratio.
fn ratio_vectors() -> serde_json::Value {
    use af::evaluation::ratio::{RatioToBeat, DEFAULT_RATIO_PARAMS};
    let params = DEFAULT_RATIO_PARAMS;
    let means: Vec<_> = [
        vec![640_000, 810_000],
        vec![525_000; 4],
        vec![512_345, 987_654, 600_001],
        vec![0, 900_000],
        vec![1_000_000; 6],
        vec![300_000, 600_000],
    ]
    .into_iter()
    .map(|rates| json!({ "rates": rates, "new_ratio_to_beat_ppm": params.after_win(&rates, 0).set_ppm }))
    .collect();
    let decays: Vec<_> = [
        (710_000u32, 1_000u64, 1_000u64),
        (710_000, 1_000, 4_600),
        (710_000, 1_000, 8_199),
        (710_000, 1_000, 8_200),
        (654_321, 7, 123_456),
        (505_000, 0, 99),
        (950_000, 50, 10),
    ]
    .into_iter()
    .map(|(set, at, block)| {
        json!({ "set_ppm": set, "set_at_block": at, "block": block,
                    "ppm": params.current_ppm(&RatioToBeat { set_ppm: set, set_at_block: at }, block) })
    })
    .collect();
    json!({ "epsilon_ppm": params.epsilon_ppm, "half_life_blocks": params.half_life_blocks, "geometric_means": means, "decays": decays })
}

#[test]
fn golden_vectors_match_fixture() {
    let text = serde_json::to_string_pretty(&vectors()).unwrap() + "\n";
    crate::check_fixture("fixtures/ledger/vectors.json", &text);
}

#[test]
fn refused_events_are_refused_by_the_decoder() {
    for (why, bytes) in refused_events() {
        let decoded = codec::decode_canonical::<Event>(&bytes, "event", 4 << 20);
        let checked = decoded.map_err(|e| e.to_string()).and_then(|e| e.check_bounds().map_err(|e| e.to_string()));
        assert!(checked.is_err(), "{why}: decoded and passed the bounds");
        eprintln!("{why}: {}", checked.unwrap_err());
    }
    // The valid cut vector passes, so each refusal above is its one broken rule.
    Event::TranscriptCut(cut_vector()).check_bounds().unwrap();
}

#[test]
fn header_bytes_follow_the_spec_layout() {
    let header = BlockHeader {
        format_version: 1,
        validator: ValidatorKey([0xaa; 32]),
        height: 0x0102030405060708,
        prev_hash: Hash32([0xbb; 32]),
        time_ms: 0x1112131415161718,
        events_root: Hash32([0xcc; 32]),
        n_events: 0x21222324,
    };
    let mut expected = vec![0x01, 0x00];
    expected.extend([0xaa; 32]);
    expected.extend([0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01]);
    expected.extend([0xbb; 32]);
    expected.extend([0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11]);
    expected.extend([0xcc; 32]);
    expected.extend([0x24, 0x23, 0x22, 0x21]);
    assert_eq!(expected.len(), HEADER_BYTES);
    assert_eq!(header.encode(), expected);
    assert_eq!(header.hash().0, *blake3::hash(&expected).as_bytes());
}

#[test]
fn event_bytes_follow_the_spec_layout() {
    // ChainCommitment: tag 5 (u32 LE), netuid u16, chain_block u64, height u64, hash.
    let event: Event = Event::ChainCommitment(ChainCommitment {
        netuid: 0x0102,
        chain_block: 3,
        committed_height: 4,
        committed_hash: Hash32([0xee; 32]),
    });
    let mut expected = vec![5, 0, 0, 0, 0x02, 0x01];
    expected.extend(3u64.to_le_bytes());
    expected.extend(4u64.to_le_bytes());
    expected.extend([0xee; 32]);
    assert_eq!(codec::encode(&event, "event", 1024).unwrap(), expected);

    // Strings and lists: u64 LE length then bytes; Option: 0 for None, 1 then value.
    let Event::Transcript(mut transcript) = vector_events().remove(1) else { unreachable!() };
    transcript.error = Some("x".into());
    let bytes = codec::encode(&Event::Transcript(transcript), "event", 1 << 20).unwrap();
    assert_eq!(&bytes[..4], &[1, 0, 0, 0], "tag of Transcript");
    assert_eq!(&bytes[bytes.len() - 10..], &[1, 1, 0, 0, 0, 0, 0, 0, 0, b'x'], "Some(\"x\") at the end");
    let env_name_at = 4 + 32;
    assert_eq!(&bytes[env_name_at..env_name_at + 12], &[4, 0, 0, 0, 0, 0, 0, 0, b'm', b'u', b'l', b't']);
}

#[test]
fn block_bytes_are_header_signature_count_events() {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let events = vector_events();
    let sealed = block::seal(key.signing_key(), None, VECTOR_TIME_MS, events.clone()).unwrap();
    let bytes = sealed.bytes();
    let header = &sealed.decoded().block.header;
    assert_eq!(&bytes[..HEADER_BYTES], header.encode().as_slice());
    assert_eq!(&bytes[HEADER_BYTES..HEADER_BYTES + 64], sealed.decoded().block.signature.0.as_slice());
    assert_eq!(&bytes[HEADER_BYTES + 64..HEADER_BYTES + 72], (events.len() as u64).to_le_bytes().as_slice());
    let mut offset = HEADER_BYTES + 72;
    for event in &events {
        let encoded = codec::encode(event, "event", 1 << 20).unwrap();
        assert_eq!(&bytes[offset..offset + encoded.len()], encoded.as_slice());
        offset += encoded.len();
    }
    assert_eq!(offset, bytes.len());
    assert_eq!(header.prev_hash, block::GENESIS_PREV_HASH);
    // The signature is ed25519 over the context string and the block hash.
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};
    let verifying = VerifyingKey::from_bytes(&header.validator.0).unwrap();
    let mut message = b"af-ledger/v1/block\0".to_vec();
    message.extend(sealed.decoded().hash.0);
    verifying.verify(&message, &Signature::from_bytes(&sealed.decoded().block.signature.0)).unwrap();
}

#[test]
fn round_trip_through_bytes() {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let sealed = block::seal(key.signing_key(), None, VECTOR_TIME_MS, vector_events()).unwrap();
    let again = block::SealedBlock::from_bytes(sealed.bytes().to_vec()).unwrap();
    assert_eq!(again.decoded().block, sealed.decoded().block);
    assert_eq!(again.decoded().hash, sealed.decoded().hash);
    assert_eq!(codec::encode(&again.decoded().block, "block", 1 << 20).unwrap(), sealed.bytes());
}

#[test]
fn checkpoint_text_layout_and_rejections() {
    let key = LedgerKey::from_seed(VECTOR_SEED);
    let checkpoint = Checkpoint { validator: key.validator(), size: 5, tip_hash: Hash32([3; 32]) };
    let note = checkpoint.sign(&key);
    let lines: Vec<&str> = note.split('\n').collect();
    assert_eq!(lines[0], format!("af.ledger/v1/{}", key.validator()));
    assert_eq!(lines[1], "5");
    assert_eq!(lines[3], "");
    assert!(lines[4].starts_with("\u{2014} af-"));
    assert_eq!(Checkpoint::verify(&note).unwrap(), checkpoint);
    // Any change to the signed text breaks it.
    let forged = note.replacen("\n5\n", "\n6\n", 1);
    assert!(matches!(Checkpoint::verify(&forged), Err(checkpoint::CheckpointError::BadSignature { .. })));
    // Another key's signature line is ignored, so the note has no valid signature.
    let other = LedgerKey::from_seed([9; 32]);
    let other_note = Checkpoint { validator: other.validator(), ..checkpoint.clone() }.sign(&other);
    let spliced = format!("{}\n{}", checkpoint.body(), &other_note[other_note.find('\u{2014}').unwrap()..]);
    assert!(matches!(Checkpoint::verify(&spliced), Err(checkpoint::CheckpointError::NoSignature { .. })));
    assert!(Checkpoint::verify("garbage").is_err());
    assert!(Checkpoint::verify(&"x\n".repeat(5000)).is_err());
    assert!(Checkpoint::verify(&note.replacen("\n5\n", "\n05\n", 1)).is_err());
}
