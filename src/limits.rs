//! Every bound `af` enforces, in one place, so that a reader can see at a glance
//! how much a hostile peer, miner or file can make us allocate or do.
//!
//! Decoders check these before or while allocating; the `const` assertions at the
//! bottom tie the bounds together so one cannot be raised without the others.

/// Largest canonical block we decode or store, in bytes.
pub const MAX_BLOCK_BYTES: u64 = 32 * 1024 * 1024;
/// Most events one block may hold.
pub const MAX_EVENTS_PER_BLOCK: u32 = 65_536;
/// Largest single encoded event, in bytes.
pub const MAX_EVENT_BYTES: u64 = 4 * 1024 * 1024;
/// Most chat messages in one transcript.
pub const MAX_MESSAGES_PER_TRANSCRIPT: usize = 256;
/// Largest text field (message content, answer, error), in bytes.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// Largest short name (env name, hotkey, model, role, rule), in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Most entries in a list of short items (envs of a match, weights, win rates).
pub const MAX_LIST_ITEMS: usize = 4096;

/// Longest text of a miner's (one answer, one message) recorded in full; a longer one is
/// recorded as its prefix with its full length and hash (a `TranscriptCut` event).
pub const MAX_RECORDED_TEXT_BYTES: usize = 256 * 1024;
/// Most bytes of miner text one transcript records over all its messages; once spent,
/// later answers are cut to what remains. Bounds a transcript of many turns.
pub const MAX_TRANSCRIPT_TEXT_BYTES: usize = 1024 * 1024;
/// Most `TextCut`s in one `TranscriptCut`: one per message and one for the answer.
pub const MAX_CUTS_PER_TRANSCRIPT: usize = MAX_MESSAGES_PER_TRANSCRIPT + 1;
/// Longest error text recorded for a failed request (errors quote at most a prefix of
/// what a miner sent).
pub const MAX_ERROR_TEXT_BYTES: usize = 1024;

/// Largest model answer an environment parser looks at; longer is an invalid action.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Largest checkpoint note we parse, in bytes.
pub const MAX_CHECKPOINT_BYTES: usize = 4096;
/// How far past the receiver's clock a block's `time_ms` may be when it arrives from a
/// peer or a node (ledger-spec/03, "Reception"): a later block is not taken yet, so one
/// far-future header cannot make a log's later times freeze at its own.
pub const FUTURE_TOLERANCE_MS: u64 = 10 * 60 * 1000;

/// Most signed headers in one inclusion proof (ledger-spec/03): at about 480 bytes of
/// JSON each, a proof this long is just under `MAX_JSON_INPUT_BYTES`.
pub const MAX_PROOF_HEADERS: usize = 131_072;

/// Largest JSON file (transcript, proof) the CLI reads, in bytes.
pub const MAX_JSON_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// redb's page cache for a reader (a stopped store's server, `af transcripts`, ...).
/// Small on purpose: logs are written once and read in order, and a large cache makes
/// every read of a big block fault in fresh memory (measured: reading a 1 GiB log ran at
/// 200 MiB/s with redb's default cache, 1.6 GiB/s with 16 MiB).
pub const STORE_READ_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// redb's page cache for a full read (`af ledger verify`, `af audit`), which reads every
/// page once: a cache only costs copies and memory there (on a 1.1 GB store, 2 threads:
/// verify 0.96 s and 33 MB peak RSS with 4 MiB against 1.00 s and 90 MB with 32 MiB;
/// audit 1.22 s and 92 MB against 1.25 s and 137 MB).
pub const FULL_READ_CACHE_BYTES: usize = 4 * 1024 * 1024;

/// redb's page cache for the page-checksum pass beside a full read
/// (`Store::open_read_only_overlapped`): it reads every page once, so 1 MiB (verify 0.99
/// s and 90 MB peak RSS with it against 1.04 s and 159 MB with 32 MiB, same store).
pub const PAGE_CHECK_CACHE_BYTES: usize = 1024 * 1024;
/// redb's page cache for a writer (a validator's store, import, compact). It bounds a
/// writer's memory: redb keeps freshly written pages cached up to this size (with its
/// 1 GiB default a validator grew by its write rate for minutes). A validator runs for
/// weeks, and this cache's pages, each in its own allocation, come and go with every
/// block: in 2-hour soaks side by side, resident memory rose 0.8 and 1.7 MiB/h over the
/// last hour with 32 MiB and stayed flat (+0.08, -0.35) with 8 MiB, at 48 to 52 MiB
/// where 32 MiB held 79 to 82 (docs/performance.md, "Known gaps as measured").
pub const STORE_WRITE_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Bytes of blocks read ahead of verification (the reader thread's queue holds two).
pub const VERIFY_BATCH_BYTES: usize = 32 * 1024 * 1024;

/// Most blocks in one verification batch (a batch also ends at `VERIFY_BATCH_BYTES`),
/// so small blocks still reach the parallel checks in useful numbers.
pub const VERIFY_BATCH_BLOCKS: usize = 64;

const _: () = assert!(MAX_EVENT_BYTES <= MAX_BLOCK_BYTES);
const _: () = assert!((MAX_TEXT_BYTES as u64) * 2 < MAX_EVENT_BYTES);
const _: () = assert!(MAX_ANSWER_BYTES <= MAX_RECORDED_TEXT_BYTES);
const _: () = assert!(MAX_RECORDED_TEXT_BYTES <= MAX_TEXT_BYTES);
// A transcript: its miner text (plus the answer again), the env's prompts and framing,
// must fit in one event, and a challenge's two transcripts with its decisions in a
// fraction of a block, so the writer can always seal them together.
const _: () = assert!(((MAX_TRANSCRIPT_TEXT_BYTES + MAX_RECORDED_TEXT_BYTES) as u64) * 2 < MAX_EVENT_BYTES);
const _: () = assert!(MAX_EVENT_BYTES * 4 <= MAX_BLOCK_BYTES);
const _: () = assert!(MAX_NAME_BYTES < MAX_TEXT_BYTES);
// A block of the most events, each of the smallest size (a few bytes), must fit.
const _: () = assert!((MAX_EVENTS_PER_BLOCK as u64) * 64 < MAX_BLOCK_BYTES);
