// The kernel drivers' source text, embedded at build time by
// cmake/embed.cmake from src/kernels/.
#pragma once

#include <string_view>

namespace sandcastle::service {

std::string_view python_driver_source();  // src/kernels/python_driver.py
std::string_view node_driver_source();    // src/kernels/node_driver.js
std::string_view python_ahead_source();   // src/kernels/python_ahead.py

}  // namespace sandcastle::service
