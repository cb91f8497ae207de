import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Story {
    static let session = Story(
        name: "session",
        title: "Expired token: three screens refused at once, one refresh serves them all (APIAuthentication)",
        authentication: { setting in
            // Live, a realm of the integration server's own, so runs never meet.
            let realm = "playground-\(UUID().uuidString.prefix(8))"
            let tokenURL = URL(string: "fixture/token/\(realm)?delay=0.3", relativeTo: setting.baseURL)?.absoluteURL
            let service = TokenService(setting: setting, tokenURL: setting.isLive ? tokenURL : nil, realm: realm)
            let authentication = APIAuthentication(authenticator: service, clock: setting.clock)
            authentication.signIn(with: APIAuthentication.Credential(accessToken: "expired", refreshToken: "start"))
            return authentication
        },
        run: { stage in
            let realm = (stage.authentication?.authenticator as? TokenService)?.realm ?? ""
            stage.stub("/me", live: "fixture/protected/\(realm)") { (request: URLRequest) -> MockTransport.Reply in
                let accepted = request.value(forHTTPHeaderField: "Authorization") == "Bearer token-1"
                return (accepted ? MockTransport.Reply.json(#"{"value":"token-1"}"#) : .status(401)).after(0.2)
            }
            let screens = ["profile screen", "orders screen", "cart badge"].map { stage.send($0, "/me") }
            stage.at(2)
            let finished = screens.filter { $0.state.isTerminal && $0.responseSource != nil }.count
            let refreshes = stage.authentication?.refreshCount ?? 0
            stage.timeline.note("summary", "\(finished) of 3 screens loaded after \(refreshes) refresh(es)")
        })
}

/// Renews the story's token: on the simulated backend after 0.3 s of virtual time, live at the
/// integration server's token endpoint. Notes each refresh on the timeline.
final class TokenService: APIAuthentication.Authenticator, @unchecked Sendable {
    // @unchecked: immutable after init; the clock and timeline are thread-safe.
    let setting: Stage.Setting
    let tokenURL: URL?
    let realm: String

    init(setting: Stage.Setting, tokenURL: URL?, realm: String) {
        self.setting = setting
        self.tokenURL = tokenURL
        self.realm = realm
    }

    struct Refused: Error { let status: Int }

    func refresh(_ credential: APIAuthentication.Credential) async throws -> APIAuthentication.Credential {
        setting.timeline.note("token", "refresh starts: the server refused \"\(credential.accessToken)\"")
        let renewed: APIAuthentication.Credential
        if let tokenURL {
            var request = URLRequest(url: tokenURL)
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data("refresh_token=\(credential.refreshToken ?? "")".utf8)
            let (data, response) = try await URLSession.shared.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            guard status == 200 else { throw Refused(status: status) }
            struct Tokens: Decodable {
                let accessToken: String
                let refreshToken: String
            }
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let tokens = try decoder.decode(Tokens.self, from: data)
            renewed = APIAuthentication.Credential(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
        } else {
            // Virtual time: resumed when the story's clock passes 0.3 s from now.
            let clock = setting.clock
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                _ = clock.schedule(after: 0.3) { continuation.resume() }
            }
            renewed = APIAuthentication.Credential(accessToken: "token-1", refreshToken: "refresh-1")
        }
        setting.timeline.note("token", "refresh ends: requests go again with the new token")
        return renewed
    }
}
