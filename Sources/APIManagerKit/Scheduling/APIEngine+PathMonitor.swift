#if canImport(Network)
import Dispatch
import Network

extension APIEngine {
    /// The ``Connectivity`` of Apple platforms: reachable while `NWPathMonitor`'s path is
    /// `.satisfied`. Give it to the engine (``APIEngine/Configuration/connectivity``) so that tasks
    /// waiting for the network (``APIRequest/connectivityWait``) go as soon as the path returns,
    /// and wait without trying while it is gone.
    public final class PathMonitor: Connectivity, @unchecked Sendable {
        // @unchecked: `monitor` is configured once, in `start`, before it runs on `queue`; NWPathMonitor
        // calls its handler on that queue only.
        private let monitor: NWPathMonitor
        private let queue = DispatchQueue(label: "APIManagerKit.PathMonitor")

        /// Follows every interface, or only `interface` when given (`.wifi` to wait for Wi-Fi).
        public init(interface: NWInterface.InterfaceType? = nil) {
            monitor = interface.map { NWPathMonitor(requiredInterfaceType: $0) } ?? NWPathMonitor()
        }

        public func start(_ update: @escaping @Sendable (_ isReachable: Bool) -> Void) {
            monitor.pathUpdateHandler = { path in update(path.status == .satisfied) }
            monitor.start(queue: queue)
        }

        deinit { monitor.cancel() }
    }
}
#endif
