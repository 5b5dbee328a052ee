#!/usr/bin/env bash
# The whole test suite: unit tests, the integration binary (golden vectors, model,
# tamper, crash, fuzz, env fixtures and properties, CLI), and a build of the benches.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked --all-targets "$@"
