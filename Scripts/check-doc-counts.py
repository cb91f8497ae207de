"""Fails when the docs count or list what the code has differently (run by Scripts/docs.sh).

Checked:
- the Playground's stories (the `name:` of every `Story(`): every "<number> stories" in README.md
  and Getting Started says how many there are, in words, and both lists name every story;
- `APIError`'s cases: each has a row in Talking HTTP's error table (`| case | context |`), and the
  article's switch over every kind (`advice(for:)`, ending in `@unknown default`) names each one and
  is the one `HTTPCodeSamplesTests` compiles;
- `APIManagerDelegate`'s requirements: each has its manager hook in Getting Started's hook table
  (`taskIsWaiting(_:)`, `task(_:didReport:)`…);
- the source folders: every folder of `Sources/APIManagerKit/` (subfolders included, the DocC
  catalog left out) has its row in CONTRIBUTING.md's "Where things live" table, named `Folder/`
  (or `Parent/Folder/`), and the table names no folder that does not exist;
- every Swift sample of a doc comment in `Sources/`: in `DocCommentSamplesTests.swift`, line by line;
- the Swift samples of `APIRequest.md`, `OfflineAndRelaunch.md` and `ObservingRequests.md`: each is in its test file
  (`CodeSamplesTests.swift`, `DurableCodeSamplesTests.swift`) word for word;
- the version: the latest release in CHANGELOG.md (`## [x.y.z] - date`), the README's install line
  (`from: "x.y.z"`) and `APIEngine.DefaultHeaders.packageVersion` (the `User-Agent`) are the same.

Usage: check-doc-counts.py
"""
import glob
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)
errors = []
words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
         "twenty-one", "twenty-two", "twenty-three", "twenty-four", "twenty-five"]

# The stories, as the Playground declares them.
stories = []
for path in sorted(glob.glob("Playground/*.swift")):
    text = open(path).read()
    stories += re.findall(r'Story\(\s*name:\s*"([a-z-]+)"', text)
if not stories:
    errors.append("Playground: no `Story(name: ...)` found")
getting_started = "Sources/APIManagerKit/APIManagerKit.docc/GettingStarted.md"
for path in ["README.md", getting_started]:
    text = open(path).read()
    for count in re.findall(r"\b([a-z-]+|\d+) stories\b", text):
        expected = words[len(stories)] if len(stories) < len(words) else str(len(stories))
        if count in words or count.isdigit():
            if count != expected and count != str(len(stories)):
                errors.append(f"{path}: says '{count} stories'; the Playground has {len(stories)}")
    # The list: the section that names the stories.
    for story in stories:
        if f"`{story}`" not in text:
            errors.append(f"{path}: the story `{story}` is not listed")

# APIError's cases against the error table.
source = open("Sources/APIManagerKit/Core/APIError.swift").read()
body = source[source.index("public enum APIError"):]
body = body[:body.index("public enum CancellationReason")]
cases = re.findall(r"^    case (\w+)", body, re.MULTILINE)
talking = open("Sources/APIManagerKit/APIManagerKit.docc/TalkingHTTP.md").read()
table = talking[talking.index("| case | context |"):]
table = "\n".join(line for line in table.splitlines() if line.startswith("|"))
for case in cases:
    if not re.search(r"^\| `" + case + r"[`(]", table, re.MULTILINE):
        errors.append(f"TalkingHTTP.md: the error table has no row for APIError.{case}")

# The delegate's requirements against the hook table.
delegate = open("Sources/APIManagerKit/Core/APIManagerDelegate.swift").read()
protocol = delegate[delegate.index("public protocol APIManagerDelegate"):]
protocol = protocol[:protocol.index("\n}")]
hooks = []
for signature in re.findall(r"func apiManager\(([^)]*)\)", protocol):
    labels = [part.strip().split(" ")[0].split(":")[0] for part in signature.split(",")]
    if labels[1] == "task":
        hooks.append("task(_:" + "".join(label + ":" for label in labels[2:]) + ")")
    else:
        hooks.append(labels[1] + "(_:)")
guide = open(getting_started).read()
hook_table = guide[guide.index("| hook | default |"):]
hook_table = "\n".join(line for line in hook_table.splitlines() if line.startswith("|"))
for hook in hooks:
    if f"`{hook}`" not in hook_table:
        errors.append(f"GettingStarted.md: the hook table lacks `{hook}` (APIManagerDelegate has it)")

