#!/usr/bin/env bash
# Fails when the public API of the libraries breaks against the baseline the repository names, so
# that a breaking change is a deliberate, documented act: each break the change means to make is
# written, word for word as the API digester prints it, into Scripts/api-breakage-allowlist.txt
# (with a CHANGELOG entry saying what users do instead).
#   bash Scripts/check-api.sh                 # run by Scripts/test.sh
#   bash Scripts/check-api.sh --regenerate    # write the baseline afresh (a new release's)
# The baseline is the API digester's dump of the revision in Scripts/api-baseline/REVISION, kept in
# Scripts/api-baseline/<full commit hash>/: the package manager then compares against the files
# instead of building the old revision.
set -euo pipefail
cd "$(dirname "$0")/.."
revision=$(cat Scripts/api-baseline/REVISION)
if ! git cat-file -e "$revision^{commit}" 2> /dev/null; then
    echo "check-api: the baseline revision $revision is not in this clone (a shallow clone?); fetch it or clone in full" >&2
    exit 1
fi
arguments=()
if [[ ${1:-} == --regenerate ]]; then arguments+=(--regenerate-baseline); fi
swift package diagnose-api-breaking-changes "$revision" \
    --products APIManagerKit APIManagerKitTesting \
    --baseline-dir Scripts/api-baseline \
    --breakage-allowlist-path Scripts/api-breakage-allowlist.txt "${arguments[@]}"
