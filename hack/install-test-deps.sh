#!/usr/bin/env bash
# Installs what Tabby's tests use (Debian): the packages
# (hack/install-packages.sh) and every Go module the repository's packages
# and tests need. Idempotent. Needs root.
set -euo pipefail
"$(dirname "$0")/install-packages.sh"
go mod download
