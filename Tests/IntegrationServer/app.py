"""The integration tests' server: httpbin, plus a few fixture routes for what httpbin cannot do.

Run under gunicorn by Scripts/integration-server.sh; bound to 127.0.0.1 only.
"""
import gzip
import hashlib
import io
import json
import threading
import time
import urllib.parse

from httpbin import app as httpbin_app

_lock = threading.Lock()
_retry_counts = {}
_track_log = []
# Per group: how many /fixture/track requests have started, for those that wait for the others.
_track_started = {}
_track_arrivals = threading.Condition(_lock)
_truncated_counts = {}
# Per realm: the Range header of each request to /fixture/file (or "-"), and whether its cut was made.
_file_log = {}
_file_cut_done = set()
# Per realm: the requests /fixture/sse-empty-id has answered.
_sse_empty_id = {}
# Per group: every /fixture/mutation request that arrived, and the mutations applied (once per key).
_mutation_arrivals = {}
_mutations_applied = {}


def _pattern(start, count):
    """`count` bytes of the repeating pattern i % 251, from offset `start`."""
    base = bytes(i % 251 for i in range(251))
    first = start % 251
    block = (base[first:] + base[:first]) * (count // 251 + 2)
    return block[:count]
# Per realm (a name the client picks, so runs do not meet): issued access tokens and their expiry,
# valid refresh tokens, and how many tokens were issued.
_realms = {}


def _realm(name):
    return _realms.setdefault(name, {"access": {}, "refresh": {"start"}, "issued": 0, "refused": 0})


def _make_bomb(mebibytes):
    """`mebibytes` MiB of zeros, gzip-compressed: about a thousandth of that on the wire."""
    buffer = io.BytesIO()
    chunk = bytes(1 << 20)
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6) as zipped:
        for _ in range(mebibytes):
            zipped.write(chunk)
    return buffer.getvalue()


# Made when the worker starts, so serving it never holds up other requests.
_BOMB_MIB = 64
_BOMBS = {_BOMB_MIB: _make_bomb(_BOMB_MIB)}


def _json(start_response, status, payload, headers=()):
    body = json.dumps(payload).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))] + list(headers))
    return [body]


def _query(environ):
    from urllib.parse import parse_qs
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _read_body(environ):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    return environ["wsgi.input"].read(length) if length else b""


