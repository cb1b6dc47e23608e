# MCDC_SANITIZE: "" (off), "address,undefined" or "thread".
set(MCDC_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread")
if(MCDC_SANITIZE)
  if(NOT MCDC_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "MCDC_SANITIZE must be address,undefined or thread (got ${MCDC_SANITIZE})")
  endif()
  set(_san -fsanitize=${MCDC_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${_san})
  add_link_options(${_san})
endif()

# MCDC_FUZZ: libFuzzer targets under tests/fuzz (clang only). Every library is
# built with the fuzzer's coverage instrumentation and ASan + UBSan.
option(MCDC_FUZZ "Build the libFuzzer targets (clang; implies address,undefined)" OFF)
if(MCDC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MCDC_FUZZ needs clang: configure with -DCMAKE_C_COMPILER=clang")
  endif()
  if(NOT MCDC_SANITIZE)
    set(_fz -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
            -fno-omit-frame-pointer)
    add_compile_options(${_fz})
    add_link_options(-fsanitize=address,undefined)
  else()
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
endif()
