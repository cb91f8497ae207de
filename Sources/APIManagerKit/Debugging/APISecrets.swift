import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one rule for what is secret in a request. It decides, everywhere alike, what cURL
/// descriptions, ``APIEvent`` lines and error descriptions print as `***`, which headers a redirect
/// (or a `next` link) to another origin drops, and which requests count as authenticated for the
/// response cache.
///
/// A name (of a header, a query item, or a key of a form, multipart or JSON body, at any depth) is
/// secret when:
/// - it is `Authorization`, `Proxy-Authorization`, `Cookie` or `Set-Cookie`;
/// - written without case, `-`, `_` and `.`, it contains `token`, `secret`, `password`, `passwd`,
///   `apikey`, `auth`, `session`, `signature`, `credential` or `privatekey` (`X-Auth-Token`,
///   `api_key`, `access_token`, `client_secret`, `X-Amz-Signature`), where `auth` that begins
///   `author` counts only as `authorize` or `authorise` (`X-Authorization` is secret; `author`,
///   `authors` and `authority` are not);
/// - it is `key`, `sig`, `pwd`, `pass`, `jwt` or `AWSAccessKeyId` (with `Signature` and
///   `X-Goog-Signature`, the query keys OpenTelemetry's `url.full` redacts);
/// - or it is one of the names added: a request's ``APIAuthentication/Authorization`` header, persisted auth
///   headers, whatever an authenticator sets, and ``APIEngine/secretNames``.
///
/// The user and password of a URL are always secret.
///
/// ```swift
/// let secret = APISecrets.isSecret("X-API-Key")  // true
/// let shown = APISecrets.redacted(URL(string: "https://u:p@a.test/?api_key=k&page=2")!)
/// // "https://***:***@a.test/?api_key=***&page=2"
/// ```
public enum APISecrets {
    /// Names that are secret whatever their fragments, lower-cased.
    public static let standardNames: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "key", "sig", "pwd", "pass", "jwt",
        "awsaccesskeyid",
    ]

    /// Fragments that make a name secret, matched against the name lower-cased without `-`, `_`
    /// and `.`.
    public static let nameFragments = [
        "token", "secret", "password", "passwd", "apikey", "auth", "session", "signature", "credential",
        "privatekey",
    ]

    /// What a secret value is printed as.
    public static let mask = "***"

    /// Whether a header, query item or body key of this name holds a secret.
    /// - Parameters:
    ///   - name: the header, query item or body key name, in any case.
    ///   - additionalNames: more names that are secret, in any case.
    public static func isSecret(_ name: String, additionalNames: Set<String> = []) -> Bool {
        let lowered = name.lowercased()
        if standardNames.contains(lowered) { return true }
        if !additionalNames.isEmpty, additionalNames.contains(where: { $0.lowercased() == lowered }) { return true }
        // Compared as UTF-8 bytes: the fragments and the characters dropped are ASCII, which no
        // other character's bytes contain (and Foundation's `contains` costs ten times as much).
        let squeezed = lowered.utf8.filter {
            $0 != UInt8(ascii: "-") && $0 != UInt8(ascii: "_") && $0 != UInt8(ascii: ".")
        }
        return fragmentBytes.contains { fragment in
            fragment == authBytes ? containsAuth(squeezed) : firstOccurrence(of: fragment, in: squeezed[...]) != nil
        }
    }

    private static let fragmentBytes = nameFragments.map { Array($0.utf8) }
    private static let authBytes = Array("auth".utf8)

    /// Where `needle` first starts in `haystack`; `nil` when it does not occur.
    private static func firstOccurrence(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        var start = haystack.startIndex
        while start + needle.count <= haystack.endIndex {
            if haystack[start..<start + needle.count].elementsEqual(needle) { return start }
            start += 1
        }
        return nil
    }

    /// Whether `name` (squeezed) contains `auth` other than as the start of `author` (`author`,
    /// `authors`, `authored`, `authority`): `authorize`, `authorise` and their forms still count.
    private static func containsAuth(_ name: [UInt8]) -> Bool {
        var rest = name[...]
        while let start = firstOccurrence(of: authBytes, in: rest) {
            let after = rest[(start + authBytes.count)...]
            if !after.starts(with: "or".utf8) || after.starts(with: "oriz".utf8) || after.starts(with: "oris".utf8) {
                return true
            }
            rest = after
        }
        return false
    }

    /// The URL as text with its user, password and secret query values replaced by ``mask``.
    /// - Parameters:
    ///   - url: the URL to print.
    ///   - additionalNames: more query item names that are secret, in any case.
    public static func redacted(_ url: URL, additionalNames: Set<String> = []) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            return url.absoluteString
        }
        var changed = false
        if components.percentEncodedUser != nil {
            components.percentEncodedUser = mask
            changed = true
        }
        if components.percentEncodedPassword != nil {
            components.percentEncodedPassword = mask
            changed = true
        }
        if let query = components.percentEncodedQuery {
            let redactedQuery = redactedPairs(query, additionalNames: additionalNames)
            if redactedQuery != query {
                components.percentEncodedQuery = redactedQuery
                changed = true
            }
        }
        guard changed else { return url.absoluteString }
        return components.string ?? url.absoluteString
    }

    /// `name=value&…` (a query or a form body) with the values of secret names replaced.
    static func redactedPairs(_ text: String, additionalNames: Set<String>) -> String {
        var changed = false
        let pairs = text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> Substring in
            guard let equals = pair.firstIndex(of: "=") else { return pair }
            let rawName = pair[..<equals]
            let name =
                rawName.contains(where: { $0 == "+" || $0 == "%" })
                ? String(rawName).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(rawName)
                : String(rawName)
            guard isSecret(name, additionalNames: additionalNames) || isSecretNested(name, additionalNames) else {
                return pair
            }
            changed = true
            return rawName + "=" + mask
        }
        return changed ? pairs.joined(separator: "&") : text
    }

    /// A nested form key (`user[password]`, `a.b`): secret when any of its parts is.
    private static func isSecretNested(_ name: String, _ additionalNames: Set<String>) -> Bool {
        let parts = name.split(whereSeparator: { $0 == "[" || $0 == "]" })
        return parts.count > 1 && parts.contains { isSecret(String($0), additionalNames: additionalNames) }
    }

    /// A JSON body with the values of secret keys replaced, at any depth; `nil` when it is not
    /// JSON or has nothing to hide (print it as it is).
    static func redactedJSON(_ body: Data, additionalNames: Set<String>) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else {
            return nil
        }
        var changed = false
        let redacted = redact(object, additionalNames, &changed)
        guard changed,
            let data = try? JSONSerialization.data(withJSONObject: redacted, options: [.sortedKeys, .fragmentsAllowed])
        else { return nil }
        return String(data: data, encoding: .utf8)
    }

    private static func redact(_ value: Any, _ additionalNames: Set<String>, _ changed: inout Bool) -> Any {
        if let object = value as? [String: Any] {
            var result: [String: Any] = [:]
            for (key, member) in object {
                if isSecret(key, additionalNames: additionalNames) {
                    result[key] = mask
                    changed = true
                } else {
                    result[key] = redact(member, additionalNames, &changed)
                }
            }
            return result
        }
        if let array = value as? [Any] {
            return array.map { redact($0, additionalNames, &changed) }
        }
        return value
    }

    /// A `multipart/form-data` body with the content of every part whose field name is secret
    /// replaced by ``mask`` (files included: a part named `password` is a secret whatever it holds);
    /// `nil` when the body is not multipart or has no such part.
    static func redactedMultipart(_ body: Data, contentType: String?, additionalNames: Set<String>) -> Data? {
        guard let contentType, contentType.lowercased().contains("multipart/"),
            let boundary = multipartBoundary(contentType)
        else { return nil }
        let delimiter = Data(("--" + boundary).utf8)
        let headerEnd = Data("\r\n\r\n".utf8)
        var output = Data()
        var changed = false
        var cursor = body.startIndex
        guard let first = body.range(of: delimiter, in: cursor..<body.endIndex) else { return nil }
        output.append(body[cursor..<first.upperBound])
        cursor = first.upperBound
        while cursor < body.endIndex,
            let next = body.range(of: Data("\r\n".utf8) + delimiter, in: cursor..<body.endIndex)
        {
            let part = body[cursor..<next.lowerBound]
            if let end = part.range(of: headerEnd),
                let name = formFieldName(String(decoding: part[part.startIndex..<end.lowerBound], as: UTF8.self)),
                isSecret(name, additionalNames: additionalNames)
            {
                output.append(part[part.startIndex..<end.upperBound])
                output.append(Data(mask.utf8))
                changed = true
            } else {
                output.append(part)
            }
            output.append(body[next])
            cursor = next.upperBound
        }
        output.append(body[cursor..<body.endIndex])
        return changed ? output : nil
    }

    /// The `boundary` parameter of a `Content-Type`, quoted or not (RFC 2046 §5.1.1).
    static func multipartBoundary(_ contentType: String) -> String? {
        parameter("boundary", of: Substring(contentType)).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The `name` of a part's `Content-Disposition: form-data`, from the part's header lines.
    private static func formFieldName(_ headers: String) -> String? {
        for line in headers.split(whereSeparator: \.isNewline)
        where line.lowercased().hasPrefix("content-disposition:") {
            return parameter("name", of: line).map { $0.removingPercentEncoding ?? $0 }
        }
        return nil
    }

    /// The value of the parameter `name` (compared without case) of a header field's value
    /// (`type; name=value`), a quoted string unquoted and unescaped (RFC 9110 §5.6.4, §5.6.6).
    private static func parameter(_ name: String, of field: Substring) -> String? {
        for parameter in field.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == name else {
                continue
            }
            let value = pair[1].trimmingCharacters(in: .whitespaces)
            guard value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") else { return value }
            var unquoted = ""
            var escaped = false
            for character in value.dropFirst().dropLast() {
                if !escaped, character == "\\" {
                    escaped = true
                    continue
                }
                escaped = false
                unquoted.append(character)
            }
            return unquoted
        }
        return nil
    }

    /// A body as text for a log, secrets replaced: form and JSON bodies are read by their
    /// `Content-Type` (JSON is also recognised without one); any other text is shown as it is.
    static func redactedBody(_ text: String, data: Data, contentType: String?, additionalNames: Set<String>)
        -> String
    {
        let type = contentType?.lowercased() ?? ""
        if type.contains("application/x-www-form-urlencoded") {
            return redactedPairs(text, additionalNames: additionalNames)
        }
        if type.isEmpty || type.contains("json") {
            return redactedJSON(data, additionalNames: additionalNames) ?? text
        }
        return text
    }
}
