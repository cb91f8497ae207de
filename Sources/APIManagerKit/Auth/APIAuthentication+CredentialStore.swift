import Foundation

extension APIAuthentication {
    /// Where persisted auth headers live, per origin (`"https://api.example.com:443"`).
    /// ``APIAuthentication/InMemoryCredentialStore`` and ``APIAuthentication/FileCredentialStore`` are provided; implement this
    /// protocol for the keychain or a database. Called from any thread.
    public protocol CredentialStore: Sendable {
        /// The headers stored for an origin; empty when none.
        func headers(forOrigin origin: String) -> [String: String]
        /// Merges `headers` into what is stored for an origin (a header given again replaces its value).
        func save(_ headers: [String: String], forOrigin origin: String)
        /// Forgets everything stored for an origin (sign-out).
        func removeHeaders(forOrigin origin: String)
        /// Replaces what is stored for an origin with `headers`, in one step: a crash or a reader in
        /// the middle sees the old headers or the new ones, never none. ``APIAuthentication`` writes
        /// every credential change this way. Defaults to ``removeHeaders(forOrigin:)`` then
        /// ``save(_:forOrigin:)``, which is not one step: implement it for a store of your own.
        func replaceHeaders(_ headers: [String: String], forOrigin origin: String)
    }
}

extension APIAuthentication.CredentialStore {
    /// Removes, then saves: not one step. Implement it in a store of your own.
    public func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
        removeHeaders(forOrigin: origin)
        save(headers, forOrigin: origin)
    }
}

extension APIAuthentication {
    /// Keeps persisted auth headers in memory, for the life of the store.
    public final class InMemoryCredentialStore: APIAuthentication.CredentialStore, @unchecked Sendable {
        // @unchecked: `table` is read and written only while holding `lock`.
        private let lock = Lock()
        private var table: [String: [String: String]] = [:]

        /// An empty store.
        public init() {}

        public func headers(forOrigin origin: String) -> [String: String] {
            lock.withLock { table[origin] ?? [:] }
        }

        public func save(_ headers: [String: String], forOrigin origin: String) {
            lock.withLock { table[origin, default: [:]].merge(headers, uniquingKeysWith: { $1 }) }
        }

        public func removeHeaders(forOrigin origin: String) {
            lock.withLock { table[origin] = nil }
        }

        public func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
            lock.withLock { table[origin] = headers }
        }
    }
}

extension APIAuthentication {
    /// Keeps persisted auth headers in a JSON file only its owner can read or write (mode `0600`),
    /// rewritten atomically on each change, so they survive a restart.
    ///
    /// A file that cannot be read at start (absent, or not this format) starts the store empty; a write
    /// that fails keeps the headers in memory and records the failure in ``lastWriteError``. A write is a
    /// temporary file beside it (`.tmp-NAME-UUID`), renamed over it; the temporary files a process killed
    /// mid-write left (credentials in them) are removed when a store opens the file, and no other file of
    /// the directory.
    public final class FileCredentialStore: APIAuthentication.CredentialStore, @unchecked Sendable {
        // @unchecked: `table` and `writeError` are read and written only while holding `lock`.
        /// The file the headers are kept in.
        public let fileURL: URL
        private let lock = Lock()
        private var table: [String: [String: String]]
        private var writeError: (any Error)?

        /// - Parameter fileURL: the file; its directory is created (mode `0700`) if missing.
        public init(fileURL: URL) {
            self.fileURL = fileURL
            OwnerOnlyFile.removeLeftovers(of: fileURL)
            let stored = (try? Data(contentsOf: fileURL)).flatMap {
                try? JSONDecoder().decode([String: [String: String]].self, from: $0)
            }
            self.table = stored ?? [:]
        }

        /// Why the last write to ``fileURL`` failed, or `nil` when it succeeded.
        public var lastWriteError: (any Error)? { lock.withLock { writeError } }

        public func headers(forOrigin origin: String) -> [String: String] {
            lock.withLock { table[origin] ?? [:] }
        }

        public func save(_ headers: [String: String], forOrigin origin: String) {
            lock.withLock {
                let merged = (table[origin] ?? [:]).merging(headers, uniquingKeysWith: { $1 })
                guard merged != table[origin] else { return }
                table[origin] = merged
                persist()
            }
        }

        public func removeHeaders(forOrigin origin: String) {
            lock.withLock {
                guard table.removeValue(forKey: origin) != nil else { return }
                persist()
            }
        }

        /// Replaces the origin's headers and rewrites the file once, atomically.
        public func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
            lock.withLock {
                guard table[origin] != headers else { return }
                table[origin] = headers
                persist()
            }
        }

        /// Writes the table; called with the lock held, so writes never interleave.
        private func persist() {
            do {
                let directory = fileURL.deletingLastPathComponent()
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try OwnerOnlyFile.write(try encoder.encode(table), to: fileURL)
                writeError = nil
            } catch {
                writeError = error
            }
        }
    }
}
