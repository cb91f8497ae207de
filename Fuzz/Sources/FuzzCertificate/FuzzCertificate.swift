import Foundation

@testable import APIManagerKit

/// Certificates from a server or a file (DER, and the same bytes as PEM): never a crash; a
/// certificate read has a 32-byte pin, and its DER reads again to the same pin.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCertificate(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Data(UnsafeRawBufferPointer(start: start, count: count))
    if let certificate = try? APIEngine.Trust.Certificate(der: bytes) {
        precondition(
            certificate.publicKeyPin.sha256.count == 32, "a pin of \(certificate.publicKeyPin.sha256.count) bytes")
        precondition(
            (try? APIEngine.Trust.Certificate(der: certificate.der))?.publicKeyPin == certificate.publicKeyPin,
            "the certificate's DER did not read again")
    }
    let pem = "-----BEGIN CERTIFICATE-----\n\(bytes.base64EncodedString())\n-----END CERTIFICATE-----"
    _ = try? APIEngine.Trust.Certificate.all(pem: pem)
    _ = try? APIEngine.Trust.Certificate.all(pem: String(decoding: bytes, as: UTF8.self))
    _ = try? APIEngine.Trust.Pin(String(decoding: bytes, as: UTF8.self))
    return 0
}
