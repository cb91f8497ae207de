"""A hostile HTTP/1.1 server on raw sockets, for what a WSGI server will not send (gunicorn cuts a
body at its Content-Length). Started by Scripts/integration-server.sh beside the httpbin server.

Routes (the connection is kept alive after each answer):
- /overlong: a 5-byte body "first" announced as such, followed on the same connection by a second
  complete response nobody asked for (body "smuggled"): the bytes a client must never read as the
  answer to its next request. At once, or with ?delay=S after S seconds (so they arrive after the
  client has taken the connection back for its next request). With &token=T the server notes when
  those late bytes have been sent.
- /sent?token=T: waits (at most 10 s) until the late bytes of /overlong?...&token=T have been sent,
  then answers "sent" (or "not sent"), so that a test waits for the event instead of for a time.
- anything else: 200 with the body "real <path>".

Usage: raw_server.py PORT
"""
import socket
import sys
import threading
import time

SMUGGLED = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 8\r\n\r\nsmuggled"
# token -> set once the late bytes of /overlong?...&token=token were sent.
sent_events = {}
sent_lock = threading.Lock()


def sent_event(token):
    with sent_lock:
        return sent_events.setdefault(token, threading.Event())


def respond(body, extra=b""):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body)
    return head + body + extra


def serve(connection):
    buffer = b""
    with connection:
        while True:
            while b"\r\n\r\n" not in buffer:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            parts = lines[0].split(b" ")
            path = parts[1] if len(parts) > 1 else b"/"
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip() or b"0")
            while len(buffer) < length:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            buffer = buffer[length:]
            route = path.split(b"?")[0]
            query = dict(item.split(b"=", 1) for item in path.partition(b"?")[2].split(b"&") if b"=" in item)
            if route == b"/overlong":
                delay = float(query.get(b"delay", b"0"))
                if delay > 0:
                    connection.sendall(respond(b"first"))
                    time.sleep(delay)
                    connection.sendall(SMUGGLED)
                    if b"token" in query:
                        sent_event(query[b"token"]).set()
                else:
                    connection.sendall(respond(b"first", SMUGGLED))
            elif route == b"/sent":
                done = sent_event(query.get(b"token", b"")).wait(10)
                connection.sendall(respond(b"sent" if done else b"not sent"))
            else:
                connection.sendall(respond(b"real " + path.split(b"?")[0]))


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen(64)
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


if __name__ == "__main__":
    main()
