"""A TLS server that refuses, in the handshake, a client without a certificate of our test root
(nginx finishes the handshake and answers 400 instead): the trust tests' case for
APIEngine.Trust.Failure.Reason.clientCertificateRefused. Answers every request with a line of
JSON naming the client. Usage: tls_mutual_server.py PORT CERTIFICATES-DIR"""
import socket
import ssl
import sys
import threading

port, certificates = int(sys.argv[1]), sys.argv[2]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.minimum_version = ssl.TLSVersion.TLSv1_3
context.load_cert_chain(f"{certificates}/server.pem", f"{certificates}/server.key")
context.load_verify_locations(f"{certificates}/ca.pem")
context.verify_mode = ssl.CERT_REQUIRED


def serve(connection):
    try:
        with context.wrap_socket(connection, server_side=True) as tls:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = tls.recv(65536)
                if not chunk:
                    return
                request += chunk
            subject = dict(part[0] for part in tls.getpeercert()["subject"])
            body = ('{"client":"CN=%s"}\n' % subject.get("commonName", "")).encode()
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                        b"Content-Length: %d\r\n\r\n" % len(body) + body)
    except (ssl.SSLError, OSError):
        pass


listener = socket.create_server(("127.0.0.1", port))
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
