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
    /// user may read, written whole and `fsync`ed before its name appears) and removed once the app
    /// has been told how it ended, whatever the outcome; a task whose engine or manager was
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
        /// How many restored tasks of a scope a replay keeps in memory at once; the line's later
        /// records stay on disk, each made into a task as one of these ends.
        let replayWindow: Int

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

        /// A store whose records are written by `write` (tests: a full disk), keeping `replayWindow`
        /// restored tasks of a scope in memory at once (tests: a small window).
        init(
            directory: URL, whenRefused: Refusal = .dropAndGoOn, scopesWhenRefused: [String: Refusal] = [:],
            replayWindow: Int = 32,
            write: @escaping @Sendable (Data, URL) throws(OwnerOnlyFile.WriteError) -> Void
        ) {
            self.directory = directory
            self.replayWindow = max(1, replayWindow)
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
        ///
        /// A replay reads and checks every record at once (so ``setAside`` and ``stoppedBy`` are
        /// complete), but makes tasks of only the first few (32) at once: each later record is read
        /// again and made into its task when one of those ends, so a long line costs memory for its
        /// length, not for its requests' bodies. The tasks end as any task does, through the
        /// manager's forwarding methods and so its delegate (``AnyAPITask/isRestored`` tells them
        /// apart), and through ``outcomes``.
        public struct Replay<Manager: APIManager>: Sendable {
            /// How many tasks the replay sends again, in their line's order, before any new task of
            /// the scope.
            public let count: Int
            /// The records that could not be sent again, in their line's order; the line went on
            /// without them. (Under ``Refusal/stopTheLine`` a record that no longer decodes stops the
            /// line instead, named by ``stoppedBy``.)
            public let setAside: [SetAside]
            /// The record of the refused task that stops the line (``Refusal/stopTheLine``), when one
            /// does: the restored tasks wait until the app resolves it
            /// (``APIManager/resolveRefusedDurableTask(inScope:by:)``).
            public let stoppedBy: URL?
            /// How each restored task ended, as it ends (so in the line's order), with its typed
            /// response; the sequence finishes when the last has ended (at once when there is none).
            /// The delegate is told as well. The sequence keeps what is not yet read: read it, or
            /// drop it.
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

        /// What a replay found when it opened a scope.
        struct Opened {
            /// How many tasks it sends again (those in memory now, and those still on disk).
            var count = 0
            var setAside: [SetAside] = []
            var stoppedBy: URL?
        }

        /// Opens `task`'s scope (replaying what it held, first), writes the task and hands both to
        /// `line`, in order, while no other task of the store can be written: `line` applies the
        /// policy under the engine's lock, and what it decides is performed after this returns.
        /// Returns the error the task fails with when it could not be written (`nil` when it was).
        func write(_ task: AnyAPITask, line: APIEngine.DurableLineEvents) -> APIError? {
            // The request's `Encodable` conformance is user code: it runs before the lock is taken.
            let description = Result { () throws(APIError) in try task.durableDescription() }
            return scopes.withLock { scopes in
                let folder: DurableScopeFolder
                do throws(APIError) {
                    (folder, _) = try open(
                        task.concurrencyScope, in: &scopes, restoringWith: task.durableRestorer, line: line)
                    let (type, json) = try description.get()
                    let sequence = try folder.append(
                        idempotencyKey: task.idempotencyKey, requestType: type, request: json)
                    task.bag.durableSlot?.fill(
                        DurableSlot.Entry(store: self, scope: task.concurrencyScope, sequence: sequence))
                } catch {
                    return error
                }
                line.send(task)
                return nil
            }
        }

        /// Opens `scope` for a replay without a new task: `restorer` makes its records into tasks.
        /// Returns nothing when this store had opened the scope already.
        func replay(
            _ scope: String?, restoringWith restorer: DurableRestorer, line: APIEngine.DurableLineEvents
        ) throws(APIError) -> Opened? {
            try scopes.withLock { scopes -> Result<Opened?, APIError> in
                do throws(APIError) {
                    return .success(try open(scope, in: &scopes, restoringWith: restorer, line: line).opened)
                } catch {
                    return .failure(error)
                }
            }.get()
        }

        /// Resolves the refusal that stopped `scope`'s line: puts the refused record back and returns
        /// the task `restore` makes of it (``Resolution/retry``), or removes it (``Resolution/drop``);
        /// `line` is sent the retried task, then resumed, under the store's lock.
        func resolve(
            _ scope: String?, by resolution: ResolutionStep, restoringWith restorer: DurableRestorer,
            restore: (DurableRecord) -> Result<AnyAPITask, APIError>, line: APIEngine.DurableLineEvents
        ) throws(APIError) -> AnyAPITask? {
            try scopes.withLock { scopes -> Result<AnyAPITask?, APIError> in
                do throws(APIError) {
                    let (folder, _) = try open(scope, in: &scopes, restoringWith: restorer, line: line)
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
                        task.bag.durableSlot?.fill(DurableSlot.Entry(store: self, scope: scope, sequence: refused))
                        line.send(task)
                        retried = task
                    case .retry:
                        let reinstated = folder.reinstateRefused(refused).flatMap(restore)
                        guard case .success(let task) = reinstated else {
                            // It still cannot be made (a request that no longer decodes): it stays refused.
                            folder.keepRefused(refused)
                            return reinstated.map { _ in nil }
                        }
                        task.bag.durableSlot?.fill(DurableSlot.Entry(store: self, scope: scope, sequence: refused))
                        line.send(task)
                        retried = task
                    }
                    if folder.refusedSequences().isEmpty { line.resume() }
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

        /// The folder of `scope`, opened if this store had not yet: its records are checked, the
        /// first ``replayWindow`` made into tasks by `restorer` (its manager decodes them) and sent to
        /// `line`, the others left on disk for ``refill(_:line:)``.
        private func open(
            _ scope: String?, in scopes: inout [ScopeKey: DurableScopeFolder], restoringWith restorer: DurableRestorer,
            line: APIEngine.DurableLineEvents
        ) throws(APIError) -> (folder: DurableScopeFolder, opened: Opened?) {
            if let folder = scopes[ScopeKey(scope: scope)] { return (folder, nil) }
            let folder = try DurableScopeFolder(scope: scope, in: directory, write: write)
            scopes[ScopeKey(scope: scope)] = folder
            var opened = Opened()
            var window: [AnyAPITask] = []
            var backlog: [UInt64] = []
            let stopsTheLine = refusal(for: scope) == .stopTheLine
            records: for sequence in folder.pendingSequences() {
                // A damaged record is set aside; one that no longer decodes too, unless its scope's
                // rule stops the line: it is then kept as refused, for the app to resolve.
                let record: DurableRecord
                switch folder.read(sequence) {
                case .success(let read): record = read
                case .failure(let error):
                    opened.setAside.append(SetAside(scope: scope, file: folder.setAside(sequence), error: error))
                    continue
                }
                // Every record is decoded now, so that what cannot be replayed is known at once; only
                // the window's tasks are kept.
                switch restorer.restore(record) {
                case .success(let task):
                    opened.count += 1
                    if backlog.isEmpty, window.count < replayWindow {
                        task.bag.durableSlot?.fill(
                            DurableSlot.Entry(store: self, scope: scope, sequence: sequence, inWindow: true))
                        window.append(task)
                    } else {
                        backlog.append(sequence)
                    }
                case .failure(.cancelled(reason: .managerReleased)):
                    // No manager to send them: the records stay, for the next launch.
                    break records
                case .failure where stopsTheLine:
                    folder.keepRefused(sequence)
                case .failure(let error):
                    opened.setAside.append(SetAside(scope: scope, file: folder.setAside(sequence), error: error))
                }
            }
            opened.stoppedBy = folder.refusedSequences().first.map(folder.refusedURL(of:))
            if opened.stoppedBy != nil { line.stop() }
            if !backlog.isEmpty {
                folder.backlog = DurableScopeFolder.Backlog(
                    sequences: backlog, restorer: restorer, inWindow: window.count)
                line.holdBehindBacklog()
            }
            for task in window { line.send(task) }
            return (folder, opened)
        }

        /// How many records of `scope`'s line are still on disk behind its restored tasks.
        func backlog(of scope: String?) -> Int {
            scopes.withLock { $0[ScopeKey(scope: scope)]?.backlog?.remaining ?? 0 }
        }

        /// A task of `scope`'s replay window ended: the next records still on disk are made into
        /// tasks and sent to `line`, until the window is full again; the line is told when the last
        /// is.
        func refill(_ scope: String?, line: APIEngine.DurableLineEvents) {
            scopes.withLock { scopes in
                guard let folder = scopes[ScopeKey(scope: scope)], var backlog = folder.backlog else { return }
                defer { folder.backlog = backlog.isDrained ? nil : backlog }
                backlog.inWindow -= 1
                let stopsTheLine = refusal(for: scope) == .stopTheLine
                while backlog.inWindow < replayWindow, let sequence = backlog.next() {
                    // Checked when the line was opened: a record that fails now was changed since.
                    let record: DurableRecord
                    switch folder.read(sequence) {
                    case .success(let read): record = read
                    case .failure:
                        _ = folder.setAside(sequence)
                        backlog.restorer.lost(1)
                        continue
                    }
                    switch backlog.restorer.restore(record) {
                    case .success(let task):
                        task.bag.durableSlot?.fill(
                            DurableSlot.Entry(store: self, scope: scope, sequence: sequence, inWindow: true))
                        backlog.inWindow += 1
                        line.send(task)
                    case .failure(.cancelled(reason: .managerReleased)):
                        // No manager to send them: the records stay, for the next launch, and the
                        // line lets this run's other tasks go (another manager's, on this engine).
                        backlog.restorer.lost(backlog.remaining + 1)
                        backlog.abandon()
                    case .failure where stopsTheLine:
                        folder.keepRefused(sequence)
                        backlog.restorer.lost(1)
                        line.stop()
                    case .failure:
                        _ = folder.setAside(sequence)
                        backlog.restorer.lost(1)
                    }
                }
                if backlog.isDrained { line.backlogDrained() }
            }
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
