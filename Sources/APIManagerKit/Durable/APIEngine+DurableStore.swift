import Foundation

extension APIEngine {
    /// Where an engine keeps the tasks of its ``APIConcurrencyPolicy/durable`` lines until they end,
    /// so that a task the process did not see end (the app was killed, the device restarted) is
    /// sent again, in its line's order and with the same idempotency key, the next time the app
    /// opens the line.
    ///
    /// ```swift
    /// let store = APIEngine.DurableStore(directory: applicationSupport.appendingPathComponent("cart-line"))
    /// var configuration = APIEngine.Configuration()
    /// configuration.durableStore = store
    /// let engine = APIEngine(configuration: configuration)
    /// ```
    ///
    /// A replay decodes each record with the request's `Decodable` conformance while the store holds
    /// its lock (so that no task of the scope is written meanwhile): the conformance must not send a
    /// request through this store. The `Encodable` side runs before the lock is taken.
    ///
    /// Each scope (``APIRequest/concurrencyScope``) has a folder of its own in `directory`, opened
    /// the first time this process sends a durable task into the scope or replays it
    /// (``APIManager/replayDurableTasks(inScope:)``), and held until the store is released: a
    /// second store (in this process or another) that opens the same scope is refused with
    /// ``APIError/durableStore(reason:underlying:)``. Opening a scope replays what it holds before
    /// the task that opened it, so a line's old tasks always go before its new ones.
    ///
    /// A task is written before it is sent (its record: its place in the line, its idempotency key
    /// and its request as its `Encodable` conformance writes it, checksummed, in a file only the
    /// user may read, written whole and `fsync`ed before its name appears) and removed just before
    /// the app is told how it ended, whatever the outcome; a task whose engine or manager was
    /// released before it ended stays, to be replayed. A task that cannot be written (a full disk, a
    /// request that is not `Encodable`) ends at once with ``APIError/durableStore(reason:underlying:)``
    /// and is never sent. Nothing else pays for the store: other policies never touch it.
    ///
    /// A task the server refuses for good (``isFinalRefusal(_:)``) ends, and the store's rule for its
    /// scope (``whenRefused``, ``scopesWhenRefused``) drops its record and lets the line go on, or
    /// keeps it and stops the line until the app resolves it
    /// (``APIManager/resolveRefusedDurableTask(inScope:by:)``).
    public final class DurableStore: Sendable {
        /// The folder the scopes' folders go in; made (owner-only) when a scope is first opened.
        public let directory: URL
        /// Writes a record's bytes: whole, owner-only and `fsync`ed (a seam for tests of a full disk).
        private let write: @Sendable (Data, URL) throws(OwnerOnlyFile.WriteError) -> Void
        /// The scopes this store has opened, by scope.
        private let scopes = LockedState([ScopeKey: DurableScopeFolder]())

        private struct ScopeKey: Hashable {
            let scope: String?
        }

        /// What a line does when the server refuses its task for good (``isFinalRefusal(_:)``), unless
        /// ``scopesWhenRefused`` names its scope.
        public let whenRefused: Refusal
        /// The rule of each named scope whose rule is not ``whenRefused``.
        public let scopesWhenRefused: [String: Refusal]

        /// A store keeping its scopes' folders in `directory`.
        ///
        /// - Parameters:
        ///   - directory: the folder the scopes' folders go in.
        ///   - whenRefused: ``Refusal/dropAndGoOn`` unless given.
        ///   - scopesWhenRefused: none unless given: every scope follows `whenRefused`.
        public convenience init(
            directory: URL, whenRefused: Refusal = .dropAndGoOn, scopesWhenRefused: [String: Refusal] = [:]
        ) {
            self.init(directory: directory, whenRefused: whenRefused, scopesWhenRefused: scopesWhenRefused) {
                data, url throws(OwnerOnlyFile.WriteError) in
                try OwnerOnlyFile.write(data, to: url, synchronized: true)
            }
        }

        /// A store whose records are written by `write` (tests: a full disk).
        init(
            directory: URL, whenRefused: Refusal = .dropAndGoOn, scopesWhenRefused: [String: Refusal] = [:],
            write: @escaping @Sendable (Data, URL) throws(OwnerOnlyFile.WriteError) -> Void
        ) {
            self.directory = directory
            self.whenRefused = whenRefused
            self.scopesWhenRefused = scopesWhenRefused
            self.write = write
        }

