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
    /// How the generated value goes on the wire.
    public enum Format: Sendable, Hashable {
        /// As it is: `Idempotency-Key: 8e03978e-40d5-43e8-bc93-6894a57f9324`. What Stripe, Adyen and
        /// most payment APIs read, and the default.
        case bare
        /// As a structured-field string (RFC 9651 §3.3.3), as draft-ietf-httpapi-idempotency-key-header
        /// defines the field: `Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`, with `"` and
        /// `\` escaped. For servers that follow the draft to the letter. A value with a character
        /// outside printable ASCII cannot be one: the task fails before sending.
        case structuredFieldString
    }

    /// The header's name. `Idempotency-Key` unless given.
    public var headerName: String
    /// Makes a task's value; called once per task, on the thread that sends it. A random UUID
    /// unless given.
    public var generate: @Sendable () -> String
    /// How the value goes on the wire. ``Format/bare`` unless given.
    public var format: Format

    /// - Parameters:
    ///   - headerName: `Idempotency-Key` unless given.
    ///   - format: ``Format/bare`` unless given.
    ///   - generate: a random UUID (`UUID().uuidString`) unless given.
    public init(
        headerName: String = "Idempotency-Key", format: Format = .bare,
        generate: @escaping @Sendable () -> String = { UUID().uuidString }
    ) {
        self.headerName = headerName
        self.format = format
        self.generate = generate
    }

    /// `Idempotency-Key` with a random UUID, bare.
    public static let standard = APIIdempotencyKey()

    /// `Idempotency-Key` with a random UUID as a structured-field string, as the IETF draft writes it.
    public static let draft = APIIdempotencyKey(format: .structuredFieldString)

    /// The header a task carries: the generated value in this key's format, and why it cannot be
    /// sent (`nil` when it can).
    func makeHeader() -> IdempotencyHeader {
        let generated = generate()
        switch format {
        case .bare:
            return IdempotencyHeader(name: headerName, value: generated)
        case .structuredFieldString:
            guard generated.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) else {
                return IdempotencyHeader(
                    name: headerName, value: generated,
                    refusal: "the idempotency key \(generated.debugDescription) is not printable ASCII, "
                        + "so it cannot be a structured-field string")
            }
            var quoted = "\""
            for character in generated {
                if character == "\"" || character == "\\" { quoted.append("\\") }
                quoted.append(character)
            }
            quoted.append("\"")
            return IdempotencyHeader(name: headerName, value: quoted)
        }
    }
}

/// A task's idempotency header (see ``APIIdempotencyKey``), made when it is sent.
struct IdempotencyHeader: Sendable, Equatable {
    let name: String
    let value: String
    /// Why the value cannot be sent; `nil` when it can.
    var refusal: String? = nil
}
