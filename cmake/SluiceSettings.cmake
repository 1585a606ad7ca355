# Warnings and sanitizers live in one INTERFACE target that every project target links
# PRIVATE, so neither leaks into an embedder's build or the global CMAKE_CXX_FLAGS.
add_library(sluice_settings INTERFACE)
target_compile_features(sluice_settings INTERFACE cxx_std_20)
target_compile_options(sluice_settings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers>)

if(SLUICE_SANITIZE STREQUAL "address")
  set(_san -fsanitize=address -fno-omit-frame-pointer)
elseif(SLUICE_SANITIZE STREQUAL "thread")
  set(_san -fsanitize=thread)
elseif(SLUICE_SANITIZE STREQUAL "undefined")
  set(_san -fsanitize=undefined -fno-sanitize-recover=undefined)
elseif(SLUICE_SANITIZE STREQUAL "address,undefined")
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(SLUICE_SANITIZE STREQUAL "fuzzer")
  # AddressSanitizer and UBSan plus libFuzzer's coverage instrumentation, without its
  # main(): the fuzz targets link -fsanitize=fuzzer themselves (tests/fuzz/).
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SLUICE_SANITIZE=fuzzer needs clang (CXX=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  set(_san -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
           -fno-omit-frame-pointer)
elseif(NOT SLUICE_SANITIZE STREQUAL "")
  message(FATAL_ERROR
    "SLUICE_SANITIZE must be address, thread, undefined, address,undefined, fuzzer or empty")
endif()
# Line tables come from the build type (RelWithDebInfo, Debug), not from here: CI's sanitizer
# builds use -O1 -g1, which compile in less than half the time of -O2 -g and still give file
# and line in every report.
if(_san)
  target_compile_options(sluice_settings INTERFACE ${_san})
  target_link_options(sluice_settings INTERFACE ${_san})
endif()

# sluice_add_library(NAME SOURCES ... DEPS ...): one library per layer, alias sluice::NAME.
function(sluice_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(sluice_${name} STATIC ${ARG_SOURCES})
  add_library(sluice::${name} ALIAS sluice_${name})
  set_target_properties(sluice_${name} PROPERTIES EXPORT_NAME ${name} POSITION_INDEPENDENT_CODE ON)
  target_compile_features(sluice_${name} PUBLIC cxx_std_20)
  target_include_directories(sluice_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/sluice>)
  target_link_libraries(sluice_${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:sluice_settings>)
endfunction()
