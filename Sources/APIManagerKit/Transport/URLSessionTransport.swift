import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests with one `URLSession` of its own.
public final class URLSessionTransport: APITransport {
    /// The transport managers use unless given another, with an ephemeral configuration.
    public static let shared = URLSessionTransport()

    public let session: URLSession

    /// - Parameter configuration: `.ephemeral` unless given (no shared cookies or URL cache).
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        session = URLSession(configuration: configuration)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    public func send(
        _ request: URLRequest,
        completion: @escaping @Sendable (Result<APIRawResponse, any Error>) -> Void
    ) -> any APICancellable {
        let task = session.dataTask(with: request) { data, response, error in
            if let error {
                completion(.failure(error))
                return
            }
            guard let http = response as? HTTPURLResponse else {
                completion(.failure(URLError(.badServerResponse)))
                return
            }
            var headers: [String: String] = [:]
            for (key, value) in http.allHeaderFields {
                headers[String(describing: key)] = String(describing: value)
            }
            completion(
                .success(
                    APIRawResponse(statusCode: http.statusCode, headers: headers, body: data ?? Data(), url: http.url)))
        }
        task.resume()
        return URLSessionTaskCancellable(task: task)
    }
}

private struct URLSessionTaskCancellable: APICancellable, @unchecked Sendable {
    // @unchecked: URLSessionTask.cancel() is documented thread-safe; nothing else is touched.
    let task: URLSessionTask
    func cancel() { task.cancel() }
}
