# The web console (web/): its files and the terminal emulator from
# web/node_modules (npm ci by scripts/install-deps) are gzipped, hashed and
# compiled into the binary by a generator of our own (src/web/embed_main.cc),
# so `make run` alone serves a working console, offline.
set(_web ${PROJECT_SOURCE_DIR}/web)
file(GLOB _web_console CONFIGURE_DEPENDS ${_web}/console/*.js ${_web}/console/*.css ${_web}/console/*.svg)
set(_web_args index.html=${_web}/index.html !run_result.html=${_web}/run_result.html)
set(_web_deps ${_web}/index.html ${_web}/run_result.html)
foreach(_f IN LISTS _web_console)
  get_filename_component(_n ${_f} NAME)
  list(APPEND _web_args ${_n}=${_f})
  list(APPEND _web_deps ${_f})
endforeach()
set(_xterm ${_web}/node_modules/@xterm)
foreach(_pair xterm.mjs=${_xterm}/xterm/lib/xterm.mjs xterm.css=${_xterm}/xterm/css/xterm.css
        addon-fit.mjs=${_xterm}/addon-fit/lib/addon-fit.mjs)
  list(APPEND _web_args ${_pair})
  string(REGEX REPLACE "^[^=]*=" "" _f ${_pair})
  list(APPEND _web_deps ${_f})
endforeach()

# A host tool: built without the sanitizers and fuzzing instrumentation of
# the build it serves (it only runs at build time).
add_executable(sandcastle-embed-web ${PROJECT_SOURCE_DIR}/src/web/embed_main.cc)
set_property(TARGET sandcastle-embed-web PROPERTY COMPILE_OPTIONS -O2 -Wall -Wextra -Werror)
set_property(TARGET sandcastle-embed-web PROPERTY LINK_OPTIONS "")
target_link_libraries(sandcastle-embed-web PRIVATE ZLIB::ZLIB OpenSSL::Crypto)

set(_web_out ${PROJECT_BINARY_DIR}/generated/web_assets.cc)
add_custom_command(OUTPUT ${_web_out}
  COMMAND sandcastle-embed-web ${_web_out} ${_web_args}
  DEPENDS sandcastle-embed-web ${_web_deps}
  COMMENT "Embedding the web console"
  VERBATIM)
target_sources(sandcastle_core PRIVATE ${_web_out})
target_link_libraries(sandcastle_core PUBLIC ZLIB::ZLIB)
