import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIManager {
    public func urlRequest(for task: APITask<Request>) throws -> URLRequest {
        var request = try task.request.makeURLRequest()
        if let accept = Response.acceptedContentType, request.value(forHTTPHeaderField: "Accept") == nil {
            request.setValue(accept, forHTTPHeaderField: "Accept")
        }
        return request
    }

    public func response(for task: APITask<Request>, from raw: APIRawResponse) throws -> Response {
        guard task.request.acceptableStatusCodes.statusCodes.contains(raw.statusCode) else {
            throw APIError.unacceptableStatus(raw, message: errorMessage(in: raw))
        }
        return try Response(from: raw)
    }

    public func errorMessage(in response: APIRawResponse) -> String? {
        APIRawResponse.ServerMessage.find(in: response)
    }

    public func retryDelay(for task: APITask<Request>, afterAttempt attempt: Int, error: APIError) -> TimeInterval? {
        guard let policy = task.request.retryPolicy else { return nil }
        return policy.delay(
            afterAttempt: attempt, error: error, method: task.request.method,
            randomUnit: engine.randomSource.nextUnitInterval(), now: engine.clock.date)
    }

    public func taskIsWaiting(_ task: APITask<Request>) {
        baseDelegate?.apiManager(self, taskIsWaiting: task)
    }

    public func taskIsWaitingForNetwork(_ task: APITask<Request>) {
        baseDelegate?.apiManager(self, taskIsWaitingForNetwork: task)
    }

    public func task(_ task: APITask<Request>, didStartAttempt attempt: Int) {
        baseDelegate?.apiManager(self, task: task, didStartAttempt: attempt)
    }

    public func task(_ task: APITask<Request>, didReport progress: APITransferProgress) {
        baseDelegate?.apiManager(self, task: task, didReport: progress)
    }

    public func task(_ task: APITask<Request>, willRetryAfter delay: TimeInterval, error: APIError) {
        baseDelegate?.apiManager(self, task: task, willRetryAfter: delay, error: error)
    }

    public func task(_ task: APITask<Request>, didReceiveCachedResponse response: Response) {
        baseDelegate?.apiManager(self, task: task, didReceiveCachedResponse: response)
    }

    /// The default for a manager with a `Delegate` type of its own, which is to forward its terminal
    /// events to it: using it is a compiler warning, so that a forwarding method whose name is
    /// misspelled (`task(_:didFinishWithResponse:)`) does not compile quietly into a delegate that
    /// never hears a task end. It forwards to the base delegate method, as before.
    @available(
        *, deprecated,
        message:
            "A manager with a Delegate type of its own forwards its terminal events: implement task(_:didFinishWith:) (check its spelling) and call the delegate's typed method"
    )
    public func task(_ task: APITask<Request>, didFinishWith response: Response) {
        baseDelegate?.apiManager(self, task: task, didFinishWith: response)
    }

    /// The default for a manager with a `Delegate` type of its own: a compiler warning, as for
    /// `task(_:didFinishWith:)`.
    @available(
        *, deprecated,
        message:
            "A manager with a Delegate type of its own forwards its terminal events: implement task(_:didFailWith:) (check its spelling) and call the delegate's typed method"
    )
    public func task(_ task: APITask<Request>, didFailWith error: APIError) {
        baseDelegate?.apiManager(self, task: task, didFailWith: error)
    }

    fileprivate var baseDelegate: (any APIManagerDelegate)? {
        engine.baseDelegate(of: self)
    }
}

extension APIManager where Delegate == any APIManagerDelegate {
    /// Forwards to the delegate's ``APIManagerDelegate/apiManager(_:task:didFinishWith:)``.
    public func task(_ task: APITask<Request>, didFinishWith response: Response) {
        baseDelegate?.apiManager(self, task: task, didFinishWith: response)
    }

    /// Forwards to the delegate's ``APIManagerDelegate/apiManager(_:task:didFailWith:)``.
    public func task(_ task: APITask<Request>, didFailWith error: APIError) {
        baseDelegate?.apiManager(self, task: task, didFailWith: error)
    }
}

extension APIManager {
    /// The delegate, held weakly, and kept as the type it was set with: reading it looks no
    /// conformance up, so a screen on the main actor that conforms through an isolated conformance
    /// (`extension Screen: @MainActor CartAPIDelegate`) is read back as it was set, on the main queue
    /// as anywhere (see <doc:DelegateAndAsync>). A value that is not an object is not kept (reads
    /// back `nil`). Set it from any thread; events already queued go to the delegate set when they
    /// are delivered. Each manager has its own, also when managers share an engine.
    public var delegate: Delegate? {
        get { (engine.typedDelegate(of: self) as? TypedDelegate<Delegate>)?.value }
        set {
            // Typed from here on: the value keeps the conformance the caller converted it with (an
            // isolated one included), which a later lookup might not find (see `TypedDelegate`).
            // The base protocol is looked up here, in the caller's isolation, once.
            engine.setDelegate(
                typed: newValue.flatMap(TypedDelegate.init), base: newValue.flatMap { $0 as? any APIManagerDelegate },
                of: self)
        }
    }

    /// Where delegate events are delivered: `.queue(.main)` unless set (see ``APIEngine/Delivery``).
    public var delivery: APIEngine.Delivery {
        get { engine.delivery }
        set { engine.delivery = newValue }
    }

    /// The name of ``delivery`` before 1.0.
    @available(*, deprecated, renamed: "delivery")
    public var eventDelivery: APIEngine.Delivery {
        get { engine.delivery }
        set { engine.delivery = newValue }
    }
}
