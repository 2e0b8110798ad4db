# Fuzz targets. With clang and -DSANDCASTLE_FUZZ=ON they are libFuzzer binaries
# (`make fuzz`); otherwise each is built as a corpus replayer that `make test`
# runs over tests/fuzz/corpus/<name>/.
file(GLOB FUZZ_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_*.cc)
foreach(src ${FUZZ_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  if(SANDCASTLE_FUZZ)
    add_executable(${name} ${src})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${src} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
  endif()
  target_link_libraries(${name} PRIVATE sandcastle_core sandcastle_test_fixtures)
endforeach()
