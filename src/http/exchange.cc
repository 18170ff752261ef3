#include "src/http/exchange.h"

#include <utility>

namespace gpupool::http {

Exchange::Exchange(Request request, std::function<void(Exchange&)> deliver)
    : request_(std::move(request)), received_(std::chrono::steady_clock::now()), deliver_(std::move(deliver)) {}

bool Exchange::Respond(Response response) { return Finish(std::move(response), End::kAnswered); }
bool Exchange::Expire(Response response) { return Finish(std::move(response), End::kExpired); }
bool Exchange::Cancel(Response response) { return Finish(std::move(response), End::kCancelled); }

bool Exchange::Finish(Response response, End end) {
  std::function<void(Exchange&)> deliver;
  std::function<void()> on_cancel;
  {
    std::lock_guard lock(mu_);
    if (end_) return false;
    end_ = end;
    response_ = std::move(response);
    deliver = std::move(deliver_);
    deliver_ = nullptr;
    if (end != End::kAnswered) on_cancel = std::move(on_cancel_);
    on_cancel_ = nullptr;
  }
  if (on_cancel) on_cancel();
  if (deliver) deliver(*this);
  return true;
}

void Exchange::OnCancel(std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    if (!end_) {
      on_cancel_ = std::move(f);
      return;
    }
    if (*end_ == End::kAnswered) return;
  }
  f();
}

bool Exchange::ended() const {
  std::lock_guard lock(mu_);
  return end_.has_value();
}

std::optional<Exchange::End> Exchange::end() const {
  std::lock_guard lock(mu_);
  return end_;
}

std::optional<Response> Exchange::TakeResponse() {
  std::lock_guard lock(mu_);
  std::optional<Response> r = std::move(response_);
  response_.reset();
  return r;
}

}  // namespace gpupool::http
