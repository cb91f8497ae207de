extension APIClient {
    /// A request that names the response it gets, so that one ``APIClient`` sends requests of many
    /// types, each answered with its own typed `Response` (as APIKit's and Get's requests do).
    ///
    /// ```swift
    /// struct GetProduct: APIClient.Endpoint {
    ///     typealias Response = Product
    ///     let id: Int
    ///     var path: String { "products/\(id)" }
    /// }
    ///
    /// let product = try await client.response(for: GetProduct(id: 2))
    /// ```
    ///
    /// Everything else is an ``APIRequest``'s: its method, headers, parameters, policy, retry,
    /// cache, deadline. A manager whose `Request` is an endpoint type sends it too (the manager's
    /// own `Response` is the one used there).
    public protocol Endpoint: APIRequest {
        /// The typed result of this request.
        associatedtype Response: APIResponse
    }
}
