#pragma once

/// Transport security of the listeners: one function turns a listener's
/// TLS settings into gRPC server credentials, so that every way of binding
/// a listener (a listening port, an external acceptor) uses the same ones.

#include <memory>
#include <string>

#include <caf/expected.hpp>
#include <grpcpp/security/server_credentials.h>

struct ssl_ctx_st;

namespace recoverd {

/// An OpenSSL server context, freed with the last reference.
using ssl_context_ptr = std::shared_ptr<ssl_ctx_st>;

/// Whether a TLS listener asks its clients for a certificate.
enum class client_cert_mode {
  /// No client certificates.
  none,
  /// A certificate is asked for and verified when the client sends one;
  /// clients without one may still identify with a bearer token.
  optional,
  /// The handshake fails without a certificate signed by the client CA.
  required,
};

/// The TLS settings of one listener. All paths empty: plaintext.
struct tls_options {
  /// PEM file of the server certificate chain; empty: plaintext.
  std::string cert_file;
  /// PEM file of the server's private key.
  std::string key_file;
  /// PEM file of the CA that signs client certificates; empty: no client
  /// certificates.
  std::string client_ca_file;
  /// How client certificates are asked for when `client_ca_file` is set.
  client_cert_mode client_certs = client_cert_mode::optional;

  /// Whether the listener speaks TLS.
  bool enabled() const {
    return !cert_file.empty();
  }
};

/// Checks that certificate and key come together and that a client CA
/// comes with a certificate; `what` names the listener in the message.
[[nodiscard]] caf::error validate(const tls_options& x,
                                  const std::string& what);

/// Reads the files of `x` and makes the listener's credentials: insecure
/// without a certificate, TLS otherwise, verifying client certificates
/// against the client CA as `x.client_certs` says. Fails with a message
/// naming the file that cannot be read.
[[nodiscard]] caf::expected<std::shared_ptr<grpc::ServerCredentials>>
make_server_credentials(const tls_options& x);

/// The OpenSSL server context of a listener that is not gRPC's (the HTTP
/// port): the same files and client-certificate modes as
/// `make_server_credentials`, TLS 1.2 at least. Null without a certificate.
[[nodiscard]] caf::expected<ssl_context_ptr>
make_ssl_context(const tls_options& x);

/// Reads a whole file; fails with a message naming it.
[[nodiscard]] caf::expected<std::string> read_pem_file(const std::string& path);

/// Whether the host part of `address` ("host:port") is a loopback address
/// (127.0.0.0/8, ::1, localhost).
bool is_loopback_address(const std::string& address);

} // namespace recoverd
