# Every third-party library the project uses is found here, once, and wrapped in one
# `verl::dep::<name>` target, so that the folders' CMakeLists name what they need and nothing
# about how it was found.

find_package(yaml-cpp REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(spdlog REQUIRED)
find_package(Threads REQUIRED)
find_package(SQLiteCpp REQUIRED)
# cpp-httplib: plain HTTP with bearer-token auth on the cluster's network; verlctl uses neither
# its TLS nor its compression. Upstream it is header-only. Debian ships it split instead: the
# declarations in httplib.h, the code in libcpp-httplib.so, compiled with OpenSSL, zlib and
# brotli; the header's classes change layout with those macros, so a user must define the same
# ones as the library (pkg-config's cflags say which) or break the ABI.
find_path(VERL_HTTPLIB_INCLUDE httplib.h REQUIRED)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(VERL_HTTPLIB QUIET cpp-httplib)
endif()

function(verl_wrap name)
  add_library(verl_dep_${name} INTERFACE)
  target_link_libraries(verl_dep_${name} INTERFACE ${ARGN})
  add_library(verl::dep::${name} ALIAS verl_dep_${name})
endfunction()

verl_wrap(yaml yaml-cpp)
verl_wrap(cli11 CLI11::CLI11)
verl_wrap(json nlohmann_json::nlohmann_json)
verl_wrap(spdlog spdlog::spdlog)
verl_wrap(threads Threads::Threads)
verl_wrap(sqlite SQLiteCpp)
add_library(verl_dep_httplib INTERFACE)
target_include_directories(verl_dep_httplib INTERFACE ${VERL_HTTPLIB_INCLUDE})
target_link_libraries(verl_dep_httplib INTERFACE Threads::Threads)
if(VERL_HTTPLIB_FOUND)
  target_compile_options(verl_dep_httplib INTERFACE ${VERL_HTTPLIB_CFLAGS_OTHER})
  target_link_libraries(verl_dep_httplib INTERFACE ${VERL_HTTPLIB_LINK_LIBRARIES})
endif()
add_library(verl::dep::httplib ALIAS verl_dep_httplib)

# libssh: the SSH backend's transport (launcher/ssh_session.cc is its only user).
pkg_check_modules(VERL_LIBSSH REQUIRED IMPORTED_TARGET libssh)
verl_wrap(ssh PkgConfig::VERL_LIBSSH)

# PCRE2: the Unicode regexes of HF tokenizers' Split pre-tokenizers (text/ is its only user).
pkg_check_modules(VERL_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
verl_wrap(pcre2 PkgConfig::VERL_PCRE2)

# The codecs of parquet data files (data/parquet.cc is their only user): Debian's libsnappy-dev,
# libzstd-dev and zlib1g-dev.
find_path(VERL_SNAPPY_INCLUDE snappy.h REQUIRED)
find_library(VERL_SNAPPY_LIB snappy REQUIRED)
add_library(verl_dep_snappy INTERFACE)
target_include_directories(verl_dep_snappy INTERFACE ${VERL_SNAPPY_INCLUDE})
target_link_libraries(verl_dep_snappy INTERFACE ${VERL_SNAPPY_LIB})
add_library(verl::dep::snappy ALIAS verl_dep_snappy)
pkg_check_modules(VERL_ZSTD REQUIRED IMPORTED_TARGET libzstd)
verl_wrap(zstd PkgConfig::VERL_ZSTD)
find_package(ZLIB REQUIRED)
verl_wrap(zlib ZLIB::ZLIB)

# libtorch: optional; found -> the trainer module is built.
set(VERL_HAVE_TORCH OFF)
set(VERL_TORCH_VERSION "")
if(VERL_WITH_TORCH)
  find_package(Torch QUIET)
  if(Torch_FOUND)
    set(VERL_HAVE_TORCH ON)
    # Debian's c10d headers include gloo's; the GPU image's libtorch carries them itself.
    find_path(VERL_GLOO_INCLUDE gloo/config.h)
    # stdc++ first: the pip wheel's libtorch.so exports a copy of std::filesystem (remove_all,
    # permissions, ...) whose remove_all jumps through a null pointer. With libstdc++ ahead of it
    # among a binary's DT_NEEDED, the dynamic linker binds every std::filesystem call to
    # libstdc++'s own definitions (seen: Checkpoint tests crashed in remove_all on the GPU machine).
    verl_wrap(torch stdc++ ${TORCH_LIBRARIES})
    if(VERL_GLOO_INCLUDE)
      target_include_directories(verl_dep_torch INTERFACE ${VERL_GLOO_INCLUDE})
    endif()
    # TORCH_CXX_FLAGS carries the ABI flag of the libtorch build.
    separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
    target_compile_options(verl_dep_torch INTERFACE ${_torch_flags})
    if(Torch_VERSION)
      set(VERL_TORCH_VERSION "${Torch_VERSION}")
    endif()
    message(STATUS "verlctl: libtorch ${VERL_TORCH_VERSION} found -> trainer module")
  else()
    message(STATUS "verlctl: libtorch not found -> no trainer module")
  endif()
endif()

# CUDA + NCCL: optional; both found -> GPU probes and the NCCL paths are built.
set(VERL_HAVE_CUDA OFF)
set(VERL_CUDA_VERSION "")
set(VERL_NCCL_VERSION "")
if(VERL_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  find_path(VERL_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(VERL_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(CUDAToolkit_FOUND AND VERL_NCCL_INCLUDE AND VERL_NCCL_LIB)
    set(VERL_HAVE_CUDA ON)
    set(VERL_CUDA_VERSION "${CUDAToolkit_VERSION}")
    file(STRINGS "${VERL_NCCL_INCLUDE}/nccl.h" _nccl_lines REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
    foreach(_l ${_nccl_lines})
      if(_l MATCHES "NCCL_([A-Z]+) +([0-9]+)")
        set(_nccl_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
      endif()
    endforeach()
    set(VERL_NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
    add_library(verl_dep_cuda INTERFACE)
    target_include_directories(verl_dep_cuda INTERFACE ${VERL_NCCL_INCLUDE})
    target_link_libraries(verl_dep_cuda INTERFACE CUDA::cudart ${VERL_NCCL_LIB})
    add_library(verl::dep::cuda ALIAS verl_dep_cuda)
    message(STATUS "verlctl: CUDA ${VERL_CUDA_VERSION} + NCCL ${VERL_NCCL_VERSION} found")
  else()
    message(STATUS "verlctl: CUDA/NCCL not found -> GPU parts not compiled in")
  endif()
endif()

if(VERL_BUILD_TESTS)
  find_package(GTest REQUIRED)
  verl_wrap(gtest GTest::gtest GTest::gmock)
endif()
if(VERL_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
