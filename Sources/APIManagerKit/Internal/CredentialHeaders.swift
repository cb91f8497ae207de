/// The request headers that carry credentials in every request, lowercased: never cached unless a
/// request opts in, redacted in cURL descriptions, dropped on a redirect to another origin.
enum CredentialHeaders {
    static let standard: Set<String> = ["authorization", "proxy-authorization", "cookie"]
}
