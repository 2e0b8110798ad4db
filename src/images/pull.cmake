# image pull (src/images/registry_*.cc): TLS to registries needs libssl on top
# of libcrypto. The sources themselves are in sandcastle_core's glob.
find_package(OpenSSL REQUIRED COMPONENTS SSL)
target_link_libraries(sandcastle_core PUBLIC OpenSSL::SSL)
