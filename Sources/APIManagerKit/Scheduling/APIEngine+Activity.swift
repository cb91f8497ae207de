import Dispatch
import Observation

// Observable state for a screen (SwiftUI reads Observation): what an engine's, a scope's or a
// manager's tasks are doing, whether the network is there, a durable line's backlog, and one task's
// state and progress. The models live on the main actor and change there. The engine feeds only the
// models something holds (it keeps them weakly); without one, what it costs is one read of an empty
// list with each event of the scheduling machine, under the lock the event takes anyway.
//
// How they change: after each event of the machine (`APIEngine.transition`, and the durable line's
// events once its store's lock is released), the engine computes each live model's figures from the
// machine, under its lock, and sets those that differ: at once when it runs on the main queue (the
// default delivery; `.inline` in a main-actor test), otherwise in one hop to the main queue that
// reads the latest figures (hops do not pile up).

extension APIEngine {
    /// What the tasks of an engine, a scope or a manager are doing, as an observable model (the
    /// Observation framework, which SwiftUI reads): counts by state, the network as the engine knows
    /// it, and a durable line's backlog. Read it on the main actor; it changes there.
    ///
    /// ```swift
    /// struct CartBadge: View {
    ///     let activity: APIEngine.Activity
    ///     var body: some View {
    ///         if activity.durablePending > 0 {
    ///             Text("\(activity.durablePending) edits will be sent when you are back online")
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// Get one from ``APIEngine/activity``, ``APIEngine/activity(inScope:)``,
    /// ``APIManager/activity`` or ``APIClient/activity``; the same object while something holds it.
    /// Its figures are those after the engine's last change (see <doc:OfflineAndRelaunch>).
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor
    public final class Activity: Observable {
        // Observable by hand, as the `@Observable` macro would make it: the macro's code names the
        // module `Observation`, which `APIEngine.Observation` hides inside the engine's scope.

        /// The network as the engine knows it (see ``APIEngine/Connectivity``).
        public enum Network: Sendable, Hashable {
            /// Reachable, or nothing said otherwise.
            case online
            /// The engine's connectivity says the network is unreachable.
            case offline
            /// An attempt found the network unreachable; the engine probes until one answers.
            case probing
        }

        /// Tasks sent and not ended: running, waiting, waiting to retry or for the network.
        public var inFlight: Int { read(\.inFlight) { $0.inFlight } }
        /// Tasks with an attempt under way.
        public var running: Int { read(\.running) { $0.running } }
        /// Tasks waiting in line, for a quiet time or a throttle's turn, or for the network.
        public var waiting: Int { read(\.waiting) { $0.waiting } }
        /// Of the waiting tasks, those that wait for the network (``APIRequest/connectivityWait``).
        public var waitingForNetwork: Int { read(\.waitingForNetwork) { $0.waitingForNetwork } }
        /// Tasks waiting to retry after a failed attempt.
        public var waitingForRetry: Int { read(\.waitingForRetry) { $0.waitingForRetry } }
        /// Whether the network is there.
        public var network: Network { read(\.network) { $0.network } }
        /// Durable tasks not yet ended (``APIConcurrencyPolicy/durable``): those in flight and, for a
        /// scope, the records of its line still on disk behind them. 0 outside a durable scope.
        public var durablePending: Int { read(\.durablePending) { $0.durablePending } }
        /// Whether the scope's durable line is stopped by a final refusal
        /// (``APIEngine/DurableStore/Refusal/stopTheLine``), until the app resolves it. `false`
        /// for an engine's or a manager's model.
        public var isStoppedByRefusal: Bool { read(\.isStoppedByRefusal) { $0.isStopped } }
        /// Whether any task is in flight.
        public var isBusy: Bool { inFlight > 0 }

        let filter: ActivityFilter
        private var figures = ActivityFigures()
        private let registrar = ObservationRegistrar()

        init(filter: ActivityFilter) {
            self.filter = filter
        }

