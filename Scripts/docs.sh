#!/usr/bin/env bash
# Builds the DocC documentation of both libraries with the toolchain's own docc, treating every
# warning (a broken symbol or article link, say) as an error, after checking that every public
# symbol has a doc comment and that every link and type reference in the Markdown files and doc
# comments points somewhere (Scripts/check-links.py). No package dependency is needed.
#   bash Scripts/docs.sh            # archives in .build/docs/<Module>.doccarchive
# Open an archive with `docc preview`, or publish it as a static site with `docc process-archive
# transform-for-static-hosting`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .build/docs
mkdir -p .build/docs
# Symbol graphs of the public API (swift-symbolgraph-extract, run by the package manager). On a
# fresh clone the package manager also tries the test-discovery modules, which are only built by
# `swift build --build-tests`, and exits 1 for them; so its exit status is not used: the two
# library graphs must have been written afresh instead.
log=.build/docs/dump-symbol-graph.log
rm -rf .build/*/symbolgraph
swift package dump-symbol-graph --minimum-access-level public > "$log" 2>&1 || true
graphs=$(sed -n 's/^Files written to //p' "$log" | tail -1)
for module in APIManagerKit APIManagerKitTesting; do
    if [[ -z "$graphs" || ! -f "$graphs/$module.symbols.json" ]]; then
        cat "$log" >&2
        echo "docs: the package manager wrote no symbol graph for $module" >&2
        exit 1
    fi
done
python3 Scripts/doc-coverage.py "$graphs" APIManagerKit APIManagerKitTesting
# Links, articles, README sections and type references in Markdown and doc comments must resolve.
python3 Scripts/check-links.py "$graphs" APIManagerKit APIManagerKitTesting
# What can be counted: the Playground's stories, APIError's cases, the delegate's hooks.
python3 Scripts/check-doc-counts.py
# The public surface, counted: the count may only go down (a new top-level type nests in its family
# instead, or lowers this bound in the same change); the 1.0 target, at most 60, is reached.
python3 Scripts/count-public-types.py "$graphs" APIManagerKit --at-most 60
python3 Scripts/count-public-types.py "$graphs" APIManagerKitTesting --at-most 3
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
