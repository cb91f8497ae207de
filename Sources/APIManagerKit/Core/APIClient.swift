import Foundation

/// Sends requests of any ``Endpoint`` type through one engine: one service object for many
/// endpoints, each call typed by its request's `Response`.
///
/// ```swift
/// let client = APIClient(baseURL: URL(string: "https://shop.example/api")!)
/// let product = try await client.response(for: GetProduct(id: 2))
/// client.send(AddToCart(productID: 2, quantity: 1)) { result in print(result) }
/// ```
///
/// Every request runs under its own policy, retry, cache option and deadline, on the client's
/// ``engine``, whose settings (transport, cache, sessions, cookies, durable store, observers) apply
/// to all of them; tasks of different request types share the engine's scopes, so a
/// ``APIConcurrencyPolicy/cancelOthers`` search cancels the running task of its scope whatever its
/// type. Behind the client, each request type has a manager of its own (``manager(for:)``): the
/// place for a delegate, a durable line's replay, streams and pages.
///
/// Keep the client alive while its tasks matter: released, it cancels them (reason
/// ``APIError/CancellationReason/managerReleased``), as a manager does.
public final class APIClient: Sendable {
    /// The engine every request of this client goes through.
    public let engine: APIEngine
    /// The manager of each request type sent so far, by type.
    private let managers = LockedState<[ObjectIdentifier: AnyObject]>([:])
    /// The request type each durable scope holds (see ``Manager``); its identity names the client's
    /// tasks (``activity``).
    let durableScopes = DurableScopeTypes()

    /// A client on `engine`: `APIEngine()` (the shared URLSession, delivery on the main queue) unless
    /// given.
    public init(engine: APIEngine = APIEngine()) {
        self.engine = engine
    }

    /// A client whose requests give their ``APIRequest/path`` under `baseURL` (see
    /// ``APIEngine/Configuration/baseURL``), on an engine with every other setting its default.
    public convenience init(baseURL: URL) {
        var configuration = APIEngine.Configuration()
        configuration.baseURL = baseURL
        self.init(configuration: configuration)
    }

    /// A client on an engine made with `configuration`.
    public convenience init(configuration: APIEngine.Configuration) {
        self.init(engine: APIEngine(configuration: configuration))
    }

    /// The manager of this client that sends requests of type `Request`: the same one each time.
    /// Its ``APIManager/delegate`` hears its tasks' events (the ``APIManagerDelegate`` methods);
    /// its ``APIManager/replayDurableTasks(inScope:)``, ``APIManager/bytes(for:)`` and
    /// ``APIManager/events(for:reconnection:)`` are there for this type.
    public func manager<Request: Endpoint>(for type: Request.Type = Request.self) -> Manager<Request> {
        managers.withLock { managers in
            if let manager = managers[ObjectIdentifier(type)] as? Manager<Request> { return manager }
            let manager = Manager<Request>(engine: engine, durableScopes: durableScopes)
            managers[ObjectIdentifier(type)] = manager
            return manager
        }
    }

    /// Sends `request` under its policy and returns its task at once (see ``APIManager/send(_:)``):
    /// its outcome reaches the engine's observers and the delegate of ``manager(for:)``, if set.
    @discardableResult
    public func send<Request: Endpoint>(_ request: Request) -> APITask<Request> {
        manager(for: Request.self).send(request)
    }

    /// Sends `request` and calls `completion` exactly once with its typed outcome, in the caller's
    /// isolation (see ``APIManager/send(_:isolation:completion:)``).
    @discardableResult
    public func send<Request: Endpoint>(
        _ request: Request, isolation: isolated (any Actor)? = #isolation,
        completion: @escaping (Result<Request.Response, APIError>) -> Void
    ) -> APITask<Request> {
        manager(for: Request.self).send(request, isolation: isolation, completion: completion)
    }

    /// Sends `request` and waits for its typed response (see ``APIManager/response(for:)``).
    ///
    /// - Throws: the task's ``APIError``.
    public func response<Request: Endpoint>(for request: Request) async throws(APIError) -> Request.Response {
        try await manager(for: Request.self).response(for: request)
    }

    /// Sends `request` and yields each response it delivers, marked with its source (see
    /// ``APIManager/responses(for:)``).
    public func responses<Request: Endpoint>(for request: Request) -> AsyncThrowingStream<
        APIResponseCache.SourcedResponse<Request.Response>, any Error
    > {
        manager(for: Request.self).responses(for: request)
    }

    /// Cancels every in-flight task this client sent (reason
    /// ``APIError/CancellationReason/explicit``); other managers' tasks on its engine go on.
    public func cancelAll() {
        engine.cancelTasks(reason: .explicit) { [identity] task in task.wasSent(byClient: identity) }
    }

    /// The tasks this client sent that are in flight, of every request type, in the engine's order
    /// (see ``APIManager/inFlightTasks``).
    public var inFlightTasks: [AnyAPITask] {
        engine.inFlightTasks().filter { [identity] task in task.wasSent(byClient: identity) }
    }

    /// What names this client's tasks: the durable-scope record its managers share.
    var identity: ObjectIdentifier { ObjectIdentifier(durableScopes) }

    /// Where the delegates' events and the completions of calls made off any actor are delivered:
    /// the engine's ``APIEngine/delivery``, `.queue(.main)` unless set.
    public var delivery: APIEngine.Delivery {
        get { engine.delivery }
        set { engine.delivery = newValue }
    }

    /// The manager of an ``APIClient`` for one request type: every hook is the default one (the
    /// request's acceptable statuses, then `Request.Response(from:)`; the request's retry policy).
    /// Write an ``APIManager`` of your own for hooks of your own.
    ///
    /// A durable line (``APIConcurrencyPolicy/durable``) holds the requests of one type, as a
    /// manager's does: the client refuses (``APIError/durableStore(reason:underlying:)``) a durable
    /// request of another type into a scope that holds some, and a line is replayed through its
    /// type's manager (`client.manager(for: AddToCart.self).replayDurableTasks(inScope: "cart")`).
    public final class Manager<Request: Endpoint>: APIManager {
        public typealias Response = Request.Response
        public let engine: APIEngine
        let durableScopes: DurableScopeTypes

        init(engine: APIEngine, durableScopes: DurableScopeTypes) {
            self.engine = engine
            self.durableScopes = durableScopes
        }
    }
}

/// The request type each durable scope of a client holds, taken by the first durable request sent
/// into it on this launch.
final class DurableScopeTypes: Sendable {
    private let types = LockedState<[String?: String]>([:])

    /// Throws when `scope` holds requests of another type than `type`.
    func admit(_ type: String, in scope: String?) throws(APIError) {
        let holder = types.withLock { types in
            if let holder = types[scope] { return holder }
            types[scope] = type
            return type
        }
        guard holder == type else {
            throw .durableStore(
                reason: "the durable line \(DurableScopeFolder.describe(scope)) holds \(holder) requests, "
                    + "and a line holds one request type: send \(type) into a scope of its own")
        }
    }
}

/// A manager of an ``APIClient``, whatever its request type.
protocol ClientManager {
    var durableScopes: DurableScopeTypes { get }
}

extension AnyAPITask {
    /// Whether the client `identity` names (``APIClient/identity``) sent this task: the one rule for
    /// its `cancelAll()`, `inFlightTasks` and `activity`.
    func wasSent(byClient identity: ObjectIdentifier) -> Bool {
        (sender as? any ClientManager).map { ObjectIdentifier($0.durableScopes) == identity } ?? false
    }
}

extension APIClient.Manager: ClientManager {}
