import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The stages of an attempt (see ``Attempt/Stage``): each takes the attempt and says in an
/// ``Attempt/Outcome`` what it did. A stage never takes the engine's lock and never calls the
/// driver; an async stage hands its end to ``APIEngine/resume(_:after:with:hop:)``.
extension APIEngine {
    func perform(_ stage: Attempt.Stage, of attempt: Attempt) -> Attempt.Outcome {
        switch stage {
        case .authenticate: return authenticate(attempt)
        case .adapt: return adapt(attempt)
        case .prepare: return prepare(attempt)
        case .lookUp: return lookUp(attempt)
        case .send: return send(attempt)
        case .receive: return receive(attempt)
        case .inspect: return inspect(attempt)
        case .checkRefusal: return checkRefusal(attempt)
        case .renew: return renew(attempt)
        case .respond: return respond(attempt)
        }
    }

    /// Puts the authentication's credential on the request, once no refresh runs.
    private func authenticate(_ attempt: Attempt) -> Attempt.Outcome {
        guard let authentication else { return .next }
        // The refresh may end on another engine's thread: the attempt goes on on this engine's.
        let access = authentication.access { [weak self] result in
            self?.resume(attempt, after: .authenticate, with: Self.granted(result, attempt, authentication), hop: true)
        }
        switch access {
        case .now(let result): return Self.granted(result, attempt, authentication)
        case .waiting(let wait): return .waiting(wait)
        }
    }

    private static func granted(
        _ result: Result<APIAuthentication.Grant, APIError>, _ attempt: Attempt, _ authentication: APIAuthentication
    ) -> Attempt.Outcome {
        switch result {
        case .failure(let error):
            return .failed(error)
        case .success(let grant):
            attempt.machine.grant = grant
            if let credential = grant.credential {
                let before = attempt.machine.request.allHTTPHeaderFields ?? [:]
                authentication.authenticator.apply(credential, to: &attempt.machine.request)
                attempt.machine.hasUncheckedHeaders = true
                // Whatever the authenticator set is a credential: redacted, and dropped on a
                // redirect to another origin.
                for (name, value) in attempt.machine.request.allHTTPHeaderFields ?? [:] where before[name] != value {
                    attempt.machine.sensitiveHeaders.insert(name)
                }
            }
            return .next
        }
    }

    /// Passes the request through the adapters, in order, in a Swift task of its own.
    private func adapt(_ attempt: Attempt) -> Attempt.Outcome {
        let adapters = self.adapters
        guard !adapters.isEmpty else { return .next }
        // The engine is held weakly while user code runs, so that a manager released meanwhile
        // ends its tasks (and cancels this Swift task) instead of waiting for the interceptor.
        let work = asyncWork.start { [weak self] in
            let outcome: Attempt.Outcome
            do {
                var request = attempt.machine.request
                for adapter in adapters {
                    request = try await adapter.adapt(request, for: attempt.context)
                }
                attempt.machine.request = request
                attempt.machine.hasUncheckedHeaders = true
                outcome = .next
            } catch {
                outcome = .failed(
                    error as? APIError
                        ?? .invalidRequest(reason: "an interceptor refused the request", underlying: error))
            }
            self?.resume(attempt, after: .adapt, with: outcome, hop: false)
        }
        return .waiting(work)
    }

    /// The link rule, the request's check, and a credential that changed meanwhile.
    private func prepare(_ attempt: Attempt) -> Attempt.Outcome {
        if let allowed = attempt.task.bag.credentialOrigins,
            !allowed.contains(where: { $0 == Origin(attempt.machine.request.url) })
        {
            // A page on another origin: it goes without credentials, as after a redirect, and a
            // refusal of it is an ordinary response (no refresh).
            CredentialHeaders.remove(from: &attempt.machine.request, marked: attempt.machine.sensitiveHeaders)
            attempt.machine.grant = nil
        }
        do {
            try BuildRequestStage.check(
                attempt.machine.request, hasUncheckedHeaders: attempt.machine.hasUncheckedHeaders,
                totalTimeout: attempt.task.bag.totalTimeout)
        } catch {
            return .failed(error)
        }
        // A refresh started (or the credential changed) while the adapters ran: the request does
        // not go with the old credential, it starts over and gets the new one.
        if let grant = attempt.machine.grant, let authentication, !authentication.isCurrent(grant) {
            return .startOver(isReplay: attempt.isReplay)
        }
        return .next
    }

