"""Counts the top-level public types of a module from its symbol graph (run by Scripts/docs.sh,
which prints the count in every test run). A top-level type is a struct, class, enum, protocol or
type alias declared at module scope; nested types (`APIResponseCache.Key`) do not count, nor do
the deprecated forwards kept for one release (`Core/Renamed.swift`), which are listed apart.

Usage: count-public-types.py <symbol-graph-dir> <module> [--at-most N] [--list]
With --at-most, fails when the module has more than N.
"""
import json
import os
import sys

graphs, module = sys.argv[1], sys.argv[2]
arguments = sys.argv[3:]
limit = int(arguments[arguments.index("--at-most") + 1]) if "--at-most" in arguments else None
kinds = {"swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias"}
graph = json.load(open(os.path.join(graphs, f"{module}.symbols.json")))


def deprecated(symbol):
    return any(
        entry.get("isUnconditionallyDeprecated") or "deprecated" in entry for entry in symbol.get("availability", []))


top_level = [
    symbol for symbol in graph["symbols"]
    if symbol["kind"]["identifier"] in kinds and len(symbol["pathComponents"]) == 1]
names = sorted(symbol["pathComponents"][0] for symbol in top_level if not deprecated(symbol))
forwards = sorted(symbol["pathComponents"][0] for symbol in top_level if deprecated(symbol))
if "--list" in arguments:
    print("\n".join(names))
print(
    f"docs: {module} has {len(names)} top-level public types" + (f" (at most {limit})" if limit else "")
    + (f", and {len(forwards)} deprecated forwards of old names" if forwards else ""))
if limit is not None and len(names) > limit:
    sys.exit(1)
