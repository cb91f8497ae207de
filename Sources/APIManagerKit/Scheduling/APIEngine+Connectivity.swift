import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension APIEngine {
    /// Tells an engine whether the network is reachable, so that tasks waiting for it
    /// (``APIRequest/connectivityWait``) go when it returns (``APIEngine/Configuration/connectivity``).
    ///
    /// Without one, the engine learns it from failures alone: an attempt of a waiting task that fails
    /// with an offline error (``APIEngine/isOfflineError(_:)``) makes the engine offline; it then lets
    /// the waiting tasks try again after 2 s, doubling to 60 s while they keep failing, and at once
    /// when any attempt gets a response. With one, the engine is offline whenever it says so (and
    /// after such a failure until it says the path is reachable, or a probe gets an answer).
    /// `APIManagerKitTesting`'s `MockConnectivity` is one a test sets by hand; on Apple platforms
    /// `APIEngine.PathMonitor` (Apple platforms) follows `NWPathMonitor`.
    public protocol Connectivity: AnyObject, Sendable {
        /// Starts telling `update` whether the network is reachable: once soon with what is known
        /// now, then at every change, on any thread. Called once, when the engine is made.
        func start(_ update: @escaping @Sendable (_ isReachable: Bool) -> Void)
    }

    /// Whether `error` says the device could not reach the network (not that a server refused or
    /// failed): a transport error of code `notConnectedToInternet`, `networkConnectionLost`,
    /// `cannotFindHost`, `dnsLookupFailed`, `dataNotAllowed`, `internationalRoamingOff` or
    /// `callIsActive`. A task that waits for the network waits after such a failure instead of
    /// failing or retrying (``APIRequest/connectivityWait``).
    public static func isOfflineError(_ error: APIError) -> Bool {
        guard case .transport(let underlying) = error, let urlError = underlying as? URLError else { return false }
        switch urlError.code {
        case .notConnectedToInternet, .networkConnectionLost, .cannotFindHost, .dnsLookupFailed, .dataNotAllowed,
            .internationalRoamingOff, .callIsActive:
            return true
        default:
            return false
        }
    }

    /// What a task that waited for the network past its ``APIRequest/connectivityWait`` ends with when
    /// no attempt of it had failed yet.
    static let offlineError = APIError.transport(underlying: URLError(.notConnectedToInternet))

    /// The engine's connectivity said whether the path is reachable.
    func connectivityChanged(isReachable: Bool) {
        transition { $0.connectivityChanged(isReachable: isReachable) }
    }
}
