#include "services/tls.hpp"

#include <fstream>
#include <sstream>

#include <grpcpp/security/server_credentials.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "actors/error.hpp"

namespace recoverd {

caf::error validate(const tls_options& x, const std::string& what) {
  if (x.cert_file.empty() != x.key_file.empty())
    return make_error(errc::invalid_argument,
                      what
                        + ": a TLS certificate needs its key and a key "
                          "its certificate");
  if (!x.client_ca_file.empty() && x.cert_file.empty())
    return make_error(errc::invalid_argument,
                      what
                        + ": a client CA needs TLS (a certificate and key "
                          "of the server)");
  return caf::none;
}

caf::expected<std::string> read_pem_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_argument, "cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  if (out.str().empty())
    return make_error(errc::invalid_argument, path + " is empty");
  return out.str();
}

caf::expected<std::shared_ptr<grpc::ServerCredentials>>
make_server_credentials(const tls_options& x) {
  if (!x.enabled())
    return grpc::InsecureServerCredentials();
  auto cert = read_pem_file(x.cert_file);
  if (!cert)
    return cert.error();
  auto key = read_pem_file(x.key_file);
  if (!key)
    return key.error();
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back({*key, *cert});
  opts.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  if (!x.client_ca_file.empty() && x.client_certs != client_cert_mode::none) {
    auto ca = read_pem_file(x.client_ca_file);
    if (!ca)
      return ca.error();
    opts.pem_root_certs = *ca;
    opts.client_certificate_request
      = x.client_certs == client_cert_mode::required
      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(opts);
}

caf::expected<ssl_context_ptr> make_ssl_context(const tls_options& x) {
  if (!x.enabled())
    return ssl_context_ptr{};
  // Reading first gives the same messages as the gRPC listeners.
  for (const auto* f : {&x.cert_file, &x.key_file})
    if (auto pem = read_pem_file(*f); !pem)
      return pem.error();
  ssl_context_ptr ctx{SSL_CTX_new(TLS_server_method()), SSL_CTX_free};
  auto fail = [&](const std::string& what) {
    char buf[256] = {0};
    ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
    ERR_clear_error();
    return make_error(errc::invalid_argument, what + ": " + buf);
  };
  if (!ctx)
    return fail("cannot make a TLS context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Writes may end part-way on a non-blocking socket and go on from
  // another buffer position.
  SSL_CTX_set_mode(ctx.get(),
                   SSL_MODE_ENABLE_PARTIAL_WRITE
                     | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), x.cert_file.c_str()) != 1)
    return fail(x.cert_file + " is not a PEM certificate chain");
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), x.key_file.c_str(),
                                  SSL_FILETYPE_PEM)
      != 1)
    return fail(x.key_file + " is not a PEM private key");
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return fail(x.key_file + " does not belong to " + x.cert_file);
  if (!x.client_ca_file.empty() && x.client_certs != client_cert_mode::none) {
    if (auto pem = read_pem_file(x.client_ca_file); !pem)
      return pem.error();
    if (SSL_CTX_load_verify_locations(ctx.get(), x.client_ca_file.c_str(),
                                      nullptr)
        != 1)
      return fail(x.client_ca_file + " is not a PEM CA certificate");
    SSL_CTX_set_client_CA_list(
      ctx.get(), SSL_load_client_CA_file(x.client_ca_file.c_str()));
    int mode = SSL_VERIFY_PEER;
    if (x.client_certs == client_cert_mode::required)
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx.get(), mode, nullptr);
  }
  return ctx;
}

bool is_loopback_address(const std::string& address) {
  auto host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

} // namespace recoverd
