#!/usr/bin/env bash
# A new auditor from a countersigned fold checkpoint against a replay from genesis, at two
# sizes of history and two tails (ledger-spec/02, "Fold checkpoints"): the time from the
# checkpoint follows the blocks after it, not the history. AF_CKPT_VALIDATORS (8),
# AF_CKPT_CHECKPOINTS (4: the small history in checkpoint intervals of 360 blocks) and
# AF_CKPT_TAIL (120 blocks) size it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --locked --bench checkpoint
