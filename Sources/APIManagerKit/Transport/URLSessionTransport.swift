import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests with one `URLSession` of its own, through a session delegate: connections are
/// reused (keep-alive), each request's bytes are collected per task and released when it ends, and
/// cancelling a task cancels its `URLSessionTask`.
///
/// A request's `timeoutInterval` (``APIRequest/timeout``) is enforced here, as the longest the
/// request may go without receiving anything; it then fails with `URLError(.timedOut)`. (The Linux
/// URLSession ignores a request's own timeout and rounds the configuration's down to whole seconds;
/// the configuration's `timeoutIntervalForRequest`, 60 s by default, still applies on top.)
///
/// Redirects are followed, but when one leaves the request's origin (scheme, host and port) the
/// credential headers (`Authorization`, `Proxy-Authorization`, `Cookie` and any header the engine
/// marks sensitive: a custom auth header, persisted auth headers) are removed first.
public final class URLSessionTransport: APITransport {
    /// The transport managers use unless given another, with an ephemeral configuration.
    public static let shared = URLSessionTransport()

    /// The session; its delegate belongs to the transport.
    public let session: URLSession
    private let delegate: SessionDelegate

    /// - Parameter configuration: `.ephemeral` unless given (no shared cookies or URL cache).
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        delegate = SessionDelegate()
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit {
        // The session holds its delegate until it is invalidated; this ends that cycle once the
        // requests in flight have finished.
        session.finishTasksAndInvalidate()
    }

    public func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        send(request, sensitiveHeaders: [], completion: completion)
    }

    public func send(
        _ request: URLRequest,
        sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let task = session.dataTask(with: request)
        let record = TaskRecord(origin: Origin(request.url), sensitiveHeaders: sensitiveHeaders, completion: completion)
        delegate.register(task, record)
        delegate.armTimeout(for: task, record: record, interval: request.timeoutInterval)
        task.resume()
        return URLSessionTaskCancellable(task: task)
    }

    /// The number of requests whose delegate record is still held (for tests and leak checks).
    public var requestsInFlight: Int { delegate.count }
}

/// Scheme, host and port: what a redirect must keep for credentials to follow it.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: Int?

    init?(_ url: URL?) {
        guard let url, let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : nil)
    }
}

/// What the delegate keeps for one request while it runs.
final class TaskRecord: @unchecked Sendable {
    // @unchecked: `body` and `rejectedChallenge` are touched only by the session's delegate queue,
    // which is serial; the `let`s never change.
    let origin: Origin?
    let sensitiveHeaders: Set<String>
    let completion: @Sendable (Result<APIRawResponse, any Error>) -> Void
    var body = Data()
    /// An authentication challenge was rejected, so a cancellation that follows is the response.
    var rejectedChallenge = false
    // Guarded by the delegate's lock: the timeout timer runs on another queue.
    var lastActivity = DispatchTime.now()
    var timedOut = false
    var timer: (any DispatchSourceTimer)?

    init(
        origin: Origin?, sensitiveHeaders: Set<String>,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) {
        self.origin = origin
        self.sensitiveHeaders = sensitiveHeaders
        self.completion = completion
    }
}

final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: `records` is read and written only while holding `lock`.
    private let lock = Lock()
    private var records: [Int: TaskRecord] = [:]

    static let credentialHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    var count: Int { lock.withLock { records.count } }

    func register(_ task: URLSessionTask, _ record: TaskRecord) {
        lock.withLock { records[task.taskIdentifier] = record }
    }

    private func record(for task: URLSessionTask) -> TaskRecord? {
        lock.withLock { records[task.taskIdentifier] }
    }

    /// The record, its last activity set to now.
    private func touch(_ task: URLSessionTask) -> TaskRecord? {
        lock.withLock {
            let record = records[task.taskIdentifier]
            record?.lastActivity = .now()
            return record
        }
    }

    /// Cancels the task, as timed out, once it has received nothing for `interval` seconds.
    func armTimeout(for task: URLSessionTask, record: TaskRecord, interval: TimeInterval) {
        guard interval > 0, interval.isFinite else { return }
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let nanoseconds = UInt64(min(interval, 1e9) * 1e9)
        timer.setEventHandler { [weak self, weak task, weak record] in
            guard let self, let task, let record else { return }
            let rearm: (DispatchTime, (any DispatchSourceTimer)?)? = self.lock.withLock {
                guard self.records[task.taskIdentifier] === record, !record.timedOut else { return nil }
                let deadline = record.lastActivity + .nanoseconds(Int(nanoseconds))
                if deadline <= .now() {
                    record.timedOut = true
                    return nil
                }
                return (deadline, record.timer)
            }
            if let (deadline, timer) = rearm {
                timer?.schedule(deadline: deadline)
            } else if self.lock.withLock({ record.timedOut }) {
                task.cancel()
            }
        }
        lock.withLock { record.timer = timer }
        timer.schedule(deadline: .now() + .nanoseconds(Int(nanoseconds)))
        timer.resume()
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        if let record = touch(dataTask) {
            let expected = response.expectedContentLength
            // Reserve what the server announced (within reason), so a large body grows once.
            record.body = Data(capacity: expected > 0 ? Int(min(expected, 64 << 20)) : 0)
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        touch(dataTask)?.body.append(data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        guard let record = record(for: task), record.origin != Origin(request.url) else {
            completionHandler(request)
            return
        }
        var redirected = request
        let sensitive = Self.credentialHeaders.union(record.sensitiveHeaders.map { $0.lowercased() })
        for name in (redirected.allHTTPHeaderFields ?? [:]).keys where sensitive.contains(name.lowercased()) {
            redirected.setValue(nil, forHTTPHeaderField: name)
        }
        completionHandler(redirected)
    }

    /// Credentials travel in headers (``APIAuthorization``), never through challenges: a `401` with
    /// `WWW-Authenticate` is delivered as the response it is.
    ///
    /// On Linux, `.performDefaultHandling` leaves the task waiting forever and `.useCredential`
    /// without a credential crashes, so the challenge is rejected there and the task's cancellation
    /// that follows is turned back into its `401` response (status, headers and body).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
        record(for: task)?.rejectedChallenge = true
        completionHandler(.rejectProtectionSpace, nil)
        #else
        completionHandler(.performDefaultHandling, nil)
        #endif
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let record = lock.withLock({ records.removeValue(forKey: task.taskIdentifier) }) else { return }
        let (timer, timedOut) = lock.withLock { (record.timer, record.timedOut) }
        timer?.cancel()
        if timedOut {
            record.completion(.failure(URLError(.timedOut)))
            return
        }
        if let error, !(record.rejectedChallenge && (error as? URLError)?.code == .cancelled && task.response != nil) {
            record.completion(.failure(error))
            return
        }
        guard let http = task.response as? HTTPURLResponse else {
            record.completion(.failure(URLError(.badServerResponse)))
            return
        }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            headers[String(describing: key)] = String(describing: value)
        }
        let body = record.body
        record.body = Data()
        record.completion(
            .success(APIRawResponse(statusCode: http.statusCode, headers: headers, body: body, url: http.url)))
    }
}

private struct URLSessionTaskCancellable: APICancellable, @unchecked Sendable {
    // @unchecked: URLSessionTask.cancel() is documented thread-safe; nothing else is touched.
    let task: URLSessionTask
    func cancel() { task.cancel() }
}
