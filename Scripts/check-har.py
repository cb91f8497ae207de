#!/usr/bin/env python3
"""Checks HAR files: the HAR 1.2 structure (http://www.softwareishard.com/blog/har-12-spec/, the
fields every tool reads), then a read-back by a third-party reader, haralyzer (PyPI), so a file the
tools cannot open fails the build.
    python3 Scripts/check-har.py FILE...      (haralyzer from .build-venv, installed by test.sh)
Exits 1 naming each problem."""
import datetime
import json
import sys

problems = []


def need(condition, where, what):
    if not condition:
        problems.append(f"{where}: {what}")
    return condition


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fields(value, where):
    if need(isinstance(value, list), where, "is not a list"):
        for index, field in enumerate(value):
            need(isinstance(field, dict) and isinstance(field.get("name"), str) and isinstance(field.get("value"), str),
                 f"{where}[{index}]", "is not {name, value} strings")


def check_message(message, where, kind):
    need(isinstance(message.get("httpVersion"), str), where, "httpVersion is not a string")
    fields(message.get("cookies"), f"{where}.cookies")
    fields(message.get("headers"), f"{where}.headers")
    need(isinstance(message.get("headersSize"), int), where, "headersSize is not an integer")
    need(isinstance(message.get("bodySize"), int), where, "bodySize is not an integer")
    if kind == "request":
        need(isinstance(message.get("method"), str) and message.get("method"), where, "no method")
        need(isinstance(message.get("url"), str) and "://" in message.get("url", ""), where, "no absolute url")
        fields(message.get("queryString"), f"{where}.queryString")
        post = message.get("postData")
        if post is not None:
            need(isinstance(post.get("mimeType"), str), f"{where}.postData", "mimeType is not a string")
            need(isinstance(post.get("text"), str) or isinstance(post.get("params"), list), f"{where}.postData",
                 "neither text nor params")
    else:
        need(isinstance(message.get("status"), int), where, "status is not an integer")
        need(isinstance(message.get("statusText"), str), where, "statusText is not a string")
        need(isinstance(message.get("redirectURL"), str), where, "redirectURL is not a string")
        content = message.get("content")
        if need(isinstance(content, dict), where, "no content"):
            need(isinstance(content.get("size"), int), f"{where}.content", "size is not an integer")
            need(isinstance(content.get("mimeType"), str), f"{where}.content", "mimeType is not a string")


def check_structure(har, name):
    log = har.get("log") if isinstance(har, dict) else None
    if not need(isinstance(log, dict), name, "no log"):
        return 0
    need(log.get("version") == "1.2", f"{name}: log", "version is not 1.2")
    creator = log.get("creator")
    need(isinstance(creator, dict) and isinstance(creator.get("name"), str) and isinstance(creator.get("version"), str),
         f"{name}: log.creator", "is not {name, version}")
    entries = log.get("entries")
    if not need(isinstance(entries, list), f"{name}: log", "entries is not a list"):
        return 0
    for index, entry in enumerate(entries):
        where = f"{name}: entries[{index}]"
        try:
            datetime.datetime.fromisoformat(str(entry.get("startedDateTime")).replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{where}: startedDateTime is not ISO 8601")
        need(is_number(entry.get("time")) and entry["time"] >= 0, where, "time is not a number of milliseconds")
        for kind in ("request", "response"):
            if need(isinstance(entry.get(kind), dict), where, f"no {kind}"):
                check_message(entry[kind], f"{where}.{kind}", kind)
        need(isinstance(entry.get("cache"), dict), where, "no cache object")
        timings = entry.get("timings")
        if need(isinstance(timings, dict), where, "no timings"):
            for phase in ("send", "wait", "receive"):
                need(is_number(timings.get(phase)) and timings[phase] >= 0, f"{where}.timings", f"{phase} is not >= 0")
            for phase in ("blocked", "dns", "connect", "ssl"):
                if phase in timings:
                    need(is_number(timings[phase]) and timings[phase] >= -1, f"{where}.timings", f"{phase} is not >= -1")
    return len(entries)


def read_back(path, count):
    from haralyzer import HarParser

    parser = HarParser.from_file(path)
    read = 0
    for page in parser.pages:
        for entry in page.entries:
            # What a reader touches: the request line, the status, the start, the body's type.
            _ = (entry.request.method, entry.request.url, entry.response.status, entry.startTime, entry.time,
                 entry.response.mimeType, entry.request.headers, entry.response.headers)
            read += 1
    need(read == count, path, f"haralyzer read {read} entries of {count}")


for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as file:
            har = json.load(file)
    except (OSError, ValueError) as error:
        problems.append(f"{path}: not JSON ({error})")
        continue
    count = check_structure(har, path)
    if not problems:
        try:
            read_back(path, count)
        except Exception as error:  # what the reader raises on a file it cannot open
            problems.append(f"{path}: haralyzer could not read it ({type(error).__name__}: {error})")
    if not problems:
        print(f"check-har: {path}: HAR 1.2, {count} entries, read back by haralyzer")

if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
