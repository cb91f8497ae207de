import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What ``APIEngine/eventMonitor`` installs: an observer among the engine's others, last of them,
/// that turns what it is told of each attempt into ``APIEvent``s for the monitor's closure. Setting
/// the monitor puts it in the list the engine's attempts read when they start
/// (``APIEngine/startAttempt(_:attempt:link:)``); there is no other way events reach the monitor.
///
/// | told | the monitor's event |
/// |---|---|
/// | ``APIEngine/Observation/Kind/attemptSent(attempt:request:sharedWith:)`` | ``APIEvent/Kind/started``, or ``APIEvent/Kind/joined(leaderTask:)`` for a shared request |
/// | ``APIEngine/Observation/Kind/attemptEnded(_:)`` | ``APIEvent/Kind/finished(_:)`` with the transport's time |
/// | ``APIEngine/Notice/Kind/circuitOpened``, `circuitClosed`, `retryRefused` | the kinds of the same names |
/// | an attempt that failed before it was sent (``failedUnsent(_:attempt:of:)``) | ``APIEvent/Kind/finished(_:)`` without a request |
///
/// The task's own observations (sent, waiting, retries, the end) are not the monitor's: it hears
/// attempts only, as it always has.
struct EventMonitorForward: APIEngine.Observer {
    let monitor: @Sendable (APIEvent) -> Void

    func observe(_ observation: APIEngine.Observation) {
        let task = observation.task.identifier
        switch observation.kind {
        case .attemptSent(let attempt, let request, let sharedWith):
            monitor(
                APIEvent(
                    kind: sharedWith.map { .joined(leaderTask: $0) } ?? .started, taskIdentifier: task,
                    attempt: attempt, request: request, duration: nil, sensitiveHeaders: observation.secretNames))
        case .attemptEnded(let report):
            monitor(
                APIEvent(
                    kind: .finished(report.result), taskIdentifier: task, attempt: report.attempt,
                    request: report.request, duration: report.transportDuration,
                    sensitiveHeaders: report.sensitiveHeaders))
        case .sent, .waiting, .waitingForNetwork, .started, .renewingCredential, .responseBuilt, .cachedCopy,
            .retryScheduled, .ended:
            break
        }
    }

    func notice(_ notice: APIEngine.Notice) {
        guard let task = notice.task, let attempt = notice.attempt else { return }
        let kind: APIEvent.Kind
        if notice.kind == .circuitOpened, let origin = notice.origin, let closesIn = notice.closesIn {
            kind = .circuitOpened(origin: origin, closesIn: closesIn)
        } else if notice.kind == .circuitClosed, let origin = notice.origin {
            kind = .circuitClosed(origin: origin)
        } else if notice.kind == .retryRefused, let error = notice.error {
            kind = .retryRefused(error)
        } else {
            return
        }
        monitor(
            APIEvent(
                kind: kind, taskIdentifier: task.identifier, attempt: attempt, request: notice.request,
                duration: nil, sensitiveHeaders: notice.secretNames))
    }

    /// An attempt that failed before its request went out (it could not be built, an interceptor
    /// failed, its origin's circuit is open): no observation says so on the attempt's thread, so the
    /// engine tells the forward itself (``APIEngine/tell(_:about:)``).
    func failedUnsent(_ error: APIError, attempt: Int, of task: AnyAPITask) {
        monitor(
            APIEvent(
                kind: .finished(.failure(error)), taskIdentifier: task.identifier, attempt: attempt, request: nil,
                duration: nil, sensitiveHeaders: []))
    }
}