        /// What a line does when the server refuses its task for good.
        public enum Refusal: Sendable, Hashable {
            /// The refused task ends (the app is told, as for any failure), its record goes, and the
            /// line goes on. The default.
            case dropAndGoOn
            /// The refused task ends (the app is told), but its record is kept (`NNN.refused` in the
            /// scope's folder) and the line stops: the tasks behind it, and those sent into the scope
            /// later, wait, across relaunches too, until the app resolves it
            /// (``APIManager/resolveRefusedDurableTask(inScope:by:)``).
            case stopTheLine
        }

        /// What resolving a refusal does (the public ``Resolution``, or a replacement task).
        enum ResolutionStep {
            case retry, drop
            /// The replacement's task (made to go to the front of the line) and its record's contents.
            case replace(AnyAPITask, description: Result<(type: String, json: Data), APIError>)
        }

        /// How the app resolves a refusal that stopped a line.
        public enum Resolution: Sendable, Hashable {
            /// Send the refused request again, first (with its idempotency key), then the rest.
            case retry
            /// Drop the refused request (its record is removed); the line goes on.
            case drop
        }

        /// The rule of `scope`'s line.
        public func refusal(for scope: String?) -> Refusal {
            scope.flatMap { scopesWhenRefused[$0] } ?? whenRefused
        }

        /// Whether the server refused a task for good: a `4xx` status other than `408` (request
        /// timeout), `409` (conflict), `425` (too early) and `429` (too many requests), which may
        /// succeed later.
        public static func isFinalRefusal(_ error: APIError) -> Bool {
            guard case .unacceptableStatus(let response, _) = error else { return false }
            return (400..<500).contains(response.statusCode) && ![408, 409, 425, 429].contains(response.statusCode)
        }

        /// A record a replay could not send again, moved aside (never deleted) into its scope's
        /// `set-aside` folder.
        public struct SetAside: Sendable, CustomStringConvertible {
            /// The scope whose line it was in.
            public let scope: String?
            /// Where the record now is.
            public let file: URL
            /// Why it could not be replayed: ``APIError/durableStore(reason:underlying:)`` for a damaged
            /// record or a request that no longer decodes (the app's request type changed).
            public let error: APIError

            public var description: String { "\(file.lastPathComponent): \(error)" }
        }

        /// What ``APIManager/replayDurableTasks(inScope:)`` sent again.
        public struct Replay<Manager: APIManager>: Sendable {
            /// The tasks sent again, in their line's order (each ``AnyAPITask/isRestored``). They end as
            /// any task does, through the manager's forwarding methods and so its delegate.
            public let tasks: [APITask<Manager.Request>]
            /// The records that could not be sent again, in their line's order; the line went on
            /// without them. (Under ``Refusal/stopTheLine`` a record that no longer decodes stops the
            /// line instead, named by ``stoppedBy``.)
            public let setAside: [SetAside]
            /// The record of the refused task that stops the line (``Refusal/stopTheLine``), when one
            /// does: the restored tasks wait until the app resolves it
            /// (``APIManager/resolveRefusedDurableTask(inScope:by:)``).
            public let stoppedBy: URL?
            /// How each task of ``tasks`` ended, as it ends (so in the line's order), with its typed
            /// response; the sequence finishes when the last has ended (at once when there is none).
            /// The delegate is told as well.
            public let outcomes: AsyncStream<Outcome>

            /// How one restored task ended.
            public struct Outcome: Sendable {
                /// The task.
                public let task: APITask<Manager.Request>
                /// Its response, or why it failed.
                public let result: Result<Manager.Response, APIError>
            }
        }

        // MARK: Sending and ending (the engine's side)

