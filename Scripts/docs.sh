#!/usr/bin/env bash
# Builds the DocC documentation of both libraries with the toolchain's own docc, treating every
# warning (a broken symbol or article link, say) as an error, after checking that every public
# symbol has a doc comment. No package dependency is needed.
#   bash Scripts/docs.sh            # archives in .build/docs/<Module>.doccarchive
# Open an archive with `docc preview`, or publish it as a static site with `docc process-archive
# transform-for-static-hosting`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .build/docs
mkdir -p .build/docs
# Symbol graphs of the public API (swift-symbolgraph-extract, run by the package manager).
graphs=$(swift package dump-symbol-graph --minimum-access-level public 2>&1 | sed -n 's/^Files written to //p' | tail -1)
if [[ -z "$graphs" || ! -d "$graphs" ]]; then
    echo "docs: the package manager wrote no symbol graphs" >&2
    exit 1
fi
python3 Scripts/doc-coverage.py "$graphs" APIManagerKit APIManagerKitTesting
docc=$(command -v docc || echo "$(dirname "$(command -v swift)")/docc")
for module in APIManagerKit APIManagerKitTesting; do
    module_graphs=".build/symbol-graphs-$module"
    rm -rf "$module_graphs"
    mkdir -p "$module_graphs"
    cp "$graphs/$module".symbols.json "$module_graphs/"
    cp "$graphs/$module"@*.symbols.json "$module_graphs/" 2> /dev/null || true
    "$docc" convert "Sources/$module/$module.docc" \
        --additional-symbol-graph-dir "$module_graphs" \
        --fallback-display-name "$module" --fallback-bundle-identifier "org.apimanagerkit.$module" \
        --output-path ".build/docs/$module.doccarchive" --warnings-as-errors
    echo "docs: $module built without warnings (.build/docs/$module.doccarchive)"
done
