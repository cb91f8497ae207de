"""Fails when a public symbol declared in Sources/ has no doc comment (run by Scripts/docs.sh).

Reads the symbol graphs the package manager wrote; symbols without a source location (synthesized
conformances such as `hashValue`) and symbols of other modules are not ours to document.
"""
import glob
import json
import sys

graphs, modules = sys.argv[1], sys.argv[2:]
missing = []
for module in modules:
    for path in glob.glob(f"{graphs}/{module}.symbols.json") + glob.glob(f"{graphs}/{module}@*.symbols.json"):
        for symbol in json.load(open(path))["symbols"]:
            location = symbol.get("location", {}).get("uri", "")
            if symbol.get("accessLevel") not in ("public", "open") or "/Sources/" not in location:
                continue
            if not symbol.get("docComment"):
                line = symbol["location"]["position"]["line"] + 1
                where = location.split("/Sources/", 1)[1]
                missing.append(f"Sources/{where}:{line}: {'.'.join(symbol['pathComponents'])} has no doc comment")
for entry in sorted(set(missing)):
    print(entry)
if missing:
    print(f"docs: {len(set(missing))} public symbols without a doc comment", file=sys.stderr)
    sys.exit(1)
print(f"docs: every public symbol of {', '.join(modules)} has a doc comment")
