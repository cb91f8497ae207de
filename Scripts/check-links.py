"""Fails on a link or a symbol reference that points nowhere (run by Scripts/docs.sh).

Checked, in the Markdown files of the repository (README, CONTRIBUTING, the adapter's and the
benchmarks' READMEs, the DocC articles) and in the doc comments of Sources/:
- a relative Markdown link `[text](path#anchor)`: the file exists, and the anchor is one of its
  headings (GitHub's slugs);
- `<doc:Name>`: an article `Name.md` exists in a DocC catalog;
- a prose pointer to a README section (`the README's "Typed delegates"`): README.md has that heading;
- an inline code reference to one of our types (`` `APIEngine` ``, `` `APIEngine.secretNames` ``,
  `` `MockTransport` ``): the symbol graphs of the libraries (or the adapter's sources) declare the
  type, and the member when one is named. Fenced code blocks are compiled by the test suite instead.

Usage: check-links.py SYMBOL_GRAPH_DIR MODULE...
"""
import glob
import json
import os
import re
import sys

graphs, modules = sys.argv[1], sys.argv[2:]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)

# Types and members the libraries declare, by name path ("APIEngine", "APIEngine.secretNames").
declared = set()
for module in modules:
    for path in glob.glob(f"{graphs}/{module}.symbols.json") + glob.glob(f"{graphs}/{module}@*.symbols.json"):
        for symbol in json.load(open(path))["symbols"]:
            components = symbol["pathComponents"]
            names = [component.split("(")[0] for component in components]
            declared.add(".".join(names))
# The adapter package is not in these graphs: its public types are read from its sources.
for path in glob.glob("Transports/*/Sources/**/*.swift", recursive=True):
    for match in re.finditer(r"public (?:final )?(?:class|struct|enum|protocol|actor) (\w+)", open(path).read()):
        declared.add(match.group(1))
module_names = {"APIManagerKit", "APIManagerKitTesting", "APIManagerKitAsyncHTTPClient", "APIManagerKitFuzz"}
our_type = re.compile(r"^(API[A-Z][a-z]\w*|MockTransport|MockAuthenticator|TestClock|URLSessionTransport|DispatchClock)\b")

articles = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob("Sources/*/*.docc/*.md")}


def slug(heading):
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    found = set()
    fenced = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(line.lstrip("#").strip())
    return found


readme_headings = headings("README.md")
problems = []


def check_symbol(reference, where):
    """`reference` is the text inside backticks."""
    match = our_type.match(reference)
    if not match or match.group(1) in module_names or reference.endswith(".swift"):
        return
    # `APIEngine.secretNames`, `APIEngine(transport:…)`, `APIError.decoding(underlying:response:)`
    path = re.split(r"[(<\[ :=]", reference, maxsplit=1)[0].rstrip(".")
    parts = [part for part in path.split(".") if part]
    if parts and parts[0] not in declared:
        problems.append(f"{where}: `{reference}` names no declared type {parts[0]}")
    elif len(parts) >= 2 and parts[1][:1].islower() and ".".join(parts[:2]) not in declared:
        problems.append(f"{where}: `{reference}` names no member {parts[1]} of {parts[0]}")


def check_prose(text, where):
    for name in re.findall(r"<doc:([\w-]+)>", text):
        if name not in articles:
            problems.append(f"{where}: <doc:{name}> is no article")
    for section in re.findall(r"README(?:'s|’s)? (?:section )?\"([^\"]+)\"", text):
        if not any(section.lower() in heading.lower() for heading in readme_headings):
            problems.append(f'{where}: README has no section "{section}"')


markdown = ["README.md", "CONTRIBUTING.md", "Benchmarks/README.md"]
markdown += glob.glob("Transports/*/README.md") + glob.glob("Tests/*/README.md")
markdown += glob.glob("Sources/*/*.docc/*.md")
for path in markdown:
    fenced = False
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        where = f"{path}:{number}"
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        check_prose(line, where)
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto
            file_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(resolved):
                problems.append(f"{where}: link to {target}: {resolved} does not exist")
            elif anchor and resolved.endswith(".md") and anchor not in {slug(h) for h in headings(resolved)}:
                problems.append(f"{where}: link to {target}: no heading #{anchor} in {resolved}")
        for reference in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", line):
            check_symbol(reference, where)

for path in glob.glob("Sources/**/*.swift", recursive=True):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        stripped = line.strip()
        if stripped.startswith("///") or stripped.startswith("//"):
            check_prose(stripped, f"{path}:{number}")

for problem in problems:
    print(problem)
if problems:
    print(f"docs: {len(problems)} links or references point nowhere", file=sys.stderr)
    sys.exit(1)
print(f"docs: every link, article, README section and type reference in {len(markdown)} Markdown files and the doc comments resolves")
