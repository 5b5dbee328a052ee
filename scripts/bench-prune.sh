#!/usr/bin/env bash
# Disk of a validator that prunes old bodies of other logs (ledger-spec/05), over a
# simulated month: 64 logs, 24 blocks a day each (the subnet's 7,200 scaled down 300x),
# a window of WINDOW days (default 1) kept whole. Prints the store's size against own
# log + window x traffic + headers and leaf hashes, scaled back to the subnet's traffic,
# and the bytes fetched back to show a page of 20 old transcripts.
set -euo pipefail
cd "$(dirname "$0")/.."
AF_PRUNE_WINDOW_DAYS="${1:-1}" cargo bench --locked --bench prune