    /// What the request's ``APIResponseCache/Option`` makes of the stored entry (see ``CacheLookupStage``).
    private func lookUp(_ attempt: Attempt) -> Attempt.Outcome {
        // A streamed body (a file) has no bytes for a key: never cached. A download or a streamed
        // response uses the cache only when its request asks (see TransferCacheStage).
        let task = attempt.task
        let isTransfer = task.bag.isTransfer
        guard let cache, attempt.machine.request.httpBodyStream == nil,
            !isTransfer || task.bag.cacheSettings.option != .networkOnly
        else {
            return .readyToSend(cachedCopy: nil)
        }
        var copy: AnyAPITask.BuiltResponse?
        switch CacheLookupStage.lookUp(
            cache, settings: task.bag.cacheSettings, attempt: attempt.number, request: attempt.machine.request,
            sensitiveHeaders: attempt.machine.sensitiveHeaders, writesBehind: writesBehind)
        {
        case .answer(let stored, let otherwise):
            if isTransfer {
                // Written to the destination, or handed to the stream, as the network's would be.
                switch TransferCacheStage.deliver(stored, to: task, requestURL: attempt.machine.request.url) {
                case .answered(let response): return .answered(response, .cache)
                case .failed(let error): return .failed(error)
                case .unusable: break  // the network answers instead
                }
            } else if case .success(let response) = task.buildResponse(stored) {
                return .answered(response, .cache)
            }
            cache.remove(for: otherwise.key)  // no longer builds a response: the network answers
            attempt.machine.cache = otherwise
        case .copyFirst(_, let then) where isTransfer:
            // A file or a stream takes one body: the network's, revalidating the stored one.
            attempt.machine.cache = then
        case .copyFirst(let stored, var then):
            if !attempt.isReplay {
                if case .success(let response) = task.buildResponse(stored) {
                    copy = response
                } else {
                    cache.remove(for: then.key)
                    then.revalidating = nil
                }
            }
            attempt.machine.cache = then
        case .network(let context):
            attempt.machine.cache = context
        }
        attempt.machine.cache?.addConditionalHeaders(to: &attempt.machine.request)
        return .readyToSend(cachedCopy: copy)
    }

    /// Hands the request to the transport; its answer resumes the attempt at ``Attempt/Stage/receive``.
    private func send(_ attempt: Attempt) -> Attempt.Outcome {
        var options = APITransportOptions(
            sensitiveHeaders: attempt.machine.sensitiveHeaders,
            maxResponseBodySize: attempt.task.bag.maxResponseBodySize,
            cookies: cookies, cookieDate: cookies == nil ? nil : clock.date, totalTimeout: attempt.task.bag.totalTimeout
        )
        if let body = attempt.machine.bodyFile {
            if let writer = body.deferredWriter { options.bodyWriter = writer } else { options.bodyFile = body.url }
        }
        if attempt.task.bag.isTransfer {
            switch AttemptBody.prepare(
                for: attempt.task, request: &attempt.machine.request, keepsCopy: attempt.machine.cache != nil)
            {
            case .success(let body):
                attempt.machine.body = body
                body.apply(to: &options)
            case .failure(let error):
                return .failed(error)
            }
        }
        if attempt.task.bag.progressStreams != nil {
            let channel = ProgressChannel(
                engine: self, task: attempt.task, attempt: attempt.number, uploadBytes: Self.bodySize(of: attempt),
                download: attempt.machine.body.file)
            attempt.machine.progress = channel
            options.progress = { channel.report($0, bytes: $1, expected: $2) }
        }
        if !attempt.observers.isEmpty {
            let measured = LockedState(Attempt.Measured())
            attempt.machine.measured = measured
            options.headReceived = { [clock] in measured.withLock { $0.headReceived = $0.headReceived ?? clock.now } }
            options.phasesMeasured = { phases in measured.withLock { $0.phases = phases } }
            options.protocolVersionReceived = { version in measured.withLock { $0.protocolVersion = version } }
        }
        attempt.machine.sending(options, at: clock.now)
        // A streamed body (a file) has no bytes to compare, and a download has a file of its own:
        // never shared.
        if attempt.task.bag.sharing != .never, attempt.task.bag.sharing.allows(attempt.machine.request.httpMethod),
            attempt.machine.request.httpBodyStream == nil, attempt.machine.body.isMemory
        {
            return sendShared(attempt, options: options)
        }
        letObserversPrepare(attempt)
        let request: APIHTTPRequest
        do {
            request = try APIHTTPRequest(
                attempt.machine.request, bodyFile: attempt.machine.bodyFile, totalTimeout: attempt.task.bag.totalTimeout
            )
        } catch {
            return .failed(error)
        }
        tellSent(attempt)
        // Off the transport's callback queue: responses of different tasks build in parallel.
        let handle = transport.send(request, options: options) { attempt.transportAnswered($0) }
        return .sent(attempt.machine.body.handle(handle))
    }

