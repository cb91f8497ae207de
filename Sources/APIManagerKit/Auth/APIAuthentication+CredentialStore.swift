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
    public final class InMemoryCredentialStore: APIAuthentication.CredentialStore, Sendable {
        private let table = LockedState<[String: [String: String]]>([:])

        /// An empty store.
        public init() {}

        public func headers(forOrigin origin: String) -> [String: String] {
            table.withLock { $0[origin] ?? [:] }
        }

        public func save(_ headers: [String: String], forOrigin origin: String) {
            table.withLock { $0[origin, default: [:]].merge(headers, uniquingKeysWith: { $1 }) }
        }

        public func removeHeaders(forOrigin origin: String) {
            table.withLock { $0[origin] = nil }
        }

        public func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
            table.withLock { $0[origin] = headers }
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
    public final class FileCredentialStore: APIAuthentication.CredentialStore, Sendable {
        /// The file the headers are kept in.
        public let fileURL: URL

        private struct State {
            var table: [String: [String: String]]
            var writeError: (any Error)?
        }

        private let state: LockedState<State>

        /// - Parameter fileURL: the file; its directory is created (mode `0700`) if missing.
        public init(fileURL: URL) {
            self.fileURL = fileURL
            OwnerOnlyFile.removeLeftovers(of: fileURL)
            let stored = (try? Data(contentsOf: fileURL)).flatMap {
                try? JSONDecoder().decode([String: [String: String]].self, from: $0)
            }
            self.state = LockedState(State(table: stored ?? [:]))
        }

        /// Why the last write to ``fileURL`` failed, or `nil` when it succeeded.
        public var lastWriteError: (any Error)? { state.withLock { $0.writeError } }

        public func headers(forOrigin origin: String) -> [String: String] {
            state.withLock { $0.table[origin] ?? [:] }
        }

        public func save(_ headers: [String: String], forOrigin origin: String) {
            state.withLock { state in
                let merged = (state.table[origin] ?? [:]).merging(headers, uniquingKeysWith: { $1 })
                guard merged != state.table[origin] else { return }
                state.table[origin] = merged
                persist(&state)
            }
        }

        public func removeHeaders(forOrigin origin: String) {
            state.withLock { state in
                guard state.table.removeValue(forKey: origin) != nil else { return }
                persist(&state)
            }
        }

        /// Replaces the origin's headers and rewrites the file once, atomically.
        public func replaceHeaders(_ headers: [String: String], forOrigin origin: String) {
            state.withLock { state in
                guard state.table[origin] != headers else { return }
                state.table[origin] = headers
                persist(&state)
            }
        }

        /// Writes the table; called inside the state's lock, so writes never interleave.
        private func persist(_ state: inout State) {
            do {
                let directory = fileURL.deletingLastPathComponent()
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try OwnerOnlyFile.write(try encoder.encode(state.table), to: fileURL)
                state.writeError = nil
            } catch {
                state.writeError = error
            }
        }
    }
}