        private func read<Value>(_ keyPath: KeyPath<Activity, Value>, _ value: (ActivityFigures) -> Value) -> Value {
            registrar.access(self, keyPath: keyPath)
            return value(figures)
        }

        /// Tells the observers of each figure that changes, and only those.
        func apply(_ new: ActivityFigures) {
            let old = figures
            guard old != new else { return }
            let counts: [(KeyPath<Activity, Int>, KeyPath<ActivityFigures, Int>)] = [
                (\.inFlight, \.inFlight), (\.running, \.running), (\.waiting, \.waiting),
                (\.waitingForNetwork, \.waitingForNetwork), (\.waitingForRetry, \.waitingForRetry),
                (\.durablePending, \.durablePending),
            ]
            let changed = counts.filter { old[keyPath: $0.1] != new[keyPath: $0.1] }.map(\.0)
            let network = old.networkState != new.networkState
            let stopped = old.isStopped != new.isStopped
            for keyPath in changed { registrar.willSet(self, keyPath: keyPath) }
            if network { registrar.willSet(self, keyPath: \.network) }
            if stopped { registrar.willSet(self, keyPath: \.isStoppedByRefusal) }
            figures = new
            for keyPath in changed { registrar.didSet(self, keyPath: keyPath) }
            if network { registrar.didSet(self, keyPath: \.network) }
            if stopped { registrar.didSet(self, keyPath: \.isStoppedByRefusal) }
        }
    }

    /// The activity of every task of this engine, all managers together. The same model while
    /// something holds it.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor public var activity: Activity { activity(for: .all) }

    /// The activity of the tasks of `scope` (`nil`: the tasks sent without one), with its durable
    /// line's backlog and whether the line is stopped.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor public func activity(inScope scope: String?) -> Activity { activity(for: .scope(scope)) }

    /// The model of `filter`: the live one, or a new one the engine feeds from now on.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor func activity(for filter: ActivityFilter) -> Activity {
        model(for: .activity(filter)) {
            let model = Activity(filter: filter)
            return (model, ModelFeed.activity(model))
        }
    }

    /// The live model of `key`, or the one `make` makes, fed from now on with its first figures set.
    @MainActor func model<Model: AnyObject>(for key: ModelFeed.Key, make: () -> (Model, ModelFeed)) -> Model {
        let (existing, gone) = state.withLock { state in
            (state.modelFeeds.first { $0.key == key }?.model, state.takeGoneFeeds())
        }
        withExtendedLifetime(gone) {}
        // The feed of `key` holds a model `make` made: of this type.
        if let existing = existing as? Model { return existing }
        let (model, feed) = make()
        // Registered in the take that reads its first figures: a change after it refreshes it.
        let setter = state.withLock { state in
            state.modelFeeds.append(feed)
            return feed.read(state.machine)
        }
        setter(durableStore)(model)
        return model
    }

    // MARK: Feeding

    /// Something a model shows may have changed: the live models get their figures now when this runs
    /// on the main queue, otherwise after one hop there.
    func activityMayHaveChanged() {
        enum Step { case none, now, hop }
        let step = state.withLock { state -> Step in
            guard !state.modelFeeds.isEmpty else { return .none }
            if MainQueueMark.isCurrent { return .now }
            // One hop at a time: the queued one reads the latest figures when it runs.
            if state.activityRefreshIsQueued { return .none }
            state.activityRefreshIsQueued = true
            return .hop
        }
        switch step {
        case .none: return
        case .now: refreshModels()
        case .hop:
            DispatchQueue.main.async { [weak self] in
                self?.state.withLock { $0.activityRefreshIsQueued = false }
                self?.refreshModels()
            }
        }
    }

    /// Sets every live model's figures, read from the machine in one take of its lock (then the
    /// durable store's backlogs, outside it); on the main queue.
    private func refreshModels() {
        let (read, gone) = state.withLock { state in
            let gone = state.takeGoneFeeds()
            return (state.modelFeeds.map { ($0, $0.read(state.machine)) }, gone)
        }
        withExtendedLifetime(gone) {}
        guard !read.isEmpty else { return }
        let store = durableStore
        let apply = read.map { feed, setter in (feed, setter(store)) }
        MainActor.assumeIsolated {
            for (feed, set) in apply { feed.model.map(set) }
        }
    }
}

