import Foundation

extension APIRequestBody {
    /// A request body that a transport writes part by part as the connection takes it
    /// (``APITransportOptions/bodyWriter``): a multipart form too large for memory, its files read in
    /// chunks of 1 MiB as they are sent, never assembled in memory or on disk.
    ///
    /// ``write(to:)`` may be called more than once (a redirect that keeps the body): each call writes
    /// the whole body from the start. It blocks while it reads files, so call it off an event loop.
    public struct Writer: Sendable {
        /// The body's size in bytes: its `Content-Length`.
        public let length: Int64
        private let form: APIMultipartFormData

        /// `length` is the form's ``APIMultipartFormData/contentLength()``, as the request was built with.
        init(form: APIMultipartFormData, length: Int64) {
            self.form = form
            self.length = length
        }

        /// Writes the whole body, in order, to `sink`; rethrows what `sink` throws. Throws
        /// ``APIError/invalidRequest(reason:underlying:)`` when a file cannot be read, or when the
        /// form's boundary turns up in the content (its `Content-Type` was already sent, so it cannot
        /// change; a random boundary's 24 random letters and digits make this as good as impossible).
        public func write(to sink: (Data) throws -> Void) throws {
            try form.writeParts(to: sink)
        }
    }
}