    /// Sends the attempt on the flight of its identical requests, or joins it (see
    /// ``SharedFlights``); the handle the machine keeps leaves the flight.
    private func sendShared(_ attempt: Attempt, options: APITransportOptions) -> Attempt.Outcome {
        let task = attempt.task
        // The key is the request as the user's hooks made it: what observers add (a trace's
        // context) does not tell identical requests apart.
        let key = SharedFlights.Key(
            attempt.machine.request, bodyLimit: task.bag.maxResponseBodySize,
            partition: task.bag.cacheSettings.partition)
        attempt.machine.flightKey = key
        switch sharedFlights.board(attempt, key: key) {
        case .joined(let leader, let member):
            tellSent(attempt, sharedWith: leader)
            return .sent(member)
        case .leads(let flight, let member):
            letObserversPrepare(attempt)
            // Built by the launch when it cannot be here: the flight then ends with the error.
            let request = try? APIHTTPRequest(
                attempt.machine.request, bodyFile: nil, totalTimeout: task.bag.totalTimeout)
            tellSent(attempt)
            launch(SharedFlights.Launch(leader: attempt, request: request, key: key, flight: flight))
            return .sent(member)
        }
    }

    /// The observers add to the request what travels with it on the wire (a trace's context), just
    /// before the transport has it (see ``APIEngine/Observer/willSend(_:attempt:of:)``).
    private func letObserversPrepare(_ attempt: Attempt) {
        for observer in attempt.observers {
            observer.willSend(&attempt.machine.request, attempt: attempt.number, of: attempt.task)
        }
    }

    /// Calls the transport for a shared flight: its answer goes to every attempt on board.
    func launch(_ launch: SharedFlights.Launch) {
        let flights = sharedFlights
        let attempt = launch.leader
        let options =
            attempt.machine.sent?.options
            ?? APITransportOptions(
                sensitiveHeaders: attempt.machine.sensitiveHeaders,
                maxResponseBodySize: attempt.task.bag.maxResponseBodySize)
        let request: APIHTTPRequest
        do {
            if let built = launch.request {
                request = built
            } else {
                // A leader that took a left flight over: its request goes on the wire now.
                letObserversPrepare(attempt)
                request = try APIHTTPRequest(
                    attempt.machine.request, bodyFile: nil, totalTimeout: attempt.task.bag.totalTimeout)
            }
        } catch {
            flights.answered(launch.key, flight: launch.flight, with: .failure(error))
            return
        }
        let handle = transport.send(request, options: options) { result in
            flights.answered(launch.key, flight: launch.flight, with: result)
        }
        flights.took(launch.key, flight: launch.flight, handle: handle)
    }

    /// Tells the attempt's observers that its request went out, or joined `sharedWith`'s.
    private func tellSent(_ attempt: Attempt, sharedWith: UInt64? = nil) {
        guard !attempt.observers.isEmpty else { return }
        tellObservers(
            .attemptSent(attempt: attempt.number, request: attempt.machine.request, sharedWith: sharedWith),
            of: attempt, at: attempt.machine.sent?.at, secretNames: attempt.machine.sensitiveHeaders)
    }

