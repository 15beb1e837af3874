#pragma once
// GET /: the dashboard, one self-contained HTML page (dashboard.html, built into the
// binary by CMake, so an installed supervisor needs no data file beside it).

#include <string_view>

namespace comfy::supervisor {

std::string_view dashboard_page() noexcept;

}  // namespace comfy::supervisor
