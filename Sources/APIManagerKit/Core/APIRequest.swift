import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one endpoint needs to be called. Only ``url`` is required; every other property has a
/// default in an extension.
///
/// ```swift
/// struct WeatherRequest: APIRequest {
///     let url = URL(string: "https://api.example.com/weather")!
/// }
/// ```
public protocol APIRequest: Sendable {
    /// The endpoint's URL, or its base URL when ``path`` is not empty. A URL without a scheme is
    /// relative: joined to the engine's ``APIEngine/Configuration/baseURL`` when it is sent. `/`
    /// (relative) unless overridden: a request of an engine with a base URL may give only its
    /// ``path``.
    var url: URL { get }
    /// A path appended to ``url``, with `{name}` templates filled from ``parameters``. `""` unless
    /// overridden.
    var path: String { get }
    /// The HTTP method. `.get` unless overridden.
    var method: HTTPMethod { get }
    /// Extra request headers. Empty unless overridden.
    var headers: [String: String] { get }
    /// The parameters: path template values, query, body (see ``APIParameters``). Empty unless
    /// overridden; an `Encodable` request is its own parameters (``APIParameters/encoding(_:encoder:)``).
    var parameters: APIParameters { get }
    /// How parameters placed in the body by method are encoded. `.json` unless overridden.
    var bodyEncoding: APIParameters.BodyEncoding { get }
    /// How query parameters are written. `.default` (brackets, `true`/`false`, nulls dropped) unless
    /// overridden.
    var queryEncoding: APIParameters.QueryEncoding { get }
    /// A raw request body, for bodies built by hand. `nil` unless overridden; it cannot be combined
    /// with body parameters.
    var body: APIRequestBody? { get }
    /// Credentials sent with this request. `nil` unless overridden.
    var authorization: APIAuthentication.Authorization? { get }
    /// The idle timeout: the longest an attempt may go without a byte sent or received, in seconds,
    /// as `URLRequest.timeoutInterval` and URLSession's `timeoutIntervalForRequest` count it; past it
    /// the attempt fails with `URLError(.timedOut)`. An event stream or a download that keeps
    /// receiving bytes runs as long as it needs (bound it with ``totalTimeout``; the task with
    /// ``deadline``); time a stream's consumer holds the transport back does not count. `60` unless
    /// overridden. It must be greater than 0 and finite: any other value fails the attempt with
    /// ``APIError/invalidRequest(reason:underlying:)``; a finite value above
    /// ``APIRequestDefaults/maxTimeout`` (one year) counts as that.
    var timeout: TimeInterval { get }
    /// The longest one attempt may take, from sending to the last byte, however the bytes flow, in
    /// seconds; past it the attempt fails with `URLError(.timedOut)`. `nil` (no limit: ``timeout``
    /// and ``deadline`` bound it) unless overridden. The rules of ``timeout`` apply to its value.
    var totalTimeout: TimeInterval? { get }
    /// How this task treats the other in-flight tasks of its scope. `.default` unless overridden.
    var concurrencyPolicy: APIConcurrencyPolicy { get }
    /// Narrows the policy to the tasks sharing this key; tasks with different keys never interact.
    /// `nil` (one scope for the whole manager) unless overridden.
    var concurrencyScope: String? { get }
    /// Where the task waits in its scope's line: a higher priority waits ahead of a lower one, equal
    /// priorities in sending order. `0` unless overridden. ``APIConcurrencyPolicy/waitUntilDoneHighPriority``
    /// tasks still wait ahead of all others, newest first. Read once, when the task is sent.
    var priority: Int { get }
    /// How many tasks of the scope may run at once for a ``APIConcurrencyPolicy/limited`` task to
    /// start (tasks waiting for a retry count as running). `4` unless overridden; a value under `1`
    /// counts as `1`. Read once, when the task is sent; other policies ignore it.
    var concurrencyLimit: Int { get }
    /// The quiet interval a ``APIConcurrencyPolicy/debounce`` task waits before it starts, in seconds
    /// of the engine's clock. `0.3` unless overridden; a negative value or one that is not a finite
    /// number counts as `0`.
    var debounceInterval: TimeInterval { get }
    /// The least time between the starts of two ``APIConcurrencyPolicy/throttle`` tasks of the scope,
    /// in seconds of the engine's clock. `1` unless overridden; a negative value or one that is not a
    /// finite number counts as `0`.
    var throttleInterval: TimeInterval { get }
    /// What a ``APIConcurrencyPolicy/throttle`` task sent before its turn does. ``APIConcurrencyPolicy/ThrottleMode/wait``
    /// unless overridden.
    var throttleMode: APIConcurrencyPolicy.ThrottleMode { get }
    /// Whether an attempt shares one network attempt with identical requests of the engine in flight
    /// at the same time (see ``APIConcurrencyPolicy/Sharing``). ``APIConcurrencyPolicy/Sharing/never`` unless overridden.
    var sharing: APIConcurrencyPolicy.Sharing { get }
    /// A limit on running tasks shared with other requests, managers and engines (see
    /// ``APIConcurrencyPolicy/Group``): give the same group object to every request that shares the limit.
    /// `nil` (no shared limit) unless overridden. Read once, when the task is sent.
    var concurrencyGroup: APIConcurrencyPolicy.Group? { get }
    /// How long the task may wait in its scope's line, by the number of tasks already waiting and by
    /// time (see ``APIConcurrencyPolicy/LineLimit``). `nil` (no limit) unless overridden. Read once, when the task is sent.
    var lineLimit: APIConcurrencyPolicy.LineLimit? { get }
    /// Whether and how a failed attempt is retried. `nil` (no retry) unless overridden.
    var retryPolicy: APIRetryPolicy? { get }
    /// The longest the task may take, all attempts and retry delays included, counted from
    /// ``APIManager/send(_:)``; past it the task fails with ``APIError/timedOut(deadline:attempts:)``.
    /// `nil` (no deadline) unless overridden.
    var deadline: TimeInterval? { get }
    /// The type ``acceptableStatusCodes`` is declared as: ``APIStatusCodes`` unless a conforming
    /// type declares a `Range<Int>`, `ClosedRange<Int>`, `Set<Int>` or `[Int]` instead (inferred).
    associatedtype AcceptableStatusCodes: APIStatusCodes.Convertible = APIStatusCodes
    /// The statuses the default ``APIManager/response(for:from:)`` accepts; any other fails the
    /// attempt with ``APIError/unacceptableStatus(_:message:)``. ``APIStatusCodes/success``
    /// (`200..<300`) unless overridden; ranges, single codes (`[200, 304]`) or both. A declaration
    /// as `Range<Int>` (as the first release had it), `ClosedRange<Int>`, `Set<Int>` or `[Int]`
    /// works too.
    var acceptableStatusCodes: AcceptableStatusCodes { get }
    /// How the task uses the engine's ``APIResponseCache``. `.networkOnly` unless overridden.
    var cacheOption: APIResponseCache.Option { get }
    /// Whether a successful response is stored in the engine's cache. `true` unless overridden.
    var shouldSaveInCache: Bool { get }
    /// Whose response this is: part of the cache key, so that one user's response is never served
    /// to another. `nil` (shared) unless overridden.
    var cachePartition: String? { get }
    /// Whether a response to a request that carries credentials may be stored. `false` unless
    /// overridden. Credentials are the headers ``APISecrets`` names (`Authorization`, `Cookie`, a
    /// custom auth header, persisted auth headers, `X-API-Key`…). When this is `true` and
    /// ``cachePartition`` is `nil`, the partition is a SHA-256 digest of those headers, so one
    /// user's response is never served to another (the secret itself is never stored).
    var cachesAuthenticatedResponses: Bool { get }
    /// The largest response body accepted, in bytes, counted as it arrives and after decompression;
    /// past it the transfer is cancelled and the attempt fails with
    /// ``APIError/responseTooLarge(limit:)``, never retried. `nil` for no limit. 64 MiB
    /// (``APIRequestDefaults/maxResponseBodySize``) unless overridden.
    var maxResponseBodySize: Int? { get }
    /// The largest `multipart/form-data` body (made from parameters holding a file) built in memory;
    /// a larger one is written to a temporary file and streamed from disk.
    /// ``APIRequestDefaults/multipartInMemoryLimit`` (10 MiB) unless overridden.
    var multipartInMemoryLimit: Int { get }
    /// Whether the task reports its upload and download progress (``APITransferProgress``) to the
    /// delegate and on ``AnyAPITask/progress``. `false` unless overridden: other tasks do no work for
    /// it.
    var reportsProgress: Bool { get }
    /// Where the response body is written instead of memory (see ``APIDownload``); `nil` (in
    /// memory) unless overridden. A download is never shared with another request, and uses the
    /// cache only when ``cacheOption`` asks (is not `.networkOnly`).
    var download: APIDownload? { get }
    /// An `Idempotency-Key` header (IETF httpapi draft) that makes a retried `POST` or `PATCH` safe:
    /// its value is generated once per task and sent unchanged on every attempt, retry and
    /// authentication replay, so a server that saw the first attempt recognises the others. Sent
    /// whatever the method, unless the request sets the header itself. `nil` (no header) unless
    /// overridden; ``APIIdempotencyKey/standard`` is `Idempotency-Key` with a random UUID.
    var idempotencyKey: APIIdempotencyKey? { get }
    /// How long, in seconds, a task waits for the network when it finds the device offline, instead
    /// of failing: sent while the engine knows it is offline, or whose attempt fails for want of a
    /// network (``APIEngine/isOfflineError(_:)``), it waits, holding its place in its scope, without
    /// spending a retry, and starts again when the network returns (``APIEngine/Connectivity``);
    /// past this long it ends with the error that found it offline (`0`: at once). `nil` unless
    /// overridden: a ``APIConcurrencyPolicy/durable`` task then waits as long as it takes, any other
    /// never waits.
    var connectivityWait: TimeInterval? { get }

