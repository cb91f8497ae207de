"""Fails when the library's privacy manifest and its code disagree (run by Scripts/test.sh).

Apple lists APIs that an app (and each SDK in it) may call only for a declared reason, the
"required reason APIs"; since May 2024 App Store Connect flags an app that calls one without a
reason in a `PrivacyInfo.xcprivacy` (ITMS-91053). This check:
- parses the manifest as a property list and checks its shape (tracking `false`, the three arrays,
  each accessed-API entry a known category with at least one reason that category allows);
- scans the Swift code (comments left out) for the APIs of each category;
- fails when the code uses a category the manifest lacks, or the manifest lists one the code does
  not use.

Usage: python3 Scripts/check-privacy-manifest.py [MANIFEST [SOURCES]]
(`Sources/APIManagerKit/PrivacyInfo.xcprivacy` and `Sources/APIManagerKit` unless given).
"""

import glob
import plistlib
import re
import sys

# Apple's categories, the APIs that put code in each (as Swift spells them), and the reasons a
# library inside an app may declare for them ("Describing use of required reason API").
CATEGORIES = {
    "NSPrivacyAccessedAPICategoryFileTimestamp": {
        "apis": [r"\.creationDate\b", r"\.modificationDate\b", r"\bNSFileCreationDate\b",
                 r"\bNSFileModificationDate\b", r"\bfileModificationDate\b", r"\bcontentModificationDateKey\b",
                 r"\bcreationDateKey\b", r"\bgetattrlist\s*\(", r"\bgetattrlistbulk\s*\(", r"\bfgetattrlist\s*\(",
                 r"\bgetattrlistat\s*\(", r"(?<![\w.])stat\s*\(", r"\bfstat\s*\(", r"\bfstatat\s*\(",
                 r"\blstat\s*\("],
        "reasons": {"DDA9.1", "C617.1", "3B52.1", "0A2A.1"},
    },
    "NSPrivacyAccessedAPICategorySystemBootTime": {
        "apis": [r"\bsystemUptime\b", r"\bmach_absolute_time\s*\("],
        "reasons": {"35F9.1", "8FFB.1", "3D61.1"},
    },
    "NSPrivacyAccessedAPICategoryDiskSpace": {
        "apis": [r"\bvolumeAvailableCapacity\w*Key\b", r"\bvolumeTotalCapacityKey\b", r"\bsystemFreeSize\b",
                 r"\bsystemSize\b", r"\bNSFileSystemFreeSize\b", r"\bNSFileSystemSize\b", r"\bstatfs\s*\(",
                 r"\bstatvfs\s*\(", r"\bfstatfs\s*\(", r"\bfstatvfs\s*\("],
        "reasons": {"85F4.1", "E174.1", "7D9E.1", "B728.1"},
    },
    "NSPrivacyAccessedAPICategoryUserDefaults": {
        "apis": [r"\bUserDefaults\b", r"\bNSUserDefaults\b"],
        "reasons": {"CA92.1", "1C8F.1", "C56D.1", "AC6B.1"},
    },
    "NSPrivacyAccessedAPICategoryActiveKeyboards": {
        "apis": [r"\bactiveInputModes\b"],
        "reasons": {"3EC4.1", "54BD.1"},
    },
}

manifest_path = sys.argv[1] if len(sys.argv) > 1 else "Sources/APIManagerKit/PrivacyInfo.xcprivacy"
sources = sys.argv[2] if len(sys.argv) > 2 else "Sources/APIManagerKit"
errors = []

try:
    with open(manifest_path, "rb") as file:
        manifest = plistlib.load(file)
except Exception as error:  # OSError, an invalid or truncated plist
    print(f"{manifest_path}: not a readable property list: {error}", file=sys.stderr)
    sys.exit(1)

if not isinstance(manifest, dict):
    errors.append(f"{manifest_path}: the top level is not a dictionary")
    manifest = {}
if manifest.get("NSPrivacyTracking") is not False:
    errors.append(f"{manifest_path}: NSPrivacyTracking is not false (the library tracks no one)")
for key in ("NSPrivacyTrackingDomains", "NSPrivacyCollectedDataTypes", "NSPrivacyAccessedAPITypes"):
    if not isinstance(manifest.get(key), list):
        errors.append(f"{manifest_path}: {key} is not an array")

declared = {}
for entry in manifest.get("NSPrivacyAccessedAPITypes") or []:
    category = entry.get("NSPrivacyAccessedAPIType") if isinstance(entry, dict) else None
    reasons = entry.get("NSPrivacyAccessedAPITypeReasons") if isinstance(entry, dict) else None
    if category not in CATEGORIES:
        errors.append(f"{manifest_path}: {category!r} is not one of Apple's required-reason categories")
        continue
    if not isinstance(reasons, list) or not reasons:
        errors.append(f"{manifest_path}: {category} gives no reason")
        continue
    for reason in reasons:
        if reason not in CATEGORIES[category]["reasons"]:
            errors.append(f"{manifest_path}: {reason!r} is not a reason {category} allows")
    declared[category] = reasons

used = {}
for path in sorted(glob.glob(f"{sources}/**/*.swift", recursive=True)):
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line.split("//", 1)[0])  # no comment, no string
        for category, spec in CATEGORIES.items():
            if any(re.search(api, code) for api in spec["apis"]):
                used.setdefault(category, f"{path}:{number}")

for category, place in sorted(used.items()):
    if category not in declared:
        errors.append(f"{manifest_path}: lacks {category}, which the code uses ({place})")
for category in sorted(set(declared) - set(used)):
    errors.append(f"{manifest_path}: lists {category}, which no code in {sources} uses")

if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
short = {category: category.replace("NSPrivacyAccessedAPICategory", "") for category in CATEGORIES}
uses = ", ".join(f"{short[category]} first at {place}" for category, place in sorted(used.items()))
print(f"privacy manifest: {', '.join(short[c] for c in sorted(declared)) or 'no category'} declared; the code uses {uses or 'none'}")
