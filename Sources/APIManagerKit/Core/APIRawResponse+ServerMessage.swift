import Foundation

extension APIRawResponse {
    /// Finds a server's own explanation in an error body: the default of
    /// ``APIManager/errorMessage(in:)``.
    public enum ServerMessage {
        /// The top-level keys looked up, in order, after which `errors[0].message` is tried.
        public static let defaultKeys = ["message", "msg", "error", "err", "error_description"]

        /// The first string (or the `message` of an object) found under `keys` in a JSON object body,
        /// else `errors[0].message`; a short plain-text body is returned as it is. `nil` when the body
        /// holds none of these.
        public static func find(in response: APIRawResponse, keys: [String] = defaultKeys) -> String? {
            guard !response.body.isEmpty else { return nil }
            guard let object = try? JSONSerialization.jsonObject(with: response.body, options: [.fragmentsAllowed])
            else {
                return plainText(response)
            }
            guard let dictionary = object as? [String: Any] else {
                return (object as? String).flatMap(nonEmpty)
            }
            for key in keys {
                if let text = (dictionary[key] as? String).flatMap(nonEmpty) { return text }
                if let nested = dictionary[key] as? [String: Any],
                    let text = (nested["message"] as? String).flatMap(nonEmpty)
                {
                    return text
                }
            }
            if let errors = dictionary["errors"] as? [Any], let first = errors.first {
                if let text = ((first as? [String: Any])?["message"] as? String).flatMap(nonEmpty) { return text }
                if let text = (first as? String).flatMap(nonEmpty) { return text }
            }
            return nil
        }

        private static func nonEmpty(_ text: String) -> String? {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            return trimmed.isEmpty ? nil : trimmed
        }

        /// A plain-text body of at most 200 characters, on one line; HTML pages are not messages.
        private static func plainText(_ response: APIRawResponse) -> String? {
            let type = response.value(forHeader: "Content-Type")?.lowercased() ?? ""
            guard type.hasPrefix("text/plain"), response.body.count <= 800,
                let text = String(data: response.body, encoding: .utf8).flatMap(nonEmpty), text.count <= 200
            else { return nil }
            return text.replacingOccurrences(of: "\n", with: " ")
        }
    }
}
