import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIResponseCache {
    /// What identifies a stored response: method, full URL (query included), a SHA-256 digest of the
    /// body, and a partition for the caller's identity. The whole key is stored with each entry and
    /// compared on every read, so two keys whose hashes collide are a miss, never a wrong answer.
    public struct Key: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The request method, upper-cased (`GET`).
        public var method: String
        /// The absolute URL, query included, exactly as sent.
        public var url: String
        /// The lowercase hex SHA-256 of the body; empty when there is none.
        public var bodyDigest: String
        /// Whose response this is (a user ID, an account); `""` when shared.
        public var partition: String

        /// A key from its parts; ``APIResponseCache`` makes keys from requests itself.
        public init(method: String, url: String, bodyDigest: String = "", partition: String = "") {
            self.method = method.uppercased()
            self.url = url
            self.bodyDigest = bodyDigest
            self.partition = partition
        }

        /// The key of a URL request in a partition.
        public init(request: URLRequest, partition: String? = nil) {
            let body = request.httpBody ?? Data()
            self.init(
                method: request.httpMethod ?? "GET", url: request.url?.absoluteString ?? "",
                bodyDigest: body.isEmpty ? "" : SHA256.hex(body), partition: partition ?? "")
        }

        /// The fields, length-prefixed, so that no two keys share a serialization.
        var canonicalBytes: [UInt8] {
            var bytes: [UInt8] = []
            for field in [method, url, bodyDigest, partition] {
                let utf8 = Array(field.utf8)
                bytes += "\(utf8.count):".utf8
                bytes += utf8
            }
            return bytes
        }

        public var description: String {
            "\(method) \(URL(string: url).map { APISecrets.redacted($0) } ?? url)"
                + (bodyDigest.isEmpty ? "" : " body:\(bodyDigest.prefix(12))")
                + (partition.isEmpty ? "" : " partition:\(partition)")
        }
    }
}

extension APIResponseCache {
    /// Turns a key into the name of its slot: its file name on disk and its index in memory.
    ///
    /// The default is a 64-bit FNV-1a of the key's fields, in hex. A collision only costs a miss (the
    /// stored key is compared on read), so tests can force one with ``custom(_:)``.
    public struct KeyHasher: Sendable {
        let function: @Sendable (APIResponseCache.Key) -> String

        /// A 64-bit FNV-1a of the key's fields, as 16 hex digits.
        public static let fnv1a = APIResponseCache.KeyHasher { key in
            let bytes = key.canonicalBytes
            let hash = bytes.withUnsafeBytes { FNV1a.hash($0) }
            let hex = String(hash, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }

        /// A SHA-256 of the key's fields, as 64 hex digits.
        public static let sha256 = APIResponseCache.KeyHasher { SHA256.hex($0.canonicalBytes) }

        /// Any function; its result is made safe as a file name (characters outside `A-Za-z0-9_-` are
        /// hex-encoded).
        public static func custom(_ function: @escaping @Sendable (APIResponseCache.Key) -> String)
            -> APIResponseCache.KeyHasher
        {
            APIResponseCache.KeyHasher(function: function)
        }

        func slot(for key: APIResponseCache.Key) -> String {
            let raw = function(key)
            let safe = raw.utf8.allSatisfy { byte in
                (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || byte == 45
                    || byte == 95
            }
            if safe && !raw.isEmpty && raw.utf8.count <= 128 { return raw }
            return Array(raw.utf8).hexString.prefix(128).description
        }
    }
}
