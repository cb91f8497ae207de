import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// The request as a `curl` command line that can be pasted into a POSIX shell as one command.
    ///
    /// Secrets are replaced with `***` unless `revealingSecrets` is `true`, by the rule of
    /// ``APISecrets``: header values, query values and form, multipart or JSON body fields whose names are
    /// secret (`Authorization`, `X-API-Key`, `access_token`, `password`…, and the names in
    /// `secretNames`), and the URL's user and password. The method is written whenever curl's own
    /// would differ (`-X GET` for a GET with a body, `--head` for HEAD). A body that is not text
    /// is piped in through `printf`, so the command still runs as pasted. The body of a request
    /// built from an ``APIRequest`` and streamed from a file (`.file(url)`, or a multipart form too
    /// large for memory, written to a temporary file that lasts as long as the request) is read by
    /// curl from that file (`--data-binary @path`); any other stream body, and one an attempt has
    /// taken, is read from standard input (`--data-binary @-`).
    public func cURLDescription(revealingSecrets: Bool = false, secretNames: Set<String> = []) -> String {
        var parts = ["curl"]
        let method = (httpMethod ?? "GET").uppercased()
        let body = httpBody.flatMap { $0.isEmpty ? nil : $0 }
        let stream = body == nil ? httpBodyStream : nil
        if method == "HEAD" && body == nil && stream == nil {
            parts.append("--head")
        } else if method != "GET" || body != nil || stream != nil {
            parts.append("-X " + CURLCommand.quoteIfNeeded(method))
        }
        let headers = (allHTTPHeaderFields ?? [:]).sorted(by: { $0.key.lowercased() < $1.key.lowercased() })
        for (name, value) in headers {
            let shown =
                !revealingSecrets && APISecrets.isSecret(name, additionalNames: secretNames) ? APISecrets.mask : value
            parts.append("-H " + CURLCommand.quote("\(name): \(shown)"))
        }
        var prefix = ""
        // A multipart form's secret fields are masked before the body is shown as text or bytes.
        let shownBody =
            revealingSecrets
            ? body
            : body.map {
                APISecrets.redactedMultipart(
                    $0, contentType: value(forHTTPHeaderField: "Content-Type"), additionalNames: secretNames) ?? $0
            }
        if let body = shownBody {
            if let text = CURLCommand.printableText(body) {
                let shown =
                    revealingSecrets
                    ? text
                    : APISecrets.redactedBody(
                        text, data: body, contentType: value(forHTTPHeaderField: "Content-Type"),
                        additionalNames: secretNames)
                parts.append("--data-raw " + CURLCommand.quote(shown))
            } else {
                prefix = "printf " + CURLCommand.quote(CURLCommand.octalEscaped(body)) + " | "
                parts.append("--data-binary @-")
            }
        } else if let stream {
            if let file = BodyFile.registered(for: stream), file.deferredWriter == nil {
                parts.append("--data-binary @" + CURLCommand.quote(file.url.path))
            } else {
                parts.append("--data-binary @-")
            }
        }
        let target =
            url.map { revealingSecrets ? $0.absoluteString : APISecrets.redacted($0, additionalNames: secretNames) }
            ?? ""
        parts.append(CURLCommand.quote(target))
        return prefix + parts.joined(separator: " \\\n\t")
    }

    /// The request as a `curl` command; `sensitiveHeaders` are more secret names.
    @available(*, deprecated, renamed: "cURLDescription(revealingSecrets:secretNames:)")
    public func cURLDescription(revealingSecrets: Bool = false, sensitiveHeaders: Set<String>) -> String {
        cURLDescription(revealingSecrets: revealingSecrets, secretNames: sensitiveHeaders)
    }
}

extension APIRequest {
    /// This request's `URLRequest` as a `curl` command, with its secrets (``authorization`` among
    /// them, and the names in `secretNames`) redacted unless `revealingSecrets` is `true`; see
    /// `URLRequest.cURLDescription(revealingSecrets:secretNames:)`.
    public func cURLDescription(revealingSecrets: Bool = false, secretNames: Set<String> = []) throws(APIError)
        -> String
    {
        var names = secretNames
        if let authorization { names.insert(authorization.header.name) }
        return try makeURLRequest().cURLDescription(revealingSecrets: revealingSecrets, secretNames: names)
    }
}

enum CURLCommand {
    /// Single-quoted for a POSIX shell.
    static func quote(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A method as it is when it is a plain token, else quoted.
    static func quoteIfNeeded(_ token: String) -> String {
        token.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D }
            ? token : quote(token)
    }

    /// The body as text when it is UTF-8 without control characters other than tab, CR and LF
    /// (a shell string cannot hold a NUL); `nil` otherwise.
    static func printableText(_ body: Data) -> String? {
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        let printable = text.unicodeScalars.allSatisfy { scalar in
            scalar.value >= 0x20 && scalar.value != 0x7F || scalar == "\t" || scalar == "\n" || scalar == "\r"
        }
        return printable ? text : nil
    }

    /// Bytes as a `printf` format that prints them back: every byte as a three-digit octal escape
    /// (POSIX `printf` understands `\ooo`; `%` is escaped too).
    static func octalEscaped(_ body: Data) -> String {
        var text = ""
        text.reserveCapacity(body.count * 4)
        for byte in body {
            let octal = String(byte, radix: 8)
            text += "\\" + String(repeating: "0", count: 3 - octal.count) + octal
        }
        return text
    }
}