# The switch over every kind: the article's and the compiled sample's are the same, and complete.
samples = open("Tests/APIManagerKitTests/HTTPCodeSamplesTests.swift").read()
talking = open("Sources/APIManagerKit/APIManagerKit.docc/TalkingHTTP.md").read()


def advice_function(text, path):
    match = re.search(r"^func advice\(for error: APIError\).*?^}", text, re.MULTILINE | re.DOTALL)
    if not match:
        errors.append(f"{path}: no `func advice(for error: APIError)` sample")
        return ""
    return match.group(0)


compiled = advice_function(samples, "HTTPCodeSamplesTests.swift")
shown = advice_function(talking, "TalkingHTTP.md")
if compiled and shown and compiled != shown:
    errors.append("TalkingHTTP.md: the switch over every error kind differs from HTTPCodeSamplesTests.swift's")
if compiled and "@unknown default:" not in compiled:
    errors.append("HTTPCodeSamplesTests.swift: the switch over every error kind lacks `@unknown default`")
for case in cases:
    if not re.search(r"\." + case + r"\b", compiled):
        errors.append(f"HTTPCodeSamplesTests.swift: the switch over every error kind lacks `.{case}`")

# The samples of these articles are compiled and run, word for word, by their tests.
for article, tests in [("APIRequest.md", "CodeSamplesTests.swift"), ("OfflineAndRelaunch.md", "DurableCodeSamplesTests.swift"),
                       ("ObservingRequests.md", "ObservingCodeSamplesTests.swift"),
                       ("Testing.md", "CodeSamplesTests.swift RecordingCodeSamplesTests.swift")]:
    doc = open(f"Sources/APIManagerKit/APIManagerKit.docc/{article}").read()
    code_samples = "\n".join(open(f"Tests/APIManagerKitTests/{name}").read() for name in tests.split())
    for block in re.findall(r"```swift\n(.*?)```", doc, re.DOTALL):
        if block not in code_samples:
            errors.append(f"{article}: a Swift sample is not in {tests} word for word")

# Every Swift sample of the library's doc comments, compiled by DocCommentSamplesTests: each of its
# lines, in order, whatever the indentation and the spaces between words (the samples sit inside the
# declarations that give them their context there).
def normalized(lines):
    return [" ".join(line.split()) for line in lines if line.strip()]


compiled_comments = normalized(open("Tests/APIManagerKitTests/DocCommentSamplesTests.swift").read().splitlines())
compiled_text = "\n".join(compiled_comments)

# The "Trust and pinning" article: each sample in the library's TrustCodeSamplesTests, or (the one
# that names AsyncHTTPClientTransport) in the AsyncHTTPClient package's CodeSamplesTests, whatever
# the indentation.
trust_compiled = "\n".join(
    "\n".join(normalized(open(path).read().splitlines()))
    for path in ["Tests/APIManagerKitTests/TrustCodeSamplesTests.swift",
                 "Transports/AsyncHTTPClient/Tests/APIManagerKitAsyncHTTPClientTests/CodeSamplesTests.swift"])
for block in re.findall(r"```swift\n(.*?)```", open("Sources/APIManagerKit/APIManagerKit.docc/TrustAndPinning.md").read(), re.DOTALL):
    if "\n".join(normalized(block.splitlines())) not in trust_compiled:
        errors.append("TrustAndPinning.md: a Swift sample is not in TrustCodeSamplesTests.swift or the AsyncHTTPClient CodeSamplesTests word for word")

for path in sorted(glob.glob("Sources/**/*.swift", recursive=True)):
    lines = open(path).read().splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() == "/// ```swift":
            end = index + 1
            while end < len(lines) and lines[end].strip() != "/// ```":
                end += 1
            block = normalized(re.sub(r"^\s*/// ?", "", line) for line in lines[index + 1:end])
            if "\n".join(block) not in compiled_text:
                errors.append(f"{path}:{index + 1}: a doc-comment sample is not in DocCommentSamplesTests.swift word for word")
            index = end
        index += 1

# The README's first manager, compiled as it is by CodeSamplesTests and, with the two `nonisolated`
# the README names, in an app target with default isolation MainActor (Tests/DefaultIsolation); the
# main-actor samples of "The delegate and async" in one of the two.
readme = open("README.md").read()
first = re.search(r"## A first manager.*?```swift\n(.*?)```", readme, re.DOTALL)
app_sources = "".join(open(path).read() for path in sorted(glob.glob("Tests/DefaultIsolation/**/*.swift", recursive=True)))
root_samples = open("Tests/APIManagerKitTests/CodeSamplesTests.swift").read()
if not first:
    errors.append("README.md: no Swift sample under \"A first manager\"")
