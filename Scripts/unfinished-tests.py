"""Names the tests a Swift Testing run started and never ended, from its event stream
(`swift test --event-stream-output-path FILE --event-stream-version 0`): what a pass that was
stopped (its time limit) or that died (a crash) was running. Scripts/test.sh calls it when a pass
fails.

Usage: unfinished-tests.py <events.jsonl>
"""
import json
import sys

started = {}
ended = set()
try:
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
except OSError as error:
    print(f"unfinished-tests: no event stream ({error})")
    sys.exit(0)
for line in lines:
    try:
        record = json.loads(line)
    except ValueError:
        continue  # the last line of a stopped run may be cut
    if record.get("kind") != "event":
        continue
    payload = record.get("payload", {})
    test = payload.get("testID")
    if payload.get("kind") == "testStarted" and test:
        started[test] = payload.get("instant", {}).get("absolute")
    elif payload.get("kind") in ("testEnded", "testSkipped") and test:
        ended.add(test)
unfinished = [test for test in started if test not in ended]
# A suite is unfinished whenever one of its tests is: name the innermost ones only.
innermost = [test for test in unfinished if not any(other != test and other.startswith(test + "/") for other in unfinished)]
if innermost:
    print(f"unfinished-tests: {len(innermost)} test(s) started and never ended:")
    for test in innermost:
        print(f"  {test}")
else:
    print("unfinished-tests: every test that started ended")
