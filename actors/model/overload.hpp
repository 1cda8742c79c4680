#pragma once

namespace recoverd {

/// Builds one visitor from several lambdas (for `std::visit`).
template <class... Fs>
struct overload : Fs... {
  using Fs::operator()...;
};

template <class... Fs>
overload(Fs...) -> overload<Fs...>;

} // namespace recoverd
