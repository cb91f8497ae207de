import Foundation

extension APIParameters {
    /// How body parameters become a request body; the body's content type is sent as `Content-Type`.
    ///
    /// ```swift
    /// var bodyEncoding: APIParameters.BodyEncoding { .form }
    /// ```
    ///
    /// Or `.json(encoder: snakeCaseEncoder)`, or your own:
    /// `.custom(contentType: "application/x-plist") { parameters in try encodePlist(parameters) }`.
    public struct BodyEncoding: Sendable {
        /// The media type of the bodies this encoding makes.
        public let contentType: String
        private let makeData: @Sendable (APIValue) throws -> Data

        /// A custom format. An error thrown by `encode` fails the attempt with
        /// ``APIError/invalidRequest(reason:underlying:)``.
        public static func custom(contentType: String, _ encode: @escaping @Sendable (APIValue) throws -> Data) -> Self
        {
            APIParameters.BodyEncoding(contentType: contentType, makeData: encode)
        }

        /// JSON, `application/json`, keys sorted. The default.
        public static let json = APIParameters.BodyEncoding.json(
            encoder: {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                return encoder
            }())

        /// JSON written by the given encoder (its output formatting applies).
        public static func json(encoder: JSONEncoder) -> Self {
            custom(contentType: "application/json") { value in try encoder.encode(value) }
        }

        /// `application/x-www-form-urlencoded`, with brackets for arrays and nested objects.
        public static let form = APIParameters.BodyEncoding.form(.default)

        /// `application/x-www-form-urlencoded` with the given pair encoding. The value must be an object.
        public static func form(_ encoding: APIParameters.QueryEncoding) -> Self {
            custom(contentType: "application/x-www-form-urlencoded") { value in
                guard let members = value.objectValue else { throw FormBodyError() }
                return Data(try encoding.encode(members).utf8)
            }
        }

        /// The body for `value`.
        ///
        /// - Throws: ``APIError/invalidRequest(reason:underlying:)`` when the format rejects the value.
        public func body(for value: APIValue) throws(APIError) -> APIRequestBody {
            do {
                return APIRequestBody(data: try makeData(value), contentType: contentType)
            } catch let error as APIError {
                throw error
            } catch {
                throw .invalidRequest(
                    reason: "the body parameters could not be encoded as \(contentType)", underlying: error)
            }
        }
    }
}

private struct FormBodyError: Error, CustomStringConvertible {
    var description: String { "a form body needs an object of name-value pairs, not a bare value or an array" }
}
