// start_ahead: the server's half of AheadCommand (sandbox.h). Init replaces
// the sandbox's waiting exec slot with one whose command starts at once
// (init_loop.cc, supervisor.cc); the sandbox is finished by then, so the
// command sees the sandbox it will run in.
#include <sys/socket.h>

#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

Status start_ahead(ReadySandbox& sandbox, const AheadCommand& command, const SandboxSpec& spec) {
  if (command.base.argv.empty() || command.loader.empty())
    return Error::make(ErrorCode::kInvalidArgument,
                       "ahead: a command and its loader are both needed");
  if (command.base.pass_fd >= 0 || command.base.private_listener_port != 0 || command.base.last)
    return Error::make(ErrorCode::kInvalidArgument,
                       "ahead: a started command has no passed fd, listener or last flag");
  ExecRequest started = command.base;
  started.argv.insert(started.argv.end(), command.loader.begin(), command.loader.end());
  auto wire = exec_wire_for(started, spec, sandbox.cgroup != nullptr);
  if (!wire) return wire.error();
  AheadWire a;
  a.command = std::move(*wire);
  a.shared_words = static_cast<std::uint32_t>(command.base.argv.size());
  const std::string bytes = encode_control(ControlKind::kAhead, encode(a));
  if (::send(sandbox.init.control.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(bytes.size()))
    return Error::from_errno("send ahead command to sandbox init");
  return {};
}

}  // namespace sandcastle::sandbox::native