        /// Opens `task`'s scope (replaying what it held, first), writes the task and hands both to
        /// `send`, in order, while no other task of the store can be written: `send` applies the
        /// policy under the engine's lock and returns what to perform, performed after this returns.
        /// Returns the replayed tasks and set-aside records, and the error the task fails with when
        /// it could not be written (`nil` when it was).
        func write(
            _ task: AnyAPITask, stop: () -> Void, send: (AnyAPITask) -> Void
        ) -> (restored: [AnyAPITask], setAside: [SetAside], refusal: APIError?) {
            // The request's `Encodable` conformance is user code: it runs before the lock is taken.
            let description = Result { () throws(APIError) in try task.durableDescription() }
            return scopes.withLock { scopes in
                let folder: DurableScopeFolder
                var restored: [AnyAPITask] = []
                var setAside: [SetAside] = []
                let stopped: URL?
                do throws(APIError) {
                    (folder, restored, setAside, stopped) = try open(
                        task.concurrencyScope, in: &scopes, restoringWith: task)
                } catch {
                    return ([], [], error)
                }
                if stopped != nil { stop() }
                for replayed in restored { send(replayed) }
                do throws(APIError) {
                    let (type, json) = try description.get()
                    let sequence = try folder.append(
                        idempotencyKey: task.idempotencyKey, requestType: type, request: json)
                    task.durableSlot?.fill(
                        DurableSlot.Entry(store: self, scope: task.concurrencyScope, sequence: sequence))
                } catch {
                    return (restored, setAside, error)
                }
                send(task)
                return (restored, setAside, nil)
            }
        }

        /// Opens `scope` for a replay without a new task: `template` knows the manager's types.
        func replay(
            _ scope: String?, restoringWith template: AnyAPITask, stop: () -> Void, send: (AnyAPITask) -> Void
        ) throws(APIError) -> (restored: [AnyAPITask], setAside: [SetAside], stoppedBy: URL?) {
            try scopes.withLock { scopes -> Result<([AnyAPITask], [SetAside], URL?), APIError> in
                do throws(APIError) {
                    let (_, restored, setAside, stopped) = try open(scope, in: &scopes, restoringWith: template)
                    if stopped != nil { stop() }
                    for replayed in restored { send(replayed) }
                    return .success((restored, setAside, stopped))
                } catch {
                    return .failure(error)
                }
            }.get()
        }

        /// Resolves the refusal that stopped `scope`'s line: puts the refused record back and returns
        /// the task `restore` makes of it (``Resolution/retry``), or removes it (``Resolution/drop``);
        /// `send` runs, under the store's lock, with the retried task, then `resume`.
        func resolve(
            _ scope: String?, by resolution: ResolutionStep, restoringWith template: AnyAPITask,
            restore: (DurableRecord) -> Result<AnyAPITask, APIError>, stop: () -> Void, send: (AnyAPITask) -> Void,
            resume: () -> Void
        ) throws(APIError) -> AnyAPITask? {
            try scopes.withLock { scopes -> Result<AnyAPITask?, APIError> in
                do throws(APIError) {
                    let (folder, restored, _, stopped) = try open(scope, in: &scopes, restoringWith: template)
                    if stopped != nil { stop() }
                    for replayed in restored { send(replayed) }
                    guard let refused = folder.refusedSequences().first else {
                        return .failure(
                            .durableStore(
                                reason: "the line of \(DurableScopeFolder.describe(scope)) is not stopped by a refusal")
                        )
                    }
                    var retried: AnyAPITask?
                    switch resolution {
                    case .drop:
                        folder.dropRefused(refused)
                    case .replace(let task, let description):
                        // The replacement takes the refused task's place in the line, as a new operation
                        // (its own idempotency key).
                        let (type, json) = try description.get()
                        try folder.write(
                            DurableRecord(
                                sequence: refused, idempotencyKey: task.idempotencyKey, requestType: type, request: json
                            ))
                        folder.dropRefused(refused)
                        task.durableSlot?.fill(DurableSlot.Entry(store: self, scope: scope, sequence: refused))
                        send(task)
                        retried = task
                    case .retry:
                        let reinstated = folder.reinstateRefused(refused).flatMap(restore)
                        guard case .success(let task) = reinstated else {
                            // It still cannot be made (a request that no longer decodes): it stays refused.
                            folder.keepRefused(refused)
                            return reinstated.map { _ in nil }
                        }
                        task.durableSlot?.fill(DurableSlot.Entry(store: self, scope: scope, sequence: refused))
                        send(task)
                        retried = task
                    }
                    if folder.refusedSequences().isEmpty { resume() }
                    return .success(retried)
                } catch {
                    return .failure(error)
                }
            }.get()
        }

        /// The task of record `sequence` was refused for good and stops its line: its record is kept.
        func keepRefused(_ sequence: UInt64, scope: String?) {
            scopes.withLock { scopes in scopes[ScopeKey(scope: scope)]?.keepRefused(sequence) }
        }