def fixture(environ, start_response):
    path = environ.get("PATH_INFO", "")
    parts = path.strip("/").split("/")  # ["fixture", route, arg...]
    route = parts[1] if len(parts) > 1 else ""
    arg = parts[2] if len(parts) > 2 else ""
    query = _query(environ)

    if route == "sse-empty-id":
        # Per ?realm=R: the first request gets an event with id 7, then one after an empty `id`
        # field, then the connection drops; the second gets one event saying which Last-Event-ID it
        # carried ("(none)" without the header) and ends; later ones get 204.
        realm = query.get("realm", "")
        with _lock:
            _sse_empty_id[realm] = _sse_empty_id.get(realm, 0) + 1
            number = _sse_empty_id[realm]
        if number > 2:
            start_response("204 No Content", [])
            return [b""]
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        if number == 2:
            seen = environ.get("HTTP_LAST_EVENT_ID")
            return [("retry: 100\ndata: last-event-id=%s\n\n" % ("(none)" if seen is None else repr(seen))).encode()]

        def dropping():
            yield b"retry: 100\nid: 7\ndata: a\n\nid\ndata: b\n\n"
            raise ConnectionAbortedError("dropped on purpose")
        return dropping()

    if route == "range-answer":
        # A file of ?size=N bytes (the pattern i % 251, ETag "one") that answers a Range request
        # wrongly, as /fixture/range-answer/MODE says: `invalid` (a Content-Range whose last byte is
        # the complete length), `other-etag` (the rest of another version, ETag "two"), `short` (the
        # next 10 bytes only). Without Range: the whole file, 200.
        size = min(int(query.get("size", "1000")), 1 << 20)
        byte_range = environ.get("HTTP_RANGE")
        if not byte_range:
            start_response("200 OK", [("ETag", '"one"'), ("Content-Length", str(size))])
            return [_pattern(0, size)]
        first = int(byte_range[6:].split("-")[0] or "0")
        if arg == "invalid":
            headers = [("ETag", '"one"'), ("Content-Range", "bytes %d-%d/%d" % (first, size - 1, size - 1))]
            body = _pattern(first, size - first)
        elif arg == "other-etag":
            headers = [("ETag", '"two"'), ("Content-Range", "bytes %d-%d/%d" % (first, size - 1, size))]
            body = bytes([0xEE]) * (size - first)
        else:
            headers = [("ETag", '"one"'), ("Content-Range", "bytes %d-%d/%d" % (first, first + 9, size))]
            body = _pattern(first, 10)
        start_response("206 Partial Content", headers + [("Content-Length", str(len(body)))])
        return [body]

    if route == "trickle":
        # ?count=N parts of 100 bytes (N * 100 with its Content-Length), ?interval=S seconds apart
        # (at most 2), then, with ?stall=S, a stall of S seconds (at most 10) before the last part:
        # a healthy slow body, or one that stops.
        count = min(int(query.get("count", "10")), 1000)
        interval = min(float(query.get("interval", "0.3")), 2.0)
        stall = min(float(query.get("stall", "0")), 10.0)
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(count * 100)), ("ETag", '"trickle"')])

        def parts():
            for i in range(count):
                if i > 0:
                    time.sleep(interval)
                if stall and i == count - 1:
                    time.sleep(stall)
                yield bytes([i % 256]) * 100
        return parts()

    if route == "set-cookies":
        # Three Set-Cookie fields, each one cookie although two hold commas (RFC 6265 §3); with
        # ?redirect=1 they come on a 302 to /cookies (httpbin echoes the cookies it is sent).
        fields = [("Set-Cookie", "foo=bar; b,az=qux; Path=/"), ("Set-Cookie", 'quoted="bar, baz=qux"; Path=/'),
                  ("Set-Cookie", "plain=1; Path=/")]
        if query.get("redirect"):
            start_response("302 Found", [("Location", "/cookies"), ("Content-Length", "0")] + fields)
            return [b""]
        return _json(start_response, "200 OK", {"set": 3}, fields)

    if route == "retry-after":
        # The first request for a key answers 503 with Retry-After; the next ones answer 200.
        with _lock:
            _retry_counts[arg] = _retry_counts.get(arg, 0) + 1
            count = _retry_counts[arg]
        if count == 1:
            return _json(start_response, "503 Service Unavailable", {"message": "busy, come back later"},
                         [("Retry-After", query.get("after", "1"))])
        return _json(start_response, "200 OK", {"attempts": count, "served_at": time.time()})

    if route == "error":
        # Any status with a JSON body built from the query: /fixture/error/422?field=msg&text=...
        status = int(arg or "400")
        payload = {query.get("field", "message"): query.get("text", "something went wrong")}
        headers = [("WWW-Authenticate", 'Bearer realm="fixture"')] if query.get("challenge") else []
        return _json(start_response, "%d Fixture" % status, payload, headers)

    if route == "bytes":
        # n bytes of a repeating pattern (i % 251), so a test can check every byte. With ?stall=S the
        # head goes out at once and the body only S seconds later (at most 10).
        count = min(int(arg or "0"), 64 * 1024 * 1024)
        pattern = bytes(i % 251 for i in range(251))
        body = (pattern * (count // 251 + 1))[:count]
        stall = min(float(query.get("stall", "0")), 10.0)
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(count))])
        if stall > 0:
            def stalled():
                yield b""  # the head is written now
                time.sleep(stall)
                yield body
            return stalled()
        return [body]

    if route == "digest":
        body = _read_body(environ)
        return _json(start_response, "200 OK", {"length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                                                "content_type": environ.get("CONTENT_TYPE", "")})

    if route == "track":
        # Records when a request of a named group starts and ends, holding it for `delay` seconds;
        # with `together=N`, until N requests of the group have started instead (at most `delay`
        # seconds): requests sent side by side then overlap however busy the machine is.
        started = time.time()
        delay = float(query.get("delay", "0.2"))
        together = int(query.get("together", "0"))
        if together > 0:
            with _track_arrivals:
                _track_started[arg] = _track_started.get(arg, 0) + 1
                _track_arrivals.notify_all()
                _track_arrivals.wait_for(lambda: _track_started[arg] >= together, timeout=delay)
        else:
            time.sleep(delay)
        ended = time.time()
        with _lock:
            _track_log.append({"group": arg, "name": query.get("name", ""), "start": started, "end": ended})
        return _json(start_response, "200 OK", {"name": query.get("name", "")})

    if route == "mutation":
        # A mutation of a group, applied once per Idempotency-Key when it arrives (a request with a
        # key already seen is answered without applying it again, as a server honouring the header
        # does); every arrival is recorded. `hold=S` keeps the answer S seconds after applying, so
        # that a client can be killed while it waits.
        key = environ.get("HTTP_IDEMPOTENCY_KEY", "")
        # The name and hold come in the query or, for a form POST, in the body.
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(_read_body(environ).decode("utf-8", "replace")).items()}
        query = dict(form, **query)
        name = query.get("name", "")
        with _lock:
            _mutation_arrivals.setdefault(arg, []).append({"name": name, "key": key})
            applied = _mutations_applied.setdefault(arg, [])
            repeat = bool(key) and any(entry["key"] == key for entry in applied)
            if not repeat:
                applied.append({"name": name, "key": key})
        time.sleep(float(query.get("hold", "0")))
        return _json(start_response, "200 OK", {"name": name, "repeat": repeat})

    if route == "mutation-log":
        with _lock:
            return _json(start_response, "200 OK", {"arrivals": list(_mutation_arrivals.get(arg, [])),
                                                    "applied": list(_mutations_applied.get(arg, []))})

    if route == "track-log":
        with _lock:
            entries = [entry for entry in _track_log if entry["group"] == arg]
        return _json(start_response, "200 OK", {"entries": entries})

    if route == "basic-401":
        # A 401 with a Basic challenge (or several schemes) and a JSON body.
        if query.get("schemes") == "many":
            challenges = [("WWW-Authenticate", "Negotiate"), ("WWW-Authenticate", "NTLM"),
                          ("WWW-Authenticate", 'Basic realm="fixture"')]
        else:
            challenges = [("WWW-Authenticate", 'Basic realm="fixture"')]
        return _json(start_response, "401 Unauthorized", {"message": "who are you"}, challenges)

    if route == "gzip-bomb":
        # 64 MiB of zeros, sent gzip-compressed (about 64 KiB on the wire); ?mib=N (up to 2048) for
        # another size, made on first use and kept.
        mebibytes = min(max(int(query.get("mib", _BOMB_MIB)), 1), 2048)
        with _lock:
            body = _BOMBS.get(mebibytes)
        if body is None:
            # Made outside the lock, so the other fixtures never wait for it.
            body = _make_bomb(mebibytes)
            with _lock:
                _BOMBS[mebibytes] = body
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Encoding", "gzip"),
                                  ("Content-Length", str(len(body)))])
        return [body]

    if route == "truncated":
        # /fixture/truncated/<key>?times=N: the first N requests for a key announce 4096 bytes, send
        # 1024 and close the connection; later ones send a small JSON body.
        with _lock:
            _truncated_counts[arg] = _truncated_counts.get(arg, 0) + 1
            count = _truncated_counts[arg]
        if count <= int(query.get("times", "1")):
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "4096")])

            def cut_short():
                yield b" " * 1024
                raise ConnectionAbortedError("fixture: closing mid-body")
            return cut_short()
        return _json(start_response, "200 OK", {"attempts": count})

    if route == "token":
        # OAuth-style refresh: POST refresh_token=... (form) answers a new access token valid for
        # `ttl` seconds and a new refresh token, after `delay` seconds; an unknown refresh token is
        # refused with 400 invalid_grant. "start" is every realm's first refresh token.
        from urllib.parse import parse_qs
        form = {k: v[-1] for k, v in parse_qs(_read_body(environ).decode("utf-8", "replace")).items()}
        time.sleep(float(query.get("delay", "0")))
        with _lock:
            realm = _realm(arg)
            if form.get("refresh_token") not in realm["refresh"]:
                return _json(start_response, "400 Bad Request", {"error": "invalid_grant"})
            realm["issued"] += 1
            number = realm["issued"]
            access, refresh = "%s-a%d" % (arg, number), "%s-r%d" % (arg, number)
            ttl = float(query.get("ttl", "60"))
            realm["access"][access] = time.time() + ttl
            realm["refresh"].add(refresh)
        return _json(start_response, "200 OK", {"access_token": access, "refresh_token": refresh, "expires_in": ttl})

    if route == "protected":
        # 200 for a current access token of the realm, else 401 with a Bearer challenge.
        auth = environ.get("HTTP_AUTHORIZATION", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        with _lock:
            realm = _realm(arg)
            expiry = realm["access"].get(token)
            if expiry is None or expiry < time.time():
                realm["refused"] += 1
        if expiry is None or expiry < time.time():
            return _json(start_response, "401 Unauthorized", {"error": "invalid_token"},
                         [("WWW-Authenticate", 'Bearer error="invalid_token"')])
        return _json(start_response, "200 OK", {"value": token})

    if route == "token-log":
        with _lock:
            realm = _realm(arg)
            return _json(start_response, "200 OK", {"issued": realm["issued"], "refused": realm["refused"]})

    if route == "pages":
        # Page `page` of `arg` pages: {"page": N, "items": [...]}, with an RFC 8288 Link header of
        # relative targets (next, first, last); with loop=K, page K's next link leads back to page 1.
        total = int(arg or "3")
        page = int(query.get("page", "1"))
        loop = query.get("loop")
        suffix = "&loop=%s" % loop if loop else ""
        target = "/fixture/pages/%d?page=%%d%s" % (total, suffix)
        links = ['<%s>; rel="first"' % (target % 1), '<%s>; rel="last"' % (target % total)]
        if loop and page == int(loop):
            links.insert(0, '<%s>; rel="next"' % (target % 1))
        elif page < total:
            links.insert(0, '<%s>; rel="next"' % (target % (page + 1)))
        return _json(start_response, "200 OK", {"page": page, "items": [page * 10, page * 10 + 1]},
                     [("Link", ", ".join(links))])

    if route == "file":
        # A file of `arg` bytes (the pattern i % 251) with a strong ETag, honouring Range and If-Range
        # as nginx does. With ?realm=R&cut=N the first request of realm R is cut after N bytes (the
        # connection drops); /fixture/file-log/R lists the Range headers realm R sent.
        size = min(int(arg or "0"), 512 * 1024 * 1024)
        etag = '"file-%d"' % size
        realm = query.get("realm", "")
        byte_range = environ.get("HTTP_RANGE")
        if_range = environ.get("HTTP_IF_RANGE")
        with _lock:
            _file_log.setdefault(realm, []).append(byte_range or "-")
        start = 0
        status = "200 OK"
        headers = [("Content-Type", "application/octet-stream"), ("ETag", etag), ("Accept-Ranges", "bytes")]
        if byte_range and byte_range.startswith("bytes=") and (if_range is None or if_range == etag):
            start = int(byte_range[6:].split("-")[0] or "0")
            if start >= size:
                start_response("416 Range Not Satisfiable", [("Content-Range", "bytes */%d" % size),
                                                            ("Content-Length", "0")])
                return [b""]
            status = "206 Partial Content"
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size)))
        headers.append(("Content-Length", str(size - start)))
        cut = None
        if realm and "cut" in query:
            with _lock:
                if realm not in _file_cut_done:
                    _file_cut_done.add(realm)
                    cut = int(query["cut"])
        start_response(status, headers)

        def body():
            position, sent = start, 0
            while position < size:
                count = min(1 << 20, size - position)
                if cut is not None and sent + count > cut:
                    yield _pattern(position, cut - sent)
                    raise ConnectionAbortedError("cut on purpose")  # gunicorn drops the connection
                yield _pattern(position, count)
                position += count
                sent += count
        return body()

    if route == "sse":
        # ?count=N events (id 1…N, data "event i"), ?interval=S seconds apart, after a `retry` field;
        # a comment line first. With Last-Event-ID the stream goes on after that ID.
        # ?retry=MS is sent first (1500 unless given). With ?realm=R&drop=K the first request of realm R
        # drops the connection after K events; once every event is sent, the route answers 204 (do
        # not reconnect) to a request that asks for more.
        count = min(int(query.get("count", "3")), 1000)
        interval = min(float(query.get("interval", "0")), 1.0)
        retry = int(query.get("retry", "1500"))
        after = int(environ.get("HTTP_LAST_EVENT_ID") or "0")
        realm = query.get("realm", "")
        if after >= count and environ.get("HTTP_LAST_EVENT_ID"):
            start_response("204 No Content", [])
            return [b""]
        drop = None
        if realm and "drop" in query:
            with _lock:
                if realm not in _file_cut_done:
                    _file_cut_done.add(realm)
                    drop = int(query["drop"])
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])

        def events():
            yield (": hello\n\nretry: %d\n\n" % retry).encode()
            for i in range(after + 1, count + 1):
                if interval:
                    time.sleep(interval)
                if drop is not None and i > drop:
                    yield ("id: %d\ndata: half an ev" % i).encode()
                    raise ConnectionAbortedError("dropped on purpose")
                yield ("id: %d\nevent: tick\ndata: event %d\ndata: line two\n\n" % (i, i)).encode()
        return events()

    if route == "ndjson":
        count = min(int(query.get("count", "3")), 100000)
        start_response("200 OK", [("Content-Type", "application/x-ndjson")])

        def lines():
            for i in range(count):
                yield ('{"n": %d, "text": "line %d"}\n' % (i, i)).encode()
        return lines()

    if route == "file-log":
        with _lock:
            return _json(start_response, "200 OK", {"ranges": _file_log.get(arg, [])})

    if route == "file-digest":
        size = min(int(arg or "0"), 512 * 1024 * 1024)
        digest = hashlib.sha256()
        position = 0
        while position < size:
            count = min(1 << 20, size - position)
            digest.update(_pattern(position, count))
            position += count
        return _json(start_response, "200 OK", {"bytes": size, "sha256": digest.hexdigest()})

    if route == "redirect-after-body":
        # Reads the whole body (chunked or not), then redirects to /anything with ?status=.
        stream = environ["wsgi.input"]
        remaining = int(environ.get("CONTENT_LENGTH") or 0)
        while True:
            chunk = stream.read(min(1 << 20, remaining) if remaining else 1 << 20)
            if not chunk:
                break
            if remaining:
                remaining -= len(chunk)
                if remaining == 0:
                    break
        status = int(_query(environ).get("status", "307"))
        start_response(f"{status} Redirect", [("Location", "/anything"), ("Content-Length", "0")])
        return [b""]

    if route == "upload-digest":
        # The size and SHA-256 of the raw body, read in chunks (uploads of hundreds of MiB).
        digest = hashlib.sha256()
        remaining = int(environ.get("CONTENT_LENGTH") or 0)
        stream = environ["wsgi.input"]
        received = 0
        while True:
            chunk = stream.read(min(1 << 20, remaining) if remaining else 1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            received += len(chunk)
            if remaining:
                remaining -= len(chunk)
                if remaining == 0:
                    break
        return _json(start_response, "200 OK", {
            "bytes": received, "sha256": digest.hexdigest(),
            "contentType": environ.get("CONTENT_TYPE", ""),
            "contentLength": environ.get("CONTENT_LENGTH"),
            "transferEncoding": environ.get("HTTP_TRANSFER_ENCODING"),
        })

    if route == "multipart-digest":
        # A multipart body parsed by werkzeug (files spooled to disk): per field, its text; per file,
        # its name, type, size and SHA-256.
        from werkzeug.wrappers import Request
        request = Request(environ)
        files = {}
        for name, upload in request.files.items(multi=True):
            digest = hashlib.sha256()
            size = 0
            while True:
                chunk = upload.stream.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                size += len(chunk)
            files[name] = {"filename": upload.filename, "contentType": upload.content_type, "bytes": size,
                           "sha256": digest.hexdigest()}
        return _json(start_response, "200 OK", {"form": request.form.to_dict(flat=True), "files": files})

    if route == "connection":
        # The client's port: the same port on two requests means the connection was reused.
        return _json(start_response, "200 OK", {"port": int(environ.get("REMOTE_PORT") or 0)})

    return _json(start_response, "404 Not Found", {"message": "no fixture route %s" % path})


def app(environ, start_response):
    if environ.get("PATH_INFO", "").startswith("/fixture/"):
        return fixture(environ, start_response)
    return httpbin_app(environ, start_response)
