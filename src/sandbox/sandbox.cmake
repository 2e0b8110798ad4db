# sandcastle-init: the single-threaded helper exec'd inside each sandbox. It is
# linked statically from its own copies of the few files it needs (no spdlog,
# no sanitizers: it runs in a bare mount namespace and must start fast).
set(SANDCASTLE_INIT_SOURCES
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/init_main.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/init_loop.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/supervisor.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/exec_proc.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/terminal_pty.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/mounts.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/caps.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/rlimits.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/net.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/fd_passing.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/wire.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/file_wire.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/sandbox.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/file_worker.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/layer_export.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/persist_mirror.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/persist_mirror_worker.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/zygote_loop.cc)
add_executable(sandcastle-init ${SANDCASTLE_INIT_SOURCES})
target_include_directories(sandcastle-init PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(sandcastle-init PRIVATE -fno-sanitize=all)
target_link_options(sandcastle-init PRIVATE -static -fno-sanitize=all)
add_dependencies(sandcastle sandcastle-init)
# The server finds the helper next to its own binary first; this build-tree
# path is the fallback for test binaries.
target_compile_definitions(sandcastle_core PRIVATE
  SANDCASTLE_INIT_PATH="$<TARGET_FILE:sandcastle-init>")

# sandcastle-agent: the helper bind-mounted into every engine container
# (src/sandbox/engine/agent_wire.h). Static like sandcastle-init, so it runs
# on any image (glibc, musl or none); its own sources stay out of the core.
file(GLOB SANDCASTLE_AGENT_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/sandbox/engine/agent/*.cc)
list(APPEND SANDCASTLE_AGENT_SOURCES
  ${PROJECT_SOURCE_DIR}/src/sandbox/engine/agent_wire.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/wire.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/file_wire.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/sandbox.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/file_worker.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/fd_passing.cc
  ${PROJECT_SOURCE_DIR}/src/sandbox/native/caps.cc)
add_executable(sandcastle-agent ${SANDCASTLE_AGENT_SOURCES})
target_include_directories(sandcastle-agent PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(sandcastle-agent PRIVATE -fno-sanitize=all)
target_link_options(sandcastle-agent PRIVATE -static -fno-sanitize=all)
add_dependencies(sandcastle sandcastle-agent)
# The server finds the agent next to its own binary first; this build-tree
# path is the fallback for test binaries.
target_compile_definitions(sandcastle_core PRIVATE
  SANDCASTLE_AGENT_PATH="$<TARGET_FILE:sandcastle-agent>")