    /// The size of the attempt's request body (its upload), `nil` for none.
    private static func bodySize(of attempt: Attempt) -> Int64? {
        if let file = attempt.machine.bodyFile, file.deferredWriter == nil { return try? FileSource.size(of: file.url) }
        if let body = attempt.machine.request.httpBody, !body.isEmpty { return Int64(body.count) }
        // A stream body of a known length (APIRequestBody.stream(length:)).
        if attempt.machine.request.httpBodyStream != nil {
            return attempt.machine.request.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) }
        }
        return nil
    }

    /// The transport's answer, told to the event monitor (see ``TransportStage``).
    private func receive(_ attempt: Attempt) -> Attempt.Outcome {
        guard var answer = attempt.machine.takeAnswer() else { return .dropped }
        switch attempt.machine.body.receive(answer, mayRetry: &attempt.machine.mayRetry) {
        case .answer(let received): answer = received
        case .startOver: return .startOver(isReplay: attempt.isReplay)
        }
        if let progress = attempt.machine.progress, case .success(let raw) = answer {
            progress.finish(downloaded: attempt.machine.body.receivedBytes(of: raw))
        }
        let result = TransportStage.answer(
            answer, for: attempt, persistedHeaders: settings.persistedHeaders, cookies: cookies, now: clock.date)
        // Only an attempt that is not over is told (its link is read only when someone listens).
        if !attempt.observers.isEmpty, let sent = attempt.machine.sent, !attempt.isOver {
            let now = clock.now
            let measured = attempt.machine.measured?.withLock { $0 }
            tellObservers(
                .attemptEnded(
                    APIEngine.AttemptReport(
                        attempt: attempt.number, request: attempt.machine.request, result: result,
                        started: attempt.machine.startedAt, sent: sent.at,
                        headReceived: measured?.headReceived, answered: now, phases: measured?.phases,
                        protocolVersion: measured?.protocolVersion, sensitiveHeaders: sent.options.sensitiveHeaders)),
                of: attempt, at: now)
        }
        switch result {
        case .failure(let error):
            return .failed(error)
        case .success(let raw):
            attempt.machine.received(raw)
            return .next
        }
    }

    /// Passes the response through the inspectors, in order, in a Swift task of its own; the first
    /// that asks for another attempt decides. They see every response, a refusal the authentication
    /// will answer included.
    private func inspect(_ attempt: Attempt) -> Attempt.Outcome {
        let inspectors = self.inspectors
        guard !inspectors.isEmpty, let raw = attempt.machine.response else { return .next }
        let work = asyncWork.start { [weak self] in
            let outcome: Attempt.Outcome
            do {
                var retry: TimeInterval?
                for inspector in inspectors {
                    if case .retry(let delay) = try await inspector.inspect(
                        raw, to: attempt.machine.request, for: attempt.context)
                    {
                        retry = delay
                        break
                    }
                }
                if let retry {
                    outcome = .retry(
                        after: retry, .rejected(underlying: APIRetryRequested(delay: retry), response: raw))
                } else {
                    outcome = .next
                }
            } catch {
                outcome = .failed(error as? APIError ?? .rejected(underlying: error, response: raw))
            }
            self?.resume(attempt, after: .inspect, with: outcome, hop: false)
        }
        return .waiting(work)
    }

    /// Whether the response refuses the credential the attempt carried.
    private func checkRefusal(_ attempt: Attempt) -> Attempt.Outcome {
        guard let authentication, attempt.machine.grant?.credential != nil, let raw = attempt.machine.response,
            authentication.authenticator.isRefused(raw, to: attempt.machine.request)
        else { return .next }
        return .refused
    }

    /// Waits for the renewed credential, then the attempt starts over with it (once per task); or it
    /// fails with the refresh's failure.
    private func renew(_ attempt: Attempt) -> Attempt.Outcome {
        guard let authentication, let grant = attempt.machine.grant else { return .next }
        let refusal = authentication.refused(attempt.machine.request, sentWith: grant.generation, work: asyncWork) {
            [weak self] result in
            self?.resume(attempt, after: .renew, with: Self.renewed(result), hop: true)
        }
        if refusal != nil, !attempt.observers.isEmpty {
            tellObservers(.renewingCredential(attempt: attempt.number), of: attempt)
        }
        switch refusal {
        case nil: return .next  // not the authentication's to answer: an ordinary response
        case .now(let result)?: return Self.renewed(result)
        case .waiting(let wait)?: return .waiting(wait)
        }
    }

    private static func renewed(_ result: Result<APIAuthentication.Grant, APIError>) -> Attempt.Outcome {
        switch result {
        case .success: return .startOver(isReplay: true)
        case .failure(let error): return .failed(error)
        }
    }

    /// Validates the response and builds the typed one (see ``ResponseStage``); only for an attempt
    /// that is not over, so a late answer never runs the manager's hooks.
    private func respond(_ attempt: Attempt) -> Attempt.Outcome {
        guard let raw = attempt.machine.response, !attempt.isOver else { return .dropped }
        let observed = !attempt.observers.isEmpty
        let start = observed ? clock.now : 0
        let result = ResponseStage.run(attempt.task, result: .success(raw), cache: attempt.machine.cache)
        if observed {
            let end = clock.now
            tellObservers(.responseBuilt(attempt: attempt.number, duration: end - start), of: attempt, at: end)
        }
        switch result {
        case .built(let response, let source): return .answered(response, source)
        case .failed(let error): return .failed(error)
        }
    }
}
