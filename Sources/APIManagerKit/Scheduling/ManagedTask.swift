import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task that knows its manager's types: the typed hooks (``AnyAPITask/makeURLRequest()`` and the
/// others) call the manager's to build the request and the response, to decide retries, to forward
/// events, and to encode and decode a durable task's record. Users hold it as the
/// ``APITask`` handle of the manager's `Request`; what the engine keeps of it is its ``TaskBag``.
final class ManagedTask<Manager: APIManager>: APITask<Manager.Request>, @unchecked Sendable {
    // @unchecked: adds a weak reference, which is thread-safe, and `observer`, written once before
    // the task is sent and only read afterwards (the send's lock orders the write before every read).
    weak var manager: Manager?
    /// The async caller: told the cached copy and the end. Set before the task is sent, never after.
    @exclusivity(unchecked) private var observer: (@Sendable (Observation) -> Void)?
    /// The closure of ``APIManager/send(_:isolation:completion:)``: set before the task is sent,
    /// never after; `nil` for a task sent without one.
    @exclusivity(unchecked) private var completion: TaskCompletion<Manager.Response>?

    /// What the async caller is told, typed.
    enum Observation {
        case cached(Manager.Response)
        /// The end; on success, with the raw response the typed one was built from.
        case ended(Result<Manager.Response, APIError>, APIResponseCache.Source?, APIRawResponse?)
    }

    init(
        manager: Manager, request: Manager.Request, credentialOrigins: [Origin]? = nil, bodyStream: StreamBuffer? = nil,
        addedHeaders: [String: String]? = nil, policy: APIConcurrencyPolicy? = nil,
        restoring record: DurableRecord? = nil, retryingRefusal: Bool = false
    ) {
        self.manager = manager
        super.init(
            request: request, engine: manager.engine, credentialOrigins: credentialOrigins, bodyStream: bodyStream,
            addedHeaders: addedHeaders, policy: policy, restoring: record, retryingRefusal: retryingRefusal)
    }

    override var sender: AnyObject? { manager }

    /// The request's type and its JSON, encoded by the manager's request type.
    override func durableDescription() throws(APIError) -> (type: String, json: Data) {
        let type = String(reflecting: Manager.Request.self)
        guard let encodable = request as? any Encodable else {
            throw .durableStore(reason: "\(type) is not Encodable, so a durable task of it cannot be written")
        }
        guard Manager.Request.self is any Decodable.Type else {
            throw .durableStore(reason: "\(type) is not Decodable, so a durable task of it could not be replayed")
        }
        let json: Data
        do {
            json = try JSONEncoder().encode(encodable)
        } catch {
            throw .durableStore(reason: "\(type) could not be encoded", underlying: error)
        }
        // A client's managers share its engine's lines: one request type a line.
        if let client = manager as? any ClientManager {
            try client.durableScopes.admit(type, in: concurrencyScope)
        }
        return (type, json)
    }

    override var durableRestorer: DurableRestorer {
        guard let manager else { return .withoutManager }
        return .restoring(for: manager)
    }

    /// The task `record` describes, its request decoded as the manager's.
    static func restore(
        _ record: DurableRecord, for manager: Manager, retryingRefusal: Bool = false
    ) -> Result<AnyAPITask, APIError> {
        guard let decodable = Manager.Request.self as? any Decodable.Type else {
            return .failure(
                .durableStore(
                    reason: "\(String(reflecting: Manager.Request.self)) is not Decodable, so the record cannot be read"
                ))
        }
        let request: Manager.Request
        do {
            guard let decoded = try JSONDecoder().decode(decodable, from: record.request) as? Manager.Request else {
                throw APIError.durableStore(reason: "the record did not decode as the manager's request type")
            }
            request = decoded
        } catch {
            return .failure(
                .durableStore(
                    reason: "the record of a \(record.requestType) no longer decodes as "
                        + "\(String(reflecting: Manager.Request.self))",
                    underlying: error))
        }
        return .success(
            ManagedTask(
                manager: manager, request: request, policy: .durable, restoring: record,
                retryingRefusal: retryingRefusal))
    }

    override func makeURLRequest() throws(APIError) -> URLRequest {
        guard let manager else { throw .cancelled(reason: .managerReleased) }
        do {
            return try manager.urlRequest(for: self)
        } catch let error as APIError {
            throw error
        } catch {
            throw .invalidRequest(reason: "the URL request could not be built", underlying: error)
        }
    }

