/// The base delegate protocol of every manager: eight events, each with an empty default.
///
/// Events arrive through the manager's forwarding methods (``APIManager/task(_:didFinishWith:)`` and
/// its siblings), on the manager's ``APIManager/delivery`` (the main queue unless set), one at a
/// time and in order for each task. Every sent task gets exactly one terminal event, either
/// `didFinishWith` or `didFailWith`, and no event after it.
///
/// For typed events, refine this protocol with your own methods and forward to them from the
/// manager (see <doc:DelegateAndAsync>).
public protocol APIManagerDelegate: AnyObject {
    /// The task is queued behind others of its scope. At most once per task, before any other event.
    func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask)
    /// The task waits for the network (``APIRequest/connectivityWait``): the engine knows it is
    /// offline, or an attempt found it so. Each time it begins such a wait; its next attempt's start
    /// says it goes again.
    func apiManager(_ manager: any APIManager, taskIsWaitingForNetwork task: AnyAPITask)
    /// Attempt `attempt` (1 for the first) has started. Once per attempt.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int)
    /// The attempt's upload or download went on, for a task whose request reports progress
    /// (``APIRequest/reportsProgress``): thinned to one per 1 % or 50 ms, whichever is rarer, with
    /// exactly one final report per direction and attempt, before the terminal event.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReport progress: APITransferProgress)
    /// The attempt failed with `error`; the next starts after `delay` seconds. Once per retry.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, willRetryAfter delay: Double, error: APIError)
    /// A stored response, delivered ahead of the network's under ``APIResponseCache/Option/both``. Not terminal:
    /// the task goes on to the network. At most once per task.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didReceiveCachedResponse response: any APIResponse)
    /// The task ended with a response; `task.responseSource` says whether it came from the network,
    /// the cache or a revalidation. Terminal.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse)
    /// The task ended without one: failed, cancelled, ignored or timed out. Terminal.
    func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError)
}

extension APIManagerDelegate {
    public func apiManager(_ manager: any APIManager, taskIsWaiting task: AnyAPITask) {}
    public func apiManager(_ manager: any APIManager, taskIsWaitingForNetwork task: AnyAPITask) {}
    public func apiManager(_ manager: any APIManager, task: AnyAPITask, didStartAttempt attempt: Int) {}
    public func apiManager(_ manager: any APIManager, task: AnyAPITask, didReport progress: APITransferProgress) {}
    public func apiManager(_ manager: any APIManager, task: AnyAPITask, willRetryAfter delay: Double, error: APIError) {
    }
    public func apiManager(
        _ manager: any APIManager, task: AnyAPITask, didReceiveCachedResponse response: any APIResponse
    ) {}
    public func apiManager(_ manager: any APIManager, task: AnyAPITask, didFinishWith response: any APIResponse) {}
    public func apiManager(_ manager: any APIManager, task: AnyAPITask, didFailWith error: APIError) {}
}
