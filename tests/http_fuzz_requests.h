// The API fuzzer's requests (tests/http_fuzz_test.cc): each one drawn from
// a seeded Rng (src/base/rng.h), for an operation of docs/api/openapi.yaml
// (every path and method it declares, plus the agent routes the server
// serves beyond it), a method a path does not declare, an odd path, or a
// request the HTTP layer itself must refuse.
//
// A body starts valid-ish, built from the operation's schema with the
// names the server knows (FuzzContext), and is then mutated: wrong types,
// huge, negative and non-finite numbers, integers beyond int64, deep
// nesting, invalid UTF-8, repeated keys, empty and huge strings, missing
// and unknown fields, bodies up to and over the size limit. Path
// parameters, query arguments, headers (Content-Type, Content-Length,
// Authorization) and the framing (chunked, a Content-Length that lies)
// are drawn the same way, with each kind of token.
//
// Guarantees: Make is a function of (the document, the context, the Rng's
// state): the same seed draws the same request. Every request says what a
// correct server may do with it (FuzzRequest::Expect), so that the test
// can tell a bug from a refusal.
//
// Threads: a RequestMaker is read-only after construction (any thread);
// each thread draws with its own Rng.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/base/rng.h"
#include "src/base/status.h"

namespace gpupool::testing {

// What the fuzzer knows of the server: tokens and names that let a
// request get past authentication and name lookups, to reach deeper code.
struct FuzzContext {
  std::string admin_token, tenant_token, other_token, node_token;
  std::string tenant, other_tenant, node;  // the tenants of the two tokens; the node token's node
  std::vector<std::string> pools, models, node_classes, requirements, labels, priorities;
  int64_t tenant_job = 1, other_job = 2;  // a job of each tenant
  std::string session, incarnation;       // the node's agent registration
  // Tokens the fuzzer may revoke (DELETE /v1/tokens/{id}) without losing a
  // token it sends; and a node whose token it may issue again (which revokes
  // the one before: never the agent's own node).
  std::vector<std::string> spare_token_ids;
  std::string spare_node = "fz-decoy";
  // A node the fuzzer may remove (DELETE /v1/nodes/{name}), so that the
  // spare node stays for the other node commands (issue 19), which refuse a
  // removed node.
  std::string doomed_node = "fz-doomed";
  // Bodies the server accepts, by "METHOD /path", drawn as often as the schema: a schema rarely draws a
  // registration that matches the registered resources, or a job whose fields all go together.
  std::map<std::string, std::vector<nlohmann::json>> known_bodies;
  int64_t max_body_bytes = 1 << 20;
  int64_t max_header_bytes = 16384;
};

struct FuzzRequest {
  // What a correct server may answer; every other outcome is a bug.
  struct Expect {
    bool may_close = false;        // closing without an answer is fine (a lie about the body, a cut body)
    bool library_answers = false;  // the HTTP library may answer itself (a malformed request line or header)
    bool trailing = false;         // bytes follow the request: half-close, then read every further answer
    // The request never completes (a body shorter than its Content-Length; the client then half-closes): the
    // server may wait for the rest until its body deadline (server.http.body_timeout), then must close. The
    // test does not wait for it in line (FuzzClient parks it).
    bool incomplete = false;
    // The request line names an HTTP major version other than 1 (0.9, 2.0): the HTTP library answers 505 HTTP
    // Version Not Supported, RFC 9110's answer (15.6.6) to a major version the server does not speak; the one
    // 5xx a correct server gives.
    bool other_http_version = false;
  };
  std::string kind;    // for the summary: "POST /v1/jobs", "odd path", "bad request line", ...
  std::string method;  // as on the request line
  std::string target;  // the path and query as on the request line
  std::string bytes;   // the whole request as sent
  std::string body;    // the body alone (for reports)
  Expect expect;
  bool fresh_connection = false;  // send on a new connection and drop it after (lies, trailing bytes, closes)

  // The request for a failure report: the request line, headers and the
  // first bytes of the body, escaped.
  std::string Describe() const;
};

class RequestMaker {
 public:
  // Reads the operations of the OpenAPI document (as JSON); fails when it
  // has no paths.
  static Result<RequestMaker> FromOpenApi(nlohmann::json doc);

  FuzzRequest Make(Rng& rng, const FuzzContext& ctx) const;
  // "METHOD /path" of every operation fuzzed, the document's and the extra ones.
  std::vector<std::string> OperationNames() const;

  struct Param {
    std::string name;
    nlohmann::json schema;
  };
  struct Operation {
    std::string method;  // upper case
    std::string path;    // the document's template, e.g. /v1/jobs/{id}
    nlohmann::json body_schema;  // null: no request body
    std::vector<Param> query;
    std::vector<std::string> roles;  // x-gpupool-roles
  };

 private:
  explicit RequestMaker(nlohmann::json doc) : doc_(std::move(doc)) {}

  // The kinds of request (RequestMaker::Make picks one).
  FuzzRequest OperationRequest(Rng& rng, const FuzzContext& ctx, const Operation& op) const;
  FuzzRequest UndeclaredMethod(Rng& rng, const FuzzContext& ctx) const;
  FuzzRequest OddPath(Rng& rng, const FuzzContext& ctx) const;
  FuzzRequest MalformedHttp(Rng& rng, const FuzzContext& ctx) const;

  // Parts of a request.
  std::string PathOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const;
  std::string QueryOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const;
  std::string BodyOf(Rng& rng, const FuzzContext& ctx, const Operation& op) const;
  std::vector<std::pair<std::string, std::string>> HeadersOf(Rng& rng, const FuzzContext& ctx,
                                                             const Operation& op) const;
  // Frames the request (Content-Length, chunked, or a lie) into r.bytes.
  void Frame(Rng& rng, const FuzzContext& ctx, const std::vector<std::pair<std::string, std::string>>& headers,
             FuzzRequest& r) const;

  // A value the schema accepts, more or less (names from the context);
  // `key` is the property it is for (a hint: "pool", "tenant", "job", ...).
  nlohmann::json Valid(const nlohmann::json& schema, Rng& rng, const FuzzContext& ctx, const std::string& key,
                       int depth) const;
  nlohmann::json Resolve(const nlohmann::json& schema) const;

  nlohmann::json doc_;
  std::vector<Operation> ops_;
};

}  // namespace gpupool::testing