    /// Registers the async caller; called before the task is sent, on the thread that sends it.
    override var isObserved: Bool { observer != nil }

    func observe(_ observer: @escaping @Sendable (Observation) -> Void) {
        self.observer = observer
    }

    /// Registers the closure called once with the outcome; called before the task is sent, on the
    /// thread that sends it.
    func complete(with completion: TaskCompletion<Manager.Response>) {
        self.completion = completion
    }

    /// The engine ended the task without a delivery (it is gone): the completion, if any, hears so.
    override func endedWithoutDelivery(_ error: APIError) {
        if let completion { Self.complete(completion, with: error) }
    }

    deinit {
        // A terminal event dropped undelivered with its engine (queued on a delivery that never
        // ran): the completion is still called once.
        if let completion { Self.complete(completion, with: .cancelled(reason: .managerReleased)) }
    }

    // The completion is called from these two, never inline: a function that makes a
    // `Result<Manager.Response, APIError>` looks its metadata up on entry (about 330 instructions,
    // unspecialized), which every task would pay in `deliver` and its deinit.
    @inline(never)
    private static func complete(_ completion: TaskCompletion<Manager.Response>, with error: APIError) {
        completion.complete(with: .failure(error))
    }

    @inline(never)
    private static func complete(_ completion: TaskCompletion<Manager.Response>, with response: Manager.Response) {
        completion.complete(with: .success(response))
    }

    override func buildResponse(_ raw: APIRawResponse) -> Result<BuiltResponse, APIError> {
        guard let manager else { return .failure(.cancelled(reason: .managerReleased)) }
        do {
            let response = try manager.response(for: self, from: raw)
            return .success(BuiltResponse { [self] destination in handOver(response, from: raw, to: destination) })
        } catch let error as APIError {
            return .failure(error)
        } catch let error as DecodingError {
            return .failure(.decoding(underlying: error, response: raw))
        } catch let error as APIMappingError {
            return .failure(.decoding(underlying: error, response: raw))
        } catch {
            return .failure(.rejected(underlying: error, response: raw))
        }
    }

    override func retryDelay(afterAttempt attempt: Int, error: APIError) -> TimeInterval? {
        manager?.retryDelay(for: self, afterAttempt: attempt, error: error)
    }

    override func deliver(_ event: Event) {
        // A durable task's record is settled once the app has been told (its delegate's method
        // returned): a kill before leaves it for the next launch, whose replay sends it again with
        // its key and tells the app the server's answer.
        defer {
            if let durableSlot = bag.durableSlot {
                switch event {
                case .finished, .failed: durableSlot.told(engine: engine, onTheDeliveryQueue: true)
                case .waiting, .waitingForNetwork, .started, .progress, .willRetry, .cachedResponse: break
                }
            }
        }
        switch event {
        case .waitingForNetwork:
            manager?.taskIsWaitingForNetwork(self)
        case .waiting:
            manager?.taskIsWaiting(self)
        case .started(let attempt):
            manager?.task(self, didStartAttempt: attempt)
        case .progress(let progress):
            manager?.task(self, didReport: progress)
        case .willRetry(let delay, let error):
            manager?.task(self, willRetryAfter: delay, error: error)
        case .cachedResponse(let built):
            built.handOver(.managerCachedCopy)
        case .finished(let built):
            built.handOver(.managerFinished)
        case .failed(let error):
            // The manager (and so its delegate) first, then the call's own closure.
            manager?.task(self, didFailWith: error)
            if let completion { Self.complete(completion, with: error) }
        }
    }

    override func observerFailed(_ error: APIError) {
        observer?(.ended(.failure(error), nil, nil))
        bag.durableSlot?.told(engine: engine, onTheDeliveryQueue: false)
    }

    /// Where a response this task built goes, with its type.
    private func handOver(
        _ response: Manager.Response, from raw: APIRawResponse, to destination: BuiltResponse.Destination
    ) {
        switch destination {
        case .managerCachedCopy: manager?.task(self, didReceiveCachedResponse: response)
        case .managerFinished:
            manager?.task(self, didFinishWith: response)
            if let completion { Self.complete(completion, with: response) }
        case .observerCachedCopy: observer?(.cached(response))
        case .observerEnded(let source):
            observer?(.ended(.success(response), source, raw))
            bag.durableSlot?.told(engine: engine, onTheDeliveryQueue: false)
        }
    }
}
