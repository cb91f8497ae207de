import Foundation

/// One page of a paginated resource: the typed response and the links its `Link` header gave.
public struct APIPage<Response: APIResponse>: Sendable {
    /// The page, as the manager built it.
    public let response: Response
    /// The page's number: 1 for the first.
    public let number: Int
    /// The URL the page came from (after redirects), when known.
    public let url: URL?
    /// The links of the page's `Link` header.
    public let links: [APILink]

    /// The target of the page's first link with the relation type, compared without regard to case.
    public func link(relation: String) -> URL? {
        let relation = relation.lowercased()
        return links.first { $0.relations.contains(relation) }?.target
    }
}

/// Why following the pages stopped with an error (carried by ``APIError/rejected(underlying:response:)``
/// with the page whose link is at fault).
public enum APIPaginationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The link leads back to a page already read (the same URL, up to the case of its scheme and
    /// host and the order of its query items).
    case loop(URL)

    public var description: String {
        switch self {
        case .loop(let url): return "the pages loop: the next link leads back to \(APISecrets.redacted(url))"
        }
    }
}

/// The pages of a paginated resource, each fetched when the loop asks for it (see
/// ``APIManager/pages(from:following:credentialOrigins:next:)``).
public struct APIPages<Manager: APIManager>: AsyncSequence, Sendable {
    public typealias Element = APIPage<Manager.Response>
    public typealias Failure = APIError

    let manager: Manager
    let first: Manager.Request
    let relation: String
    /// The origins the credentials may go to: the first page's and those the caller allows.
    let credentialOrigins: [Origin]
    let nextRequest: @Sendable (URL, Manager.Request) -> Manager.Request?

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(pages: self, pending: first)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pages: APIPages
        var pending: Manager.Request?
        var number = 0
        var visited: Set<String> = []
        /// Thrown by the next call: the page that led to it was yielded first.
        var failure: APIError?

        init(pages: APIPages, pending: Manager.Request) {
            self.pages = pages
            self.pending = pending
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(APIError) -> Element? {
            if let failure {
                self.failure = nil
                throw failure
            }
            guard let request = pending else { return nil }
            pending = nil
            // The first page goes as any request; pages reached through links carry credentials
            // only to the first page's origin and the allowed ones.
            let (response, raw) = try await pages.manager.responseAndRaw(
                for: request, credentialOrigins: number == 0 ? nil : pages.credentialOrigins)
            number += 1
            let links = raw?.links ?? []
            if let url = raw?.url { visited.insert(Self.identity(of: url)) }
            let page = APIPage(response: response, number: number, url: raw?.url, links: links)
            if let next = page.link(relation: pages.relation) {
                if visited.contains(Self.identity(of: next)), let raw {
                    failure = .rejected(underlying: APIPaginationError.loop(next), response: raw)
                } else {
                    visited.insert(Self.identity(of: next))
                    pending = pages.nextRequest(next, request)
                }
            }
            return page
        }

        /// What makes two page URLs the same page: scheme and host in any case, query items in any
        /// order, no fragment.
        static func identity(of url: URL) -> String {
            guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
                return url.absoluteString
            }
            components.scheme = components.scheme?.lowercased()
            components.host = components.host?.lowercased()
            components.fragment = nil
            if let items = components.queryItems, !items.isEmpty {
                components.queryItems = items.sorted { ($0.name, $0.value ?? "") < ($1.name, $1.value ?? "") }
            }
            return components.string ?? url.absoluteString
        }
    }
}

extension APIManager {
    /// The pages of a paginated resource: sends `first`, then, each time the loop asks for another
    /// page, the request `next` makes for the target of the previous page's `Link` header relation
    /// (`rel="next"` unless given). It ends after a page without that link or when `next` returns
    /// `nil`.
    ///
    /// ```swift
    /// for try await page in api.pages(from: IssuesRequest(), next: { url, _ in IssuesRequest(url: url) }) {
    ///     show(page.response.issues)
    /// }
    /// ```
    ///
    /// Each page is a task of this manager, under its request's policy, retry and cache. Leaving the
    /// loop sends nothing more; cancelling the Swift task that iterates cancels the page being
    /// fetched. A link that leads back to a page already read ends the sequence with
    /// ``APIError/rejected(underlying:response:)`` carrying ``APIPaginationError/loop(_:)``, after the
    /// page that gave it; a page that fails ends it with its error.
    ///
    /// Following a link obeys the credential rule of redirects: a page on another origin than the
    /// first page's (`first.url`) is sent without credentials (the request's `authorization`, an
    /// API-key default header, the session's credential, persisted auth headers, any header
    /// ``APISecrets`` names), and a `401` from it starts no refresh, unless its origin is in
    /// `credentialOrigins` (URLs whose scheme, host and port are trusted, such as
    /// `[URL(string: "https://api2.example.com")!]`).
    public func pages(
        from first: Request, following relation: String = "next", credentialOrigins: [URL] = [],
        next: @escaping @Sendable (_ url: URL, _ previous: Request) -> Request?
    ) -> APIPages<Self> {
        APIPages(
            manager: self, first: first, relation: relation,
            credentialOrigins: ([first.url] + credentialOrigins).compactMap { Origin($0) }, nextRequest: next)
    }
}