extension APIEngine.State {
    /// Takes out the feeds whose model is gone, for the caller to let go after the lock: a status
    /// feed holds its task, whose end may call the app's completion.
    mutating func takeGoneFeeds() -> [ModelFeed] {
        guard modelFeeds.contains(where: \.isGone) else { return [] }
        let gone = modelFeeds.filter(\.isGone)
        modelFeeds.removeAll { $0.isGone }
        return gone
    }
}

/// Whose tasks a model counts.
enum ActivityFilter: Equatable, Sendable {
    case all
    case scope(String?)
    /// The tasks of one manager.
    case sender(ObjectIdentifier)
    /// The tasks of one ``APIClient``, whatever their request type (its managers share its
    /// `DurableScopeTypes`, which names it).
    case client(ObjectIdentifier)

    func counts(_ task: AnyAPITask) -> Bool {
        switch self {
        case .all: return true
        case .scope(let scope): return task.concurrencyScope == scope
        case .sender(let sender): return task.sender.map { ObjectIdentifier($0) == sender } ?? false
        case .client(let client): return task.wasSent(byClient: client)
        }
    }
}

/// What an activity model shows, read from the machine.
struct ActivityFigures: Equatable, Sendable {
    var inFlight = 0
    var running = 0
    var waiting = 0
    var waitingForNetwork = 0
    var waitingForRetry = 0
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    var network: APIEngine.Activity.Network {
        switch networkState {
        case .online: return .online
        case .offline: return .offline
        case .probing: return .probing
        }
    }
    var networkState: NetworkState = .online
    var durablePending = 0
    var isStopped = false

    /// ``APIEngine/Activity/Network`` without its availability.
    enum NetworkState: Sendable { case online, offline, probing }

    init() {}
}

/// A live model (held weakly: the engine feeds it while the app holds it) and how its figures are
/// read: from the machine under the engine's lock, then from the durable store outside it, then set
/// on the main actor.
final class ModelFeed: @unchecked Sendable {
    // @unchecked: `model` is a weak reference set once (the runtime reads and clears it atomically);
    // the object is used only on the main actor. The rest is `let`s of Sendable values.
    /// Which model: the same key gives the same model while it lives.
    enum Key: Equatable, Sendable {
        case activity(ActivityFilter)
        case status(ObjectIdentifier)
    }

    /// Given the durable store, what sets the figures read on the feed's model (on the main actor).
    typealias Setter = @Sendable (APIEngine.DurableStore?) -> @MainActor @Sendable (AnyObject) -> Void

    let key: Key
    private(set) weak var model: AnyObject?
    let read: @Sendable (SchedulingMachine) -> Setter

    init(key: Key, model: AnyObject, read: @escaping @Sendable (SchedulingMachine) -> Setter) {
        self.key = key
        self.model = model
        self.read = read
    }

    var isGone: Bool { model == nil }

    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    static func activity(_ model: APIEngine.Activity) -> ModelFeed {
        let filter = model.filter
        return ModelFeed(key: .activity(filter), model: model) { machine in
            let read = ActivityFigures(of: filter, in: machine)
            return { store in
                var figures = read
                if case .scope(let scope) = filter, let store { figures.durablePending += store.backlog(of: scope) }
                // The feed's model is the one made with it, of this type.
                return { [figures] model in (model as? APIEngine.Activity)?.apply(figures) }
            }
        }
    }
}

extension APIManager {
    /// The activity of this manager's tasks (not those of other managers sharing its engine). The
    /// same model while something holds it.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor public var activity: APIEngine.Activity { engine.activity(for: .sender(ObjectIdentifier(self))) }
}

extension APIClient {
    /// The activity of this client's tasks, of every request type (not those of other managers
    /// sharing its engine). The same model while something holds it.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor public var activity: APIEngine.Activity {
        engine.activity(for: .client(identity))
    }
}
