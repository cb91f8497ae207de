import Observation

extension AnyAPITask {
    /// One task's state, attempt count and progress, as an observable model (the Observation
    /// framework, which SwiftUI reads): a screen shows an upload's bar or a retry without a
    /// delegate. Read it on the main actor; it changes there, after the engine delivers the task's
    /// events (see ``APIEngine/Activity`` for when).
    ///
    /// Get it from ``AnyAPITask/status``: the same model while something holds it.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public final class Status: Observable {
        // Observable by hand, as `APIEngine.Activity` is (`AnyAPITask.Observation` hides the
        // module's name from the macro's code).

        /// The task's state (see ``AnyAPITask/state``).
        public var state: AnyAPITask.State { read(\.state) { $0.state } }
        /// How many attempts have started (see ``AnyAPITask/attemptCount``).
        public var attemptCount: Int { read(\.attemptCount) { $0.attemptCount } }
        /// The last progress report, upload or download (``APIRequest/reportsProgress``); `nil`
        /// before the first, and for a task whose request does not report progress.
        public var progress: APITransferProgress? { read(\.progress) { $0.progress } }

        private var figures: StatusFigures
        private let registrar = ObservationRegistrar()

        init(_ figures: StatusFigures) {
            self.figures = figures
        }

        private func read<Value>(_ keyPath: KeyPath<Status, Value>, _ value: (StatusFigures) -> Value) -> Value {
            registrar.access(self, keyPath: keyPath)
            return value(figures)
        }

        /// Tells the observers of each figure that changes, and only those.
        func apply(_ new: StatusFigures) {
            let old = figures
            let state = old.state != new.state
            let attempts = old.attemptCount != new.attemptCount
            let progress = old.progress != new.progress
            guard state || attempts || progress else { return }
            if state { registrar.willSet(self, keyPath: \.state) }
            if attempts { registrar.willSet(self, keyPath: \.attemptCount) }
            if progress { registrar.willSet(self, keyPath: \.progress) }
            figures = new
            if state { registrar.didSet(self, keyPath: \.state) }
            if attempts { registrar.didSet(self, keyPath: \.attemptCount) }
            if progress { registrar.didSet(self, keyPath: \.progress) }
        }
    }

    /// This task's observable state and progress. The same model while something holds it; a
    /// task whose engine is gone gets one that no longer changes.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor public var status: Status {
        guard let engine = engine else {
            let figures = bag.recordKeeper.withLock { StatusFigures(of: self, in: $0.machine) }
            return Status(figures.with(progress: bag.progressStreams?.latest))
        }
        return engine.model(for: .status(ObjectIdentifier(self))) {
            let model = Status(StatusFigures())
            let feed = ModelFeed(key: .status(ObjectIdentifier(self)), model: model) { [self] machine in
                let figures = StatusFigures(of: self, in: machine)
                return { [self] _ in
                    let figures = figures.with(progress: bag.progressStreams?.latest)
                    // The feed's model is the one made with it, of this type.
                    return { model in (model as? Status)?.apply(figures) }
                }
            }
            return (model, feed)
        }
    }
}

/// What a task's model shows: read from its record under its engine's lock, and its progress.
struct StatusFigures: Equatable, Sendable {
    var state = AnyAPITask.State.waiting
    var attemptCount = 0
    var progress: APITransferProgress?

    init() {}

    /// Under the lock that keeps the task's record.
    init(of task: AnyAPITask, in machine: borrowing SchedulingMachine) {
        state = machine.state(of: task)
        attemptCount = machine.attemptCount(of: task)
    }

    func with(progress: APITransferProgress?) -> StatusFigures {
        var figures = self
        figures.progress = progress
        return figures
    }
}
