import Foundation

/// Clients beyond URLSession's: none here. The AsyncHTTPClient transport's package builds this
/// benchmark again (its `HTTPBenchmarkAHC` links these sources) with a version of this file that adds
/// `ahc` (raw AsyncHTTPClient) and `managerAHC` (a manager on `AsyncHTTPClientTransport`).
func extraClients() -> [String: (URL, @escaping @Sendable (Bool) -> Void) -> Void] { [:] }
