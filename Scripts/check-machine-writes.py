"""The scheduling machine owns its state: a task's record (`task.record`) and the machine's own
stored state are written only by the machine's events, in Sources/APIManagerKit/Scheduling/Machine/.
This check, run by Scripts/test.sh, fails when a library file elsewhere writes either: an assignment
or compound assignment to `record.…`, a mutating call on it (`record.takeLifecycle()`, a list's
`append`/`remove`…), or a write to the machine's stored properties through `machine.…`.
Reading is allowed (the task's handle reads its record for `state` and `attemptCount`).

Usage: check-machine-writes.py [<sources-dir>]   (default Sources/APIManagerKit)
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "Sources/APIManagerKit"
machine_dir = os.path.join(root, "Scheduling", "Machine")
record_write = re.compile(r"\brecord(\.\w+)+\s*(=(?!=)|\+=|-=)|\brecord(\.\w+)*\.(takeLifecycle|append|prepend|remove|join|joinFront)\(")
state_write = re.compile(
    r"\bmachine\.(defaultScope|namedScopes|nextSequence|throttleTurns|outbox)\b(\.\w+)*\s*(=(?!=)|\+=|-=|\.\w+\()")
found = []
for directory, _, files in os.walk(root):
    if os.path.commonpath([directory, machine_dir]) == machine_dir:
        continue
    for name in files:
        if not name.endswith(".swift"):
            continue
        path = os.path.join(directory, name)
        for number, line in enumerate(open(path), 1):
            code = line.split("//", 1)[0]
            if record_write.search(code) or state_write.search(code):
                found.append(f"{path}:{number}: {line.strip()}")
if found:
    print("check-machine-writes: the scheduling machine's state is written outside Scheduling/Machine/:")
    print("\n".join(found))
    sys.exit(1)
print("check-machine-writes: the scheduling machine's records and state are written only in Scheduling/Machine/")
