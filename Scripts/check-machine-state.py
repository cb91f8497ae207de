"""The scheduling machine owns its state: a task's record (`task.record`) is read and written only
by the machine, in Sources/APIManagerKit/Scheduling/Machine/ (the task's handle asks the machine for
what users read, inside its engine's locked state: `machine.state(of:)`, `attemptCount(of:)`,
`responseSource(of:)`), and the machine's own stored state is written only there. This check, run by
Scripts/test.sh, fails when a library file elsewhere names a task's record (but for its one
declaration, in `Core/APITask.swift`),
or writes the machine's stored properties through `machine.…`. Tests may read both.

Usage: check-machine-state.py [<sources-dir>]   (default Sources/APIManagerKit)
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "Sources/APIManagerKit"
machine_dir = os.path.join(root, "Scheduling", "Machine")
# A task's record through any task's bag (`task.record`, `record`), and inside the bag's own
# file its bare name (`record.lifecycle`).
record_use = re.compile(r"\.record\b(?!\s*[(:])")
bare_record_use = re.compile(r"(?<![\w.])record\.")
task_file = os.path.join(root, "Core", "APITask.swift")
declaration = "final var record = SchedulingRecord()"
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
            uses_record = record_use.search(code) or (path == task_file and bare_record_use.search(code))
            if (uses_record and declaration not in code) or state_write.search(code):
                found.append(f"{path}:{number}: {line.strip()}")
if found:
    print("check-machine-state: the scheduling machine's records or state are used outside Scheduling/Machine/:")
    print("\n".join(found))
    sys.exit(1)
print("check-machine-state: only Scheduling/Machine/ reads and writes a task's record and writes the machine's state")
