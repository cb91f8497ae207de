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
        /// The transport attempts are sent with. ``URLSessionTransport/shared`` unless set.
        public var transport: any APITransport = URLSessionTransport.shared
        /// The clock retries and deadlines are timed with. A ``DispatchClock`` unless set.
        public var clock: any APIClock = DispatchClock()
        /// Where retry jitter comes from. The system's generator unless set.
        public var randomSource: any APIRetryPolicy.RandomSource = APIRetryPolicy.SystemRandomSource()
        /// Where events are delivered. `.queue(.main)` unless set.
        public var delivery: APIEngine.Delivery = .queue(.main)
        /// Where attempts are built and responses decoded. ``APIEngine/Execution/shared`` unless set.
        public var execution: APIEngine.Execution = .shared
        /// The response cache. None unless set; ``APIResponseCache/shared`` is a memory and disk cache.
        public var cache: APIResponseCache?
        /// The auth headers captured from responses and sent back. None unless set.
        public var persistedHeaders: APIAuthentication.PersistedHeaders?
        /// The steps every attempt goes through, in order. None unless set.
        public var interceptors: [any APIInterceptor] = []
        /// The credential every request carries and its single-flight refresh. None unless set.
        public var authentication: APIAuthentication?
        /// The headers added to every request that does not set them.
        /// ``APIEngine/DefaultHeaders/standard`` unless set.
        public var defaultHeaders: APIEngine.DefaultHeaders = .standard
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
        public var observers: [any APIEngine.Observer] = []

        /// The defaults: the same engine as `APIEngine()`.
        public init() {}
    }

    /// Makes an engine from one value (see ``Configuration``).
    public convenience init(configuration: Configuration) {
        self.init(
            transport: configuration.transport, clock: configuration.clock,
            randomSource: configuration.randomSource, delivery: configuration.delivery,
            execution: configuration.execution, cache: configuration.cache,
            persistedHeaders: configuration.persistedHeaders, interceptors: configuration.interceptors,
            authentication: configuration.authentication, defaultHeaders: configuration.defaultHeaders,
            cookies: configuration.cookies, circuitBreaker: configuration.circuitBreaker,
            retryBudget: configuration.retryBudget, durableStore: configuration.durableStore,
            connectivity: configuration.connectivity, observers: configuration.observers)
    }

    /// What the engine was made with, its delivery as it is now (``APIEngine/delivery`` may have changed
    /// it): `APIEngine(configuration: engine.configuration)` makes an engine with the same settings
    /// (and the same transport, cache, cookies and authentication, which are shared, not copied).
    public var configuration: Configuration {
        var configuration = Configuration()
        configuration.transport = transport
        configuration.clock = clock
        configuration.randomSource = randomSource
        configuration.delivery = delivery
        configuration.execution = execution
        configuration.cache = cache
        configuration.persistedHeaders = persistedHeaders
        configuration.interceptors = interceptors
        configuration.authentication = authentication
        configuration.defaultHeaders = defaultHeaders
        configuration.cookies = cookies
        configuration.circuitBreaker = circuitBreaker
        configuration.retryBudget = retryBudget
        configuration.durableStore = durableStore
        configuration.connectivity = connectivity
        configuration.observers = observers
        return configuration
    }
}