else:
    manager = first.group(1)
    if manager not in root_samples:
        errors.append("README.md: the first manager is not in CodeSamplesTests.swift word for word")
    in_app = manager.replace("struct CartItem", "nonisolated struct CartItem", 1).replace(
        "protocol CartAPIDelegate", "nonisolated protocol CartAPIDelegate", 1)
    if in_app not in app_sources:
        errors.append("README.md: the first manager, with its two `nonisolated`, is not in Tests/DefaultIsolation word for word")
hello = re.search(r"## Hello, world.*?```swift\n(.*?)```", readme, re.DOTALL)
if not hello:
    errors.append("README.md: no Swift sample under \"Hello, world\"")
else:
    if hello.group(1) not in root_samples:
        errors.append("README.md: the hello world is not in CodeSamplesTests.swift word for word")
    if hello.group(1) not in app_sources:
        errors.append("README.md: the hello world is not in Tests/DefaultIsolation word for word")
    names = set(re.findall(r"\bAPI[A-Z][A-Za-z]*", hello.group(1))) - {"HelloAPI"}
    if len(names) > 5:
        errors.append(f"README.md: the hello world uses {len(names)} of the library's names, more than five")
# The client sample: in an app target with default isolation MainActor, word for word, where its
# view model runs (Tests/DefaultIsolation); its names clash with the articles' in the root tests.
client = re.search(r"## One client for many endpoints.*?```swift\n(.*?)```", readme, re.DOTALL)
if not client:
    errors.append("README.md: no Swift sample under \"One client for many endpoints\"")
elif client.group(1) not in app_sources:
    errors.append("README.md: the client sample is not in Tests/DefaultIsolation word for word")
delegate_article = open("Sources/APIManagerKit/APIManagerKit.docc/DelegateAndAsync.md").read()
for title in ["A screen on the main actor", "A closure per call"]:
    section = delegate_article.split(f"## {title}", 1)[-1].split("\n## ", 1)[0]
    for block in re.findall(r"```swift\n(.*?)```", section, re.DOTALL):
        if block not in app_sources and block not in root_samples:
            errors.append(f"DelegateAndAsync.md: a sample of \"{title}\" is compiled nowhere word for word")

# The version, as the changelog's latest release gives it.
releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", open("CHANGELOG.md").read(), re.MULTILINE)
install = re.findall(r'\.package\(url: "[^"]*APIManagerKit\.git", from: "([^"]+)"\)', open("README.md").read())
agent = re.findall(r'public static let packageVersion = "([^"]+)"',
                   open("Sources/APIManagerKit/Core/APIEngine+DefaultHeaders.swift").read())
version = releases[0] if releases else None
if version is None:
    errors.append("CHANGELOG.md: no release heading `## [x.y.z] - yyyy-mm-dd`")
elif install != [version]:
    errors.append(f"README.md: the install line names {install}, the changelog's latest release is {version}")
elif agent != [version]:
    errors.append(f"APIEngine.DefaultHeaders.packageVersion is {agent}, the changelog's latest release is {version}")

# The folders, as the library has them, against CONTRIBUTING's table.
library = "Sources/APIManagerKit"
folders = sorted(
    os.path.relpath(directory, library)
    for directory, _, files in os.walk(library)
    if directory != library and ".docc" not in directory)
contributing = open("CONTRIBUTING.md").read()
start = contributing.index("| folder | what | start with |")
rows = []
for line in contributing[start:].splitlines():
    if not line.startswith("|"):
        break
    rows.append(line)
table = "\n".join(rows)
named = set(re.findall(r"`([A-Za-z]+(?:/[A-Za-z]+)*)/`", "\n".join(row.split("|")[1] for row in table.splitlines())))
for folder in folders:
    if folder not in named:
        errors.append(f"CONTRIBUTING.md: the 'Where things live' table has no row for `{folder}/`")
for folder in sorted(named - set(folders)):
    errors.append(f"CONTRIBUTING.md: the 'Where things live' table names `{folder}/`, which {library} lacks")

if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(
    f"docs: version {version}, {len(stories)} stories, {len(cases)} error cases, {len(hooks)} delegate hooks and {len(folders)} source"
    " folders documented")