        /// The folder of `scope`, opened if this store had not yet: then the tasks its records
        /// describe, made by `template` (its manager decodes them), and the records set aside.
        private func open(
            _ scope: String?, in scopes: inout [ScopeKey: DurableScopeFolder], restoringWith template: AnyAPITask
        ) throws(APIError) -> (DurableScopeFolder, [AnyAPITask], [SetAside], stoppedBy: URL?) {
            if let folder = scopes[ScopeKey(scope: scope)] { return (folder, [], [], nil) }
            let folder = try DurableScopeFolder(scope: scope, in: directory, write: write)
            scopes[ScopeKey(scope: scope)] = folder
            var restored: [AnyAPITask] = []
            var setAside: [SetAside] = []
            let stopsTheLine = refusal(for: scope) == .stopTheLine
            for sequence in folder.pendingSequences() {
                // A damaged record is set aside; one that no longer decodes too, unless its scope's
                // rule stops the line: it is then kept as refused, for the app to resolve.
                let record: DurableRecord
                switch folder.read(sequence) {
                case .success(let read): record = read
                case .failure(let error):
                    setAside.append(SetAside(scope: scope, file: folder.setAside(sequence), error: error))
                    continue
                }
                switch template.restoredTask(from: record) {
                case .success(let task):
                    task.durableSlot?.fill(DurableSlot.Entry(store: self, scope: scope, sequence: sequence))
                    restored.append(task)
                case .failure where stopsTheLine:
                    folder.keepRefused(sequence)
                case .failure(let error):
                    setAside.append(SetAside(scope: scope, file: folder.setAside(sequence), error: error))
                }
            }
            return (folder, restored, setAside, folder.refusedSequences().first.map(folder.refusedURL(of:)))
        }

        /// The task of record `sequence` ended: its record goes.
        func remove(_ sequence: UInt64, scope: String?) {
            scopes.withLock { scopes in scopes[ScopeKey(scope: scope)]?.remove(sequence) }
        }

        /// The records of `scope` set aside by replays, this run's and earlier ones', oldest first.
        public func setAsideFiles(inScope scope: String?) -> [URL] {
            let folder = directory.appendingPathComponent(DurableScopeFolder.folderName(of: scope))
                .appendingPathComponent("set-aside")
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            return names.filter { DurableScopeFolder.sequence(ofFileNamed: $0) != nil }.sorted()
                .map { folder.appendingPathComponent($0) }
        }
    }
}

/// A durable task's record, from the moment it is written until the task ends: taken once, by the
/// first of the async caller's and the delegate's terminal events, which removes the record (or,
/// for a task whose manager or engine went away, keeps it for the next launch).
final class DurableSlot: Sendable {
    struct Entry {
        let store: APIEngine.DurableStore
        let scope: String?
        let sequence: UInt64
    }

    private let entry = LockedState<Entry?>(nil)
    /// Whether the task was restored from its record (see ``AnyAPITask/isRestored``).
    let isRestored: Bool
    /// Whether a final refusal of the task stops its line (its store's rule for its scope).
    let stopsTheLineWhenRefused: Bool
    /// Whether the task sends a refused task again (``APIEngine/DurableStore/Resolution/retry``): it
    /// goes to the front of its stopped line.
    let retriesRefusal: Bool

    init(isRestored: Bool, stopsTheLineWhenRefused: Bool = false, retriesRefusal: Bool = false) {
        self.isRestored = isRestored
        self.stopsTheLineWhenRefused = stopsTheLineWhenRefused
        self.retriesRefusal = retriesRefusal
    }

    func fill(_ entry: Entry) {
        self.entry.withLock { $0 = entry }
    }

    /// The task ended with `outcome` (`nil`: a response): its record goes, unless the task ended
    /// because its manager or engine was released. Only the first call does anything.
    func taskEnded(with error: APIError?) {
        guard
            let entry = entry.withLock({ entry -> Entry? in
                defer { entry = nil }
                return entry
            })
        else { return }
        if case .cancelled(reason: .managerReleased)? = error { return }
        if stopsTheLineWhenRefused, let error, APIEngine.DurableStore.isFinalRefusal(error) {
            entry.store.keepRefused(entry.sequence, scope: entry.scope)
            return
        }
        entry.store.remove(entry.sequence, scope: entry.scope)
    }
}
