import APIManagerKit
import APIManagerKitTesting
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// A service object with typed delegate callbacks: the profile service forwards each typed result
// to its own delegate protocol, and the screen implements that protocol's methods only.

struct ProfileRequest: APIRequest {
    let url: URL
    let path: String
    var parameters: APIParameters = .none
}

/// httpbin's `/get` echoes the query under `args`; the simulated backend answers the same shape.
struct Profile: APIResponse, Decodable {
    let name: String
    let since: String
    static var keyPath: String? { "args" }
}

protocol ProfileServiceDelegate: APIManagerDelegate {
    func profileService(_ service: ProfileService, didLoad profile: Profile)
    func profileService(_ service: ProfileService, didFailWith error: APIError)
}

final class ProfileService: APIManager {
    typealias Request = ProfileRequest
    typealias Response = Profile
    typealias Delegate = any ProfileServiceDelegate

    let engine: APIEngine
    init(engine: APIEngine) { self.engine = engine }

    func task(_ task: APITask<ProfileRequest>, didFinishWith response: Profile) {
        delegate?.profileService(self, didLoad: response)
    }

    func task(_ task: APITask<ProfileRequest>, didFailWith error: APIError) {
        delegate?.profileService(self, didFailWith: error)
    }
}

/// The screen: it knows profiles and errors, never raw responses or `Any`.
final class ProfileScreen: ProfileServiceDelegate, @unchecked Sendable {
    // @unchecked: immutable; the timeline is thread-safe.
    let timeline: Timeline
    init(timeline: Timeline) { self.timeline = timeline }

    func profileService(_ service: ProfileService, didLoad profile: Profile) {
        timeline.note("profile screen", "shows \(profile.name), member since \(profile.since)")
    }

    func profileService(_ service: ProfileService, didFailWith error: APIError) {
        timeline.note("profile screen", "shows an error: \(error.statusCode.map { "status \($0)" } ?? "\(error)")")
    }
}

extension Story {
    static let profile = Story(
        name: "profile", title: "Profile service: typed results reach its own delegate protocol (typed delegate)"
    ) { stage in
        stage.stub(
            "/profile/ada",
            MockTransport.Reply.json(#"{"args":{"name":"Ada Lovelace","since":"1843"}}"#).after(0.2),
            live: "get")
        stage.stub("/profile/missing", MockTransport.Reply.status(404).after(0.2), live: "status/404")
        let service = ProfileService(
            engine: APIEngine(
                transport: stage.transport, clock: stage.clock, delivery: .inline,
                execution: stage.isLive ? .concurrent() : .inline))
        let screen = ProfileScreen(timeline: stage.timeline)
        service.delegate = screen
        service.send(
            ProfileRequest(
                url: stage.baseURL, path: stage.path("/profile/ada"),
                parameters: ["name": "Ada Lovelace", "since": "1843"]))
        stage.at(0.5)
        service.send(ProfileRequest(url: stage.baseURL, path: stage.path("/profile/missing")))
        stage.at(1)
    }
}
