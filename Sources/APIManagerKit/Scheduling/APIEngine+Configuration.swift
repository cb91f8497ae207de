import Foundation

extension APIEngine {
    /// Everything an engine is made with, as one value (as AsyncHTTPClient's
    /// `HTTPClient.Configuration` is): start from the defaults and change what you need.
    ///
    /// ```swift
    /// var configuration = APIEngine.Configuration()
    /// configuration.cache = .shared
    /// configuration.circuitBreaker = APIEngine.CircuitBreaker()
    /// let engine = APIEngine(configuration: configuration)
    /// ```
    ///
    /// A test sets the transport, the clock and the two "on the thread at hand" settings:
    /// `configuration.transport = mock; configuration.clock = clock; configuration.delivery = .inline;
    /// configuration.execution = .inline`. Each default is the same as the one of
    /// ``APIEngine/init(transport:clock:randomSource:delivery:execution:cache:persistedHeaders:interceptors:authentication:defaultHeaders:cookies:circuitBreaker:retryBudget:)``.
    public struct Configuration: Sendable {
        /// The URL a request's relative URL is joined to: a request that gives only a ``APIRequest/path``
        /// (its ``APIRequest/url`` left as is), or a `url` without a scheme, is sent to this URL's path
        /// followed by its own, with exactly one `/` between them (`https://api.example.com/v1` and
        /// `products/2` or `/products/2`: `https://api.example.com/v1/products/2`). A request's absolute
        /// `url` wins. None unless set: a relative request then fails with
        /// ``APIError/invalidRequest(reason:underlying:)`` naming this setting.
        public var baseURL: URL?
        /// The transport attempts are sent with. ``URLSessionTransport/shared`` unless set.
        public var transport: any APITransport
        /// The clock retries and deadlines are timed with. A ``DispatchClock`` unless set.
        public var clock: any APIClock
        /// Where retry jitter comes from. The system's generator unless set.
        public var randomSource: any APIRetryPolicy.RandomSource
        /// Where events are delivered. `.queue(.main)` unless set.
        public var delivery: APIEngine.Delivery
        /// Where attempts are built and responses decoded. ``APIEngine/Execution/shared`` unless set.
        public var execution: APIEngine.Execution
        /// The response cache. None unless set; ``APIResponseCache/shared`` is a memory and disk cache.
        public var cache: APIResponseCache?
        /// The auth headers captured from responses and sent back. None unless set.
        public var persistedHeaders: APIAuthentication.PersistedHeaders?
        /// The steps every attempt goes through, in order. None unless set.
        public var interceptors: [any APIInterceptor]
        /// The credential every request carries and its single-flight refresh. None unless set.
        public var authentication: APIAuthentication?
        /// The headers added to every request that does not set them.
        /// ``APIEngine/DefaultHeaders/standard`` unless set.
        public var defaultHeaders: APIEngine.DefaultHeaders
        /// The cookies stored from responses and sent back. None unless set: no cookie is stored or sent.
        public var cookies: APICookieStore?
        /// Fails attempts fast while an origin keeps failing. None unless set.
        public var circuitBreaker: APIEngine.CircuitBreaker?
        /// Bounds retries to a fraction of requests. None unless set.
        public var retryBudget: APIEngine.RetryBudget?
        /// Where the tasks of ``APIConcurrencyPolicy/durable`` lines are kept until they end. None unless
        /// given: a durable task then ends at once with ``APIError/durableStore(reason:underlying:)``.
        public var durableStore: APIEngine.DurableStore?
        /// What tells the engine whether the network is reachable, for the tasks that wait for it
        /// (``APIRequest/connectivityWait``). None unless given: failures alone tell it (see
        /// ``APIEngine/Connectivity``).
        public var connectivity: (any APIEngine.Connectivity)?
        /// Told everything the engine does to each task and attempt, in order (see
        /// ``APIEngine/Observer``). None unless given: then observing costs nothing.
        public var observers: [any APIEngine.Observer]

        /// The defaults: the same engine as `APIEngine()`.
        public init() {
            self.init(
                transport: URLSessionTransport.shared, clock: DispatchClock(),
                randomSource: APIRetryPolicy.SystemRandomSource(), delivery: .queue(.main), execution: .shared,
                interceptors: [], defaultHeaders: .standard, observers: [])
        }

