import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A task that knows its manager's types: it calls the manager's hooks to build the request and the
/// response, to decide retries and to forward events.
final class ManagedTask<Manager: APIManager>: APITask<Manager.Request>, @unchecked Sendable {
    // @unchecked: adds only a weak reference, which is thread-safe, to APITask.
    weak var manager: Manager?

    init(manager: Manager, request: Manager.Request, identifier: UInt64) {
        self.manager = manager
        super.init(request: request, identifier: identifier, engine: manager.engine)
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

    override func buildResponse(_ raw: APIRawResponse) -> Result<any Sendable, APIError> {
        guard let manager else { return .failure(.cancelled(reason: .managerReleased)) }
        do {
            return .success(try manager.response(for: self, from: raw))
        } catch let error as APIError {
            return .failure(error)
        } catch let error as DecodingError {
            return .failure(.decoding(underlying: error, response: raw))
        } catch {
            return .failure(.rejected(underlying: error, response: raw))
        }
    }

    override func retryDelay(afterAttempt attempt: Int, error: APIError) -> TimeInterval? {
        manager?.retryDelay(for: self, afterAttempt: attempt, error: error)
    }

    override func deliver(_ event: Event) {
        guard let manager else { return }
        switch event {
        case .waiting:
            manager.taskIsWaiting(self)
        case .started(let attempt):
            manager.task(self, didStartAttempt: attempt)
        case .willRetry(let delay, let error):
            manager.task(self, willRetryAfter: delay, error: error)
        // Payloads come only from this task's own `buildResponse(_:)`, so the casts below always
        // succeed. They are pattern casts rather than `as?`: an `as?` builds the metadata of
        // `Manager.Response?` at run time for every event, which costs more than the rest of the
        // delivery.
        case .cachedResponse(let response as Manager.Response):
            manager.task(self, didReceiveCachedResponse: response)
        case .finished(let response as Manager.Response):
            manager.task(self, didFinishWith: response)
        case .cachedResponse, .finished:
            break
        case .failed(let error):
            manager.task(self, didFailWith: error)
        }
    }
}