    /// Adjusts the final `URLRequest`: the last step of
    /// ``makeURLRequest()``. Does nothing unless implemented. An error thrown here fails the attempt
    /// with ``APIError/invalidRequest(reason:underlying:)`` carrying it.
    func configure(_ urlRequest: inout URLRequest) throws
}

extension APIRequest {
    public var url: URL { APIRequestDefaults.relativeRoot }
    public var path: String { "" }
    public var method: HTTPMethod { .get }
    public var headers: [String: String] { [:] }
    /// No parameters unless overridden.
    public var parameters: APIParameters { .none }
    public var bodyEncoding: APIParameters.BodyEncoding { .json }
    public var queryEncoding: APIParameters.QueryEncoding { .default }
    public var body: APIRequestBody? { nil }
    public var authorization: APIAuthentication.Authorization? { nil }
    public var timeout: TimeInterval { 60 }
    public var totalTimeout: TimeInterval? { nil }
    public var concurrencyPolicy: APIConcurrencyPolicy { .default }
    public var priority: Int { 0 }
    public var concurrencyLimit: Int { 4 }
    public var debounceInterval: TimeInterval { 0.3 }
    public var throttleInterval: TimeInterval { 1 }
    public var throttleMode: APIConcurrencyPolicy.ThrottleMode { .wait }
    public var sharing: APIConcurrencyPolicy.Sharing { .never }
    public var concurrencyGroup: APIConcurrencyPolicy.Group? { nil }
    public var lineLimit: APIConcurrencyPolicy.LineLimit? { nil }
    public var concurrencyScope: String? { nil }
    public var retryPolicy: APIRetryPolicy? { nil }
    public var deadline: TimeInterval? { nil }
    public var cacheOption: APIResponseCache.Option { .networkOnly }
    public var shouldSaveInCache: Bool { true }
    public var cachePartition: String? { nil }
    public var cachesAuthenticatedResponses: Bool { false }
    public var maxResponseBodySize: Int? { APIRequestDefaults.maxResponseBodySize }
    public var multipartInMemoryLimit: Int { APIRequestDefaults.multipartInMemoryLimit }
    public var reportsProgress: Bool { false }
    public var download: APIDownload? { nil }
    public func configure(_ urlRequest: inout URLRequest) throws {}
    public var idempotencyKey: APIIdempotencyKey? { nil }
    public var connectivityWait: TimeInterval? { nil }
}

