import Foundation

/// The header that lets a server recognise the attempts of one operation (the IETF httpapi
/// `Idempotency-Key` draft): declare it on a request whose non-idempotent method is retried, so a
/// lost response never makes the operation happen twice.
///
/// ```swift
/// struct CartRequest: APIRequest {
///     // …
///     var retryPolicy: APIRetryPolicy? { APIRetryPolicy(maxAttempts: 3, retriesNonIdempotentRequests: true) }
///     var idempotencyKey: APIIdempotencyKey? { .standard }
/// }
/// ```
///
/// The value is generated once, when the task is sent, and is the same on every attempt, retry and
/// authentication replay of that task (read it as ``AnyAPITask/idempotencyKey``); another task of
/// the same request gets another value.
public struct APIIdempotencyKey: Sendable {
    /// The header's name. `Idempotency-Key` unless given.
    public var headerName: String
    /// Makes a task's value; called once per task, on the thread that sends it. A random UUID
    /// unless given.
    public var generate: @Sendable () -> String

    /// - Parameters:
    ///   - headerName: `Idempotency-Key` unless given.
    ///   - generate: a random UUID (`UUID().uuidString`) unless given.
    public init(
        headerName: String = "Idempotency-Key", generate: @escaping @Sendable () -> String = { UUID().uuidString }
    ) {
        self.headerName = headerName
        self.generate = generate
    }

    /// `Idempotency-Key` with a random UUID.
    public static let standard = APIIdempotencyKey()
}
