// The real daemon with TLS on the control listener and access control on;
// recoverctl with --ca/--cert/--key. Certificates made by openssl here.

#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "fixtures/certs.hpp"
#include "fixtures/process.hpp"
#include "fixtures/temp_dir.hpp"

using namespace recoverd::test;

TEST_CASE("e2e tls: recoverctl over mTLS to the control listener, roles "
          "checked, bad authz file refused") {
  test_pki pki{"viewer-1", "platform-1"};
  temp_dir dir;
  std::ofstream{dir / "authz.toml"}
    << "[[identity]]\nname = \"viewer-1\"\nrole = \"viewer\"\n"
       "[[identity]]\nname = \"platform-1\"\nrole = \"platform\"\n";
  std::ofstream{dir / "bad.toml"} << "[[identity]]\nname = \"x\"\n";
  std::string daemon = std::string{RECOVERD_BIN}
    + " --listen 127.0.0.1:0 --http-listen off --data-dir " + (dir / "db")
    + " --log-level warn";
  MESSAGE("a bad authz file: the daemon refuses to start");
  auto [bad_rc, bad_out]
    = run_command(daemon + " --authz " + (dir / "bad.toml"));
  CHECK(bad_rc != 0);
  CHECK(bad_out.find("role") != std::string::npos);

  MESSAGE("the daemon with a TLS control listener; recoverctl with certs");
  // One shell (sh): start, read the control port, run recoverctl, stop.
  auto ctl = std::string{RECOVERCTL_BIN};
  auto certs = [&](const std::string& who) {
    return " --ca " + pki.file("ca.pem") + " --cert " + pki.file(who + ".pem")
      + " --key " + pki.file(who + ".key");
  };
  std::string script = "exec 2>&1; " + daemon
    + " --control-listen 127.0.0.1:0 --control-tls-cert "
    + pki.file("server.pem") + " --control-tls-key " + pki.file("server.key")
    + " --control-client-ca " + pki.file("ca.pem") + " --authz "
    + (dir / "authz.toml") + " > " + (dir / "out") + " 2>&1 & pid=$!; "
    + "for i in $(seq 100); do grep -q 'control on' " + (dir / "out")
    + " && break; sleep 0.1; done; "
    + "addr=$(sed -n 's/recoverd: control on //p' " + (dir / "out") + "); "
    + ctl + " --server $addr" + certs("platform-1") + " job put "
    + RECOVERD_SOURCE_DIR + "/tools/examples/job.json; echo put=$?; " + ctl
    + " --server $addr" + certs("viewer-1") + " job delete job-7f3a; "
    + "echo delete=$?; " + ctl + " --server $addr" + certs("viewer-1")
    + " jobs; echo jobs=$?; " + ctl + " --server $addr" + certs("viewer-1")
    + " timeline job-7f3a; echo timeline=$?; " + ctl + " --server $addr --ca "
    + pki.file("ca.pem") + " jobs; echo nocert=$?; kill $pid; wait $pid";
  auto [rc, out] = run_command(script);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("put=0") != std::string::npos);
  CHECK(out.find("delete=1") != std::string::npos);
  CHECK(out.find("may not call") != std::string::npos);
  CHECK(out.find("jobs=0") != std::string::npos);
  CHECK(out.find("job-7f3a") != std::string::npos);
  CHECK(out.find("nocert=0") == std::string::npos);
  MESSAGE("the timeline names who created the job (audit)");
  CHECK(out.find("timeline=0") != std::string::npos);
  CHECK(out.find("job created") != std::string::npos);
  CHECK(out.find("[by platform-1]") != std::string::npos);
}