extension APIRequest where Self: Encodable {
    /// An `Encodable` request is its own parameters, placed by method. Keep the
    /// URL and other settings out of the encoded properties: make them computed properties, or list
    /// the parameter keys in `CodingKeys`.
    public var parameters: APIParameters { .encoding(self) }
}

/// Defaults shared by every request.
public enum APIRequestDefaults {
    /// The default ``APIRequest/url``: `/`, relative, joined to the engine's base URL.
    static let relativeRoot: URL = {
        guard let root = URL(string: "/") else { preconditionFailure("\"/\" is a URL reference") }
        return root
    }()
    /// 64 MiB: the default ``APIRequest/maxResponseBodySize``.
    public static let maxResponseBodySize = 64 << 20
    /// The largest `multipart/form-data` body built in memory: 10 MiB. A larger one is written to a
    /// temporary file and streamed from disk.
    public static let multipartInMemoryLimit = 10 << 20
    /// 8 MiB: the largest body of a download or a streamed response that is stored in the cache,
    /// when its request asks for the cache (see ``APIRequest/cacheOption``).
    public static let maxCachedTransferSize = 8 << 20
    /// The longest ``APIRequest/timeout`` or ``APIRequest/totalTimeout`` that counts: one year
    /// (31,536,000 s). A finite value above it counts as it (`1e300` would otherwise overflow the
    /// transports' clocks and mean no limit at all).
    public static let maxTimeout: TimeInterval = 31_536_000

    /// `seconds` as the transports count it: a finite value above ``maxTimeout`` is ``maxTimeout``;
    /// any other value as it is (the engine refuses a non-finite or non-positive one).
    static func clampedTimeout(_ seconds: TimeInterval) -> TimeInterval {
        seconds.isFinite && seconds > maxTimeout ? maxTimeout : seconds
    }
}

extension APIRequest where AcceptableStatusCodes == APIStatusCodes {
    /// ``APIStatusCodes/success`` (`200..<300`).
    public var acceptableStatusCodes: APIStatusCodes { .success }
}
