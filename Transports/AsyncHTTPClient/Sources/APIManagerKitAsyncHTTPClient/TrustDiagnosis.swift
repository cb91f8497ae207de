import APIManagerKit
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Why NIOSSL refused a server's certificate, which BoringSSL's error does not say
/// (`CERTIFICATE_VERIFY_FAILED` alone): after such a failure, a second handshake that verifies
/// nothing and sends nothing reads the server's certificate, and its dates tell an expired
/// certificate from one of an unknown root. Only the failure's reason depends on it: the request
/// has failed already, whatever this finds.
enum TrustDiagnosis {
    /// `failure` with the reason the server's certificate shows: `.expired` when it is out of its
    /// dates now, `failure` as it is otherwise (or when the second handshake fails too).
    static func refine(
        _ failure: APIEngine.Trust.Failure, host: String, port: Int, tls: TLSConfiguration?, on eventLoop: any EventLoop
    ) -> EventLoopFuture<APIEngine.Trust.Failure> {
        var tls = tls ?? TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            return eventLoop.makeSucceededFuture(failure)
        }
        let name = host.isEmpty || host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : host
        let certificate = eventLoop.makePromise(of: NIOSSLCertificate?.self)
        ClientBootstrap(group: eventLoop).connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: context, serverHostname: name))
                    try channel.pipeline.syncOperations.addHandler(CertificateReader(certificate))
                }
            }
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel):
                    certificate.futureResult.whenComplete { _ in channel.close(promise: nil) }
                case .failure(let error):
                    certificate.fail(error)
                }
            }
        return certificate.futureResult.map { certificate in
            guard let certificate else { return failure }
            let now = time(nil)
            guard certificate.notValidAfter < now || certificate.notValidBefore > now else { return failure }
            let format = ISO8601DateFormatter()
            let dates =
                "valid from \(format.string(from: Date(timeIntervalSince1970: TimeInterval(certificate.notValidBefore)))) "
                + "to \(format.string(from: Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))))"
            return APIEngine.Trust.Failure(host: failure.host, reason: .expired, detail: dates)
        }.recover { _ in failure }
    }

    /// Reads the server's certificate once the handshake is done; writes nothing.
    final class CertificateReader: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        private let promise: EventLoopPromise<NIOSSLCertificate?>

        init(_ promise: EventLoopPromise<NIOSSLCertificate?>) { self.promise = promise }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent {
                let handler = try? context.pipeline.syncOperations.handler(type: NIOSSLHandler.self)
                promise.succeed(handler?.peerCertificate)
            }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            promise.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(ChannelError.eof)
            context.fireChannelInactive()
        }
    }
}
