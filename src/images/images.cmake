# The image store (src/images/*.cc, picked up by the core library's glob)
# reads layers with libarchive (tar, gzip, zstd).
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
target_link_libraries(sandcastle_core PUBLIC PkgConfig::LIBARCHIVE)