        /// Every setting given: no default is evaluated (``init()``'s make the shared URL session).
        init(
            transport: any APITransport, clock: any APIClock, randomSource: any APIRetryPolicy.RandomSource,
            delivery: APIEngine.Delivery, execution: APIEngine.Execution, cache: APIResponseCache? = nil,
            persistedHeaders: APIAuthentication.PersistedHeaders? = nil, interceptors: [any APIInterceptor],
            authentication: APIAuthentication? = nil, defaultHeaders: APIEngine.DefaultHeaders,
            cookies: APICookieStore? = nil, circuitBreaker: APIEngine.CircuitBreaker? = nil,
            retryBudget: APIEngine.RetryBudget? = nil, durableStore: APIEngine.DurableStore? = nil,
            connectivity: (any APIEngine.Connectivity)? = nil, observers: [any APIEngine.Observer],
            baseURL: URL? = nil
        ) {
            self.baseURL = baseURL
            self.transport = transport
            self.clock = clock
            self.randomSource = randomSource
            self.delivery = delivery
            self.execution = execution
            self.cache = cache
            self.persistedHeaders = persistedHeaders
            self.interceptors = interceptors
            self.authentication = authentication
            self.defaultHeaders = defaultHeaders
            self.cookies = cookies
            self.circuitBreaker = circuitBreaker
            self.retryBudget = retryBudget
            self.durableStore = durableStore
            self.connectivity = connectivity
            self.observers = observers
        }
    }

    /// What the engine was made with, its delivery as it is now (``APIEngine/delivery`` may have changed
    /// it): `APIEngine(configuration: engine.configuration)` makes an engine with the same settings
    /// (and the same transport, cache, cookies and authentication, which are shared, not copied).
    public var configuration: Configuration {
        var configuration = settings
        configuration.delivery = delivery
        return configuration
    }

    // The settings, as the engine was made with them (``Configuration`` says what each is). A
    // setting is written twice: in `Configuration` and here. Inside the engine, a step that runs
    // for every request reads `settings.x` itself: an accessor returns a copy, and copying the
    // optional `persistedHeaders` out of it cost about 150 instructions a request (SendCost).

    /// The URL a request's relative URL is joined to; `nil` for none (``Configuration/baseURL``).
    public var baseURL: URL? { settings.baseURL }
    /// The transport attempts are sent with (``Configuration/transport``).
    public var transport: any APITransport { settings.transport }
    /// The clock retries and deadlines are timed with (``Configuration/clock``).
    public var clock: any APIClock { settings.clock }
    /// Where retry jitter comes from (``Configuration/randomSource``).
    public var randomSource: any APIRetryPolicy.RandomSource { settings.randomSource }
    /// Where attempts are built and responses decoded (``Configuration/execution``, ``APIEngine/Execution``).
    public var execution: APIEngine.Execution { settings.execution }
    /// The response cache requests read and fill through ``APIRequest/cacheOption``; `nil` for none
    /// (``Configuration/cache``).
    public var cache: APIResponseCache? { settings.cache }
    /// The auth headers captured from responses and sent back; `nil` for none
    /// (``Configuration/persistedHeaders``).
    public var persistedHeaders: APIAuthentication.PersistedHeaders? { settings.persistedHeaders }
    /// The steps every attempt goes through, in order (``Configuration/interceptors``, ``APIInterceptor``).
    public var interceptors: [any APIInterceptor] { settings.interceptors }
    /// The credential every request carries and its single-flight refresh; `nil` for none
    /// (``Configuration/authentication``, ``APIAuthentication``).
    public var authentication: APIAuthentication? { settings.authentication }
    /// The headers added to every request that does not set them (``Configuration/defaultHeaders``).
    public var defaultHeaders: APIEngine.DefaultHeaders { settings.defaultHeaders }
    /// The cookies stored from responses and sent back; `nil` for none (``Configuration/cookies``).
    public var cookies: APICookieStore? { settings.cookies }
    /// Fails attempts fast while an origin keeps failing; `nil` for none (``Configuration/circuitBreaker``).
    public var circuitBreaker: APIEngine.CircuitBreaker? { settings.circuitBreaker }
    /// Bounds retries to a fraction of requests; `nil` for none (``Configuration/retryBudget``).
    public var retryBudget: APIEngine.RetryBudget? { settings.retryBudget }
    /// Where the tasks of ``APIConcurrencyPolicy/durable`` lines are kept until they end; `nil` for
    /// none (``Configuration/durableStore``).
    public var durableStore: APIEngine.DurableStore? { settings.durableStore }
    /// What tells the engine whether the network is reachable; `nil` for none: then failures alone
    /// tell it (``Configuration/connectivity``).
    public var connectivity: (any APIEngine.Connectivity)? { settings.connectivity }
    /// Told everything the engine does to each task and attempt (``Configuration/observers``,
    /// ``Observer``); none unless the engine was made with some.
    public var observers: [any APIEngine.Observer] { settings.observers }
}
